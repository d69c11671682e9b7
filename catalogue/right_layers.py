"""Right alternatives for the layers, the Transformer, greedy decoding and its KV cache (earlier chapters provided)."""
import math

import torch
import torch.nn as nn

from .reference import load

R = load()
MultiHeadAttention, FeedForward, ResidualLayerNorm = R["MultiHeadAttention"], R["FeedForward"], R["ResidualLayerNorm"]
EncoderLayer, DecoderLayer, PositionalEncoding = R["EncoderLayer"], R["DecoderLayer"], R["PositionalEncoding"]


class ResidualLayerNormFunctional(nn.Module):
    """LayerNorm written inline with torch.var_mean (biased) and rsqrt; the contract's ``ln`` keeps its parameters."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = R["LayerNorm"](d_model, eps)

    def forward(self, x, sublayer_out):
        h = x + sublayer_out  # (..., d_model)
        var, mean = torch.var_mean(h, dim=-1, keepdim=True, correction=0)  # (..., 1) each
        return (h - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias


class EncoderLayerOwnDropouts(nn.Module):
    """One nn.Dropout per sublayer (no parameters, so the state_dict keys stay the contract's)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = ResidualLayerNorm(d_model), ResidualLayerNorm(d_model)
        self.drop_attn, self.drop_ffn = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, src_mask=None):
        out, attn = self.self_attn(x, x, mask=src_mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x, self.drop_attn(out))
        return self.norm2(x, self.drop_ffn(self.ffn(x))), attn


class DecoderLayerSublayerList(nn.Module):
    """The three sublayers as (attention-or-FFN, norm) steps in a loop, keyword arguments throughout."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (ResidualLayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        weights = []
        steps = [(lambda h: self.self_attn(x_q=h, x_kv=h, mask=tgt_mask), self.norm1),
                 (lambda h: self.cross_attn(x_q=h, x_kv=memory, mask=memory_mask), self.norm2)]
        for sublayer, norm in steps:
            out, w = sublayer(y)  # (B, T_t, d_model), (B, H, T_t, T_t or T_s)
            y = norm(y, self.dropout(out))
            weights.append(w)
        return self.norm3(y, self.dropout(self.ffn(y))), tuple(weights)


class TransformerAlternative(nn.Module):
    """Masks from ``triu`` (True = blocked, then inverted), a ``_key_mask`` helper, ``** 0.5`` scaling."""

    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.out_proj = nn.Linear(d_model, tgt_vocab)

    def _key_mask(self, tokens):
        return (tokens != self.pad_id).view(tokens.size(0), 1, 1, tokens.size(1))  # (B, 1, 1, T)

    def encode(self, src):
        x = self.pos_enc(self.src_embed(src) * self.d_model ** 0.5)  # (B, T_s, d_model)
        for layer in self.encoder_layers:
            x = layer(x, self._key_mask(src))[0]
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tgt_in.device), diagonal=1)  # (T, T)
        tgt_mask = self._key_mask(tgt_in) & ~future  # (B, 1, T, T)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))  # (B, T_t, d_model)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)[0]
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), self._key_mask(src)))  # (B, T_t, tgt_vocab)



@torch.no_grad()
def greedy_decode_where(model, src, bos_id, eos_id, max_new_tokens):
    """Projects every position and keeps ``torch.where`` for the finished rows."""
    memory, src_mask = model.encode(src), (src != model.pad_id)[:, None, None, :]  # (B, T_s, d), (B, 1, 1, T_s)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)  # (B,)
    for _ in range(max_new_tokens):
        logits = model.out_proj(model.decode(ys, memory, src_mask))  # (B, T, tgt_vocab): every position
        token = torch.where(done, torch.full_like(done, model.pad_id, dtype=torch.long), logits[:, -1].argmax(-1))
        ys = torch.cat([ys, token[:, None]], dim=1)  # (B, T + 1)
        done = done | (token == eos_id)
        if bool(done.all()):
            break
    return ys


@torch.no_grad()
def greedy_decode_cached_einsum(model, src, bos_id, eos_id, max_new_tokens):
    """KV cache as preallocated (L, B, H, max_new_tokens, d_k) tensors filled in place, attention written
    with einsum and masked_fill, the positional table indexed at the step."""
    B, d = src.size(0), model.d_model
    src_keep = src != model.pad_id  # (B, T_s)
    memory = model.encode(src)  # (B, T_s, d)
    layers = list(model.decoder_layers)
    H = layers[0].self_attn.num_heads
    d_k = d // H

    def split(x):
        return x.view(B, -1, H, d_k).transpose(1, 2)  # (B, T, d) -> (B, H, T, d_k)

    def attend(q, k, v, keep):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_k)  # (B, H, 1, T_k)
        weights = scores.masked_fill(~keep[:, None, None, :], float("-inf")).softmax(-1)
        return torch.einsum("bhqk,bhkd->bhqd", weights, v).transpose(1, 2).reshape(B, 1, d)  # (B, 1, d)

    mem_k = [split(layer.cross_attn.W_k(memory)) for layer in layers]  # each (B, H, T_s, d_k)
    mem_v = [split(layer.cross_attn.W_v(memory)) for layer in layers]
    cache_k = memory.new_zeros(len(layers), B, H, max_new_tokens, d_k)
    cache_v = torch.zeros_like(cache_k)
    out = torch.full((B, 1 + max_new_tokens), model.pad_id, dtype=torch.long)
    out[:, 0] = bos_id
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max_new_tokens):
        x = model.tgt_embed(out[:, t : t + 1]) * math.sqrt(d) + model.pos_enc.pe[:, t : t + 1]  # (B, 1, d)
        keep = out[:, : t + 1] != model.pad_id  # (B, t + 1): a PAD an unfinished row emitted stays hidden
        for i, layer in enumerate(layers):
            cache_k[i, :, :, t : t + 1] = split(layer.self_attn.W_k(x))
            cache_v[i, :, :, t : t + 1] = split(layer.self_attn.W_v(x))
            a = attend(split(layer.self_attn.W_q(x)), cache_k[i, :, :, : t + 1], cache_v[i, :, :, : t + 1], keep)
            x = layer.norm1(x, layer.self_attn.W_o(a))
            a = attend(split(layer.cross_attn.W_q(x)), mem_k[i], mem_v[i], src_keep)
            x = layer.norm2(x, layer.cross_attn.W_o(a))
            x = layer.norm3(x, layer.ffn(x))
        token = model.out_proj(x[:, 0]).argmax(-1).masked_fill(done, model.pad_id)  # (B,)
        out[:, t + 1] = token
        done |= token == eos_id
        if done.all():
            return out[:, : t + 2]
    return out


class RMSNormRsqrt(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight  # (..., d_model)


CASES = [
    ("ResidualLayerNorm", ResidualLayerNormFunctional),
    ("EncoderLayer", EncoderLayerOwnDropouts),
    ("DecoderLayer", DecoderLayerSublayerList),
    ("Transformer", TransformerAlternative),
    ("greedy_decode", greedy_decode_where),
    ("greedy_decode_cached", greedy_decode_cached_einsum),
    ("RMSNorm", RMSNormRsqrt),
]
