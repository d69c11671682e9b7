"""Chapter 06: the whole encoder-decoder Transformer, greedy decoding (bonus: KV cache)."""
import math

import torch
import torch.nn as nn

from .attention import scaled_dot_product_attention
from .layers import DecoderLayer, EncoderLayer
from .masks import make_pad_mask, make_subsequent_mask
from .positional import PositionalEncoding


class Transformer(nn.Module):
    """Encoder-decoder Transformer (Post-LN, sinusoidal positions), batch-first.

    ``Transformer(src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
    dropout=0.1, max_len=512, pad_id=0)`` with attributes ``src_embed, tgt_embed``
    (``nn.Embedding``), ``pos_enc`` (``PositionalEncoding``, shared by both sides),
    ``encoder_layers, decoder_layers`` (``nn.ModuleList`` of ``num_layers`` layers each),
    ``out_proj`` (``nn.Linear(d_model, tgt_vocab)``), ``d_model`` and ``pad_id``.

    - ``encode(src (B, T_s)) -> memory (B, T_s, d_model)``; embeddings times ``sqrt(d_model)``,
      plus positions, then the encoder layers with ``src_mask = make_pad_mask(src, pad_id)``.
    - ``decode(tgt_in (B, T_t), memory, src_mask=None) -> hidden (B, T_t, d_model)``; the
      decoder self-attention mask is ``make_pad_mask(tgt_in, pad_id) & make_subsequent_mask(T_t)``,
      the cross-attention mask is ``src_mask``. Both sides use ``self.pad_id``, never a hard-coded 0.
    - ``forward(src, tgt_in) -> logits (B, T_t, tgt_vocab)`` (no softmax).
    - ``greedy_decode(src, bos_id, eos_id, max_new_tokens)``: returns
      ``greedy_decode(self, src, bos_id, eos_id, max_new_tokens)``, the function of the next exercise.

    中文：编码器-解码器 Transformer（Post-LN，正弦位置编码，批次在前）。属性名见上；嵌入乘 ``sqrt(d_model)``
    再加位置编码；掩码在模型内部由 ``self.pad_id`` 构造（源：填充掩码；目标：填充 & 因果）；``forward`` 返回 logits
    （不做 softmax）；方法 ``greedy_decode`` 直接调用下一个练习的函数 ``greedy_decode(self, ...)``。
    """

    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]
        )
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]
        )
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        # Xavier init for every matrix (as in the Annotated Transformer). On an embedding (V, d) it
        # gives std sqrt(2 / (V + d)), which depends on V: times sqrt(d_model) it matches the PE's
        # scale for this course's small vocabularies (V = 13, d = 64: RMS 1.3 vs the PE's 0.71), but
        # is about 4x smaller than the PE for V = 37000, d = 512 (RMS 0.17); the paper's own code
        # draws embeddings from N(0, d_model ** -0.5), which times sqrt(d_model) gives RMS 1. The
        # default N(0, 1) embeddings would be worse: times sqrt(d_model) they drown the positions.
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        ### END SOLUTION

    def encode(self, src):
        if src.dim() != 2:
            raise ValueError(f"src 应为 2 维 (B, T_s) / src must be 2-D (B, T_s); got {tuple(src.shape)}")
        ### BEGIN SOLUTION
        src_mask = make_pad_mask(src, self.pad_id)  # (B, 1, 1, T_s)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))  # (B, T_s, d_model)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x
        ### END SOLUTION

    def decode(self, tgt_in, memory, src_mask=None):
        if tgt_in.dim() != 2:
            raise ValueError(f"tgt_in 应为 2 维 (B, T_t) / tgt_in must be 2-D (B, T_t); got {tuple(tgt_in.shape)}")
        ### BEGIN SOLUTION
        T_t = tgt_in.size(1)
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(T_t, tgt_in.device)  # (B, 1, T_t, T_t)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))  # (B, T_t, d_model)
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask, src_mask)
        return y
        ### END SOLUTION

    def forward(self, src, tgt_in):
        ### BEGIN SOLUTION
        src_mask = make_pad_mask(src, self.pad_id)  # (B, 1, 1, T_s)
        memory = self.encode(src)  # (B, T_s, d_model)
        return self.out_proj(self.decode(tgt_in, memory, src_mask))  # (B, T_t, tgt_vocab)
        ### END SOLUTION

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        return greedy_decode(self, src, bos_id, eos_id, max_new_tokens)  # the function below: its own exercise


@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    """Greedy decoding with a contract ``Transformer``; ``Transformer.greedy_decode`` calls it.

    ``greedy_decode(model, src (B, T_s), bos_id, eos_id, max_new_tokens)
    -> LongTensor (B, <= 1 + max_new_tokens)``:

    - ``model.encode`` the source once (``src_mask = make_pad_mask(src, model.pad_id)``);
    - every row starts with ``bos_id``; each step runs ``model.decode`` on the tokens so far and
      appends the arg-max of ``model.out_proj`` at the **last** position;
    - once a row has emitted ``eos_id``, it gets ``model.pad_id`` from then on;
    - stop as soon as every row has emitted ``eos_id``, after ``max_new_tokens`` steps at most.

    It runs under ``@torch.no_grad()`` and never changes the model's mode: call ``model.eval()``
    first (dropout off).

    中文：贪心解码。先编码一次源序列；每行从 ``bos_id`` 开始，每步对**最后一个位置**的 logits 取 argmax 接到末尾；
    一行输出过 ``eos_id`` 之后一律接 ``model.pad_id``；**所有行**都输出过 ``eos_id`` 就立即停止，最多生成
    ``max_new_tokens`` 个 token。返回 LongTensor，形状 ``(B, ≤ 1 + max_new_tokens)``。调用前先 ``model.eval()``。
    """
    ### BEGIN SOLUTION
    B = src.size(0)
    src_mask = make_pad_mask(src, model.pad_id)  # (B, 1, 1, T_s)
    memory = model.encode(src)  # (B, T_s, d_model)
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
    for _ in range(max_new_tokens):
        hidden = model.decode(ys, memory, src_mask)  # (B, T, d_model)
        next_token = model.out_proj(hidden[:, -1]).argmax(dim=-1)  # (B, d_model) -> (B, tgt_vocab) -> (B,)
        next_token = next_token.masked_fill(finished, model.pad_id)  # finished rows get padding
        ys = torch.cat([ys, next_token.unsqueeze(1)], dim=1)  # (B, T + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return ys
    ### END SOLUTION


@torch.no_grad()
def greedy_decode_cached(model, src, bos_id, eos_id, max_new_tokens):
    """Bonus: greedy decoding with a key/value cache; returns exactly ``greedy_decode``'s tokens.

    ``greedy_decode_cached(model, src (B, T_s), bos_id, eos_id, max_new_tokens)
    -> LongTensor (B, <= 1 + max_new_tokens)``, same stopping and padding rules as
    ``greedy_decode``. ``model`` is a contract ``Transformer`` in eval mode (it uses
    ``encode``, ``tgt_embed``, ``pos_enc.pe``, ``decoder_layers``, ``out_proj``, ``d_model``,
    ``pad_id`` and each attention's ``W_q, W_k, W_v, W_o, num_heads``).

    Plain greedy decoding re-runs the decoder over the whole prefix at every step: O(T^2) token
    passes for T new tokens. Here each step feeds only the newest token: its key and value are
    appended to a per-layer cache, its query attends to all cached keys (so no causal mask is
    needed), and the cross-attention keys/values of ``memory`` are projected once.
    """
    ### BEGIN SOLUTION
    B = src.size(0)
    d_model, pad_id = model.d_model, model.pad_id
    src_mask = make_pad_mask(src, pad_id)  # (B, 1, 1, T_s)
    memory = model.encode(src)  # (B, T_s, d_model)

    def split_heads(x, num_heads):
        return x.view(B, x.size(1), num_heads, -1).transpose(1, 2)  # (B, T, d_model) -> (B, H, T, d_k)

    def merge_heads(x):
        return x.transpose(1, 2).reshape(B, x.size(2), d_model)  # (B, H, T, d_k) -> (B, T, d_model)

    cross_kv = [
        (split_heads(layer.cross_attn.W_k(memory), layer.cross_attn.num_heads),  # (B, H, T_s, d_k)
         split_heads(layer.cross_attn.W_v(memory), layer.cross_attn.num_heads))  # (B, H, T_s, d_k)
        for layer in model.decoder_layers
    ]
    self_kv = [None] * len(model.decoder_layers)
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
    for t in range(max_new_tokens):
        if t >= model.pos_enc.pe.size(1):
            raise ValueError(f"解码长度超过 max_len={model.pos_enc.pe.size(1)} / decoding exceeds max_len")
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(d_model) + model.pos_enc.pe[:, t : t + 1]  # (B, 1, d_model)
        key_mask = make_pad_mask(ys, pad_id)  # (B, 1, 1, t + 1): every cached key, padding hidden
        for i, layer in enumerate(model.decoder_layers):
            sa, ca = layer.self_attn, layer.cross_attn
            k_new = split_heads(sa.W_k(x), sa.num_heads)  # (B, H, 1, d_k)
            v_new = split_heads(sa.W_v(x), sa.num_heads)  # (B, H, 1, d_k)
            if self_kv[i] is not None:
                k_new = torch.cat([self_kv[i][0], k_new], dim=2)  # (B, H, t + 1, d_k)
                v_new = torch.cat([self_kv[i][1], v_new], dim=2)  # (B, H, t + 1, d_k)
            self_kv[i] = (k_new, v_new)
            # q (B, H, 1, d_k) @ k^T (B, H, d_k, t + 1) -> scores (B, H, 1, t + 1) -> out (B, H, 1, d_k)
            out, _ = scaled_dot_product_attention(split_heads(sa.W_q(x), sa.num_heads), k_new, v_new, key_mask)
            x = layer.norm1(x, sa.W_o(merge_heads(out)))  # out: (B, H, 1, d_k) -> (B, 1, d_model)
            # q (B, H, 1, d_k) against the cached memory keys (B, H, T_s, d_k) -> out (B, H, 1, d_k)
            out, _ = scaled_dot_product_attention(split_heads(ca.W_q(x), ca.num_heads), *cross_kv[i], src_mask)
            x = layer.norm2(x, ca.W_o(merge_heads(out)))  # out: (B, H, 1, d_k) -> (B, 1, d_model)
            x = layer.norm3(x, layer.ffn(x))  # (B, 1, d_model)
        next_token = model.out_proj(x[:, -1]).argmax(dim=-1)  # (B, d_model) -> (B, tgt_vocab) -> (B,)
        next_token = next_token.masked_fill(finished, pad_id)
        ys = torch.cat([ys, next_token.unsqueeze(1)], dim=1)  # (B, t + 2)
        finished |= next_token == eos_id
        if finished.all():
            break
    return ys
    ### END SOLUTION
