"""Chapters 08, 09 and the drill bank (10): the parts of a decoder-only LLM (LLaMA-style GPT), masks, costs.

Reuses chapter 03's RoPE (``apply_rope``, adjacent pairs), chapter 04's ``RMSNorm`` and chapter 01's
``scaled_dot_product_attention``. Contract:
docs/CONTRACT_LLM.md.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import scaled_dot_product_attention
from .ffn_norm import RMSNorm
from .positional import apply_rope


def repeat_kv(x, n_rep):
    """Repeat each key/value head ``n_rep`` times, consecutively, for grouped-query attention.

    ``x (B, G, T, d_k) -> (B, G * n_rep, T, d_k)``; output head ``h`` is input head ``h // n_rep``
    (query heads ``0 .. n_rep-1`` share KV head 0, and so on), as
    ``torch.repeat_interleave(x, n_rep, dim=1)`` -- not ``x.repeat(1, n_rep, 1, 1)``, which
    cycles the heads (``h % G``).

    中文：把每个键/值头连续复制 ``n_rep`` 次：输出第 ``h`` 个头 = 输入第 ``h // n_rep`` 个头
    （相邻的 ``n_rep`` 个查询头共用一个 KV 头），等于 ``repeat_interleave``，不是 ``repeat``（后者按 ``h % G`` 循环）。
    """
    ### BEGIN SOLUTION
    B, G, T, d_k = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None].expand(B, G, n_rep, T, d_k)  # (B, G, 1, T, d_k) -> (B, G, n_rep, T, d_k)
    return x.reshape(B, G * n_rep, T, d_k)  # (B, G * n_rep, T, d_k)
    ### END SOLUTION


class GroupedQueryAttention(nn.Module):
    """Grouped-query self-attention (GQA): ``num_heads`` query heads share ``num_kv_heads`` KV heads.

    ``GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0,
    dropout=0.0)`` with attributes ``W_q`` (``nn.Linear(d_model, d_model, bias=False)``), ``W_k``,
    ``W_v`` (``nn.Linear(d_model, num_kv_heads * d_k, bias=False)``), ``W_o``
    (``nn.Linear(d_model, d_model, bias=False)``), ``num_heads``, ``num_kv_heads``,
    ``d_k = d_model // num_heads``. ``num_kv_heads == num_heads`` is multi-head attention,
    ``num_kv_heads == 1`` multi-query attention. ``ValueError`` unless ``num_heads`` divides
    ``d_model`` and ``num_kv_heads`` divides ``num_heads``.

    ``forward(x (B, T, d_model), mask=None, cache=None) -> (out (B, T, d_model), cache)``:
    ``cache`` is ``None`` or ``(k, v)``, each ``(B, G, T_past, d_k)`` (keys after RoPE, before
    repeating). The new tokens are at positions ``T_past .. T_past + T - 1``; RoPE (when ``rope``)
    rotates q and k by those positions. The returned cache holds all ``T_past + T`` keys/values.
    ``mask``: bool, broadcastable to ``(B, H, T, T_past + T)``, True = may attend (None: all).
    Equals ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)``.

    中文：分组查询注意力：``num_heads`` 个查询头共用 ``num_kv_heads`` 个键/值头（相等时即 MHA，为 1 时即 MQA）。
    投影都没有偏置；``cache`` 为 ``None`` 或 ``(k, v)``（各 ``(B, G, T_past, d_k)``，已做 RoPE、尚未复制），
    新 token 的位置从 ``T_past`` 开始；返回拼接后的新缓存。掩码 True = 可以看，可广播到 ``(B, H, T, T_past + T)``。
    """

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
            raise ValueError(
                f"需要 num_heads 整除 d_model、num_kv_heads 整除 num_heads / num_heads must divide d_model "
                f"and num_kv_heads must divide num_heads: d_model={d_model}, num_heads={num_heads}, "
                f"num_kv_heads={num_kv_heads}"
            )
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.rope, self.rope_base, self.dropout_p = rope, rope_base, dropout
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, mask=None, cache=None):
        if x.dim() != 3:
            raise ValueError(f"x 应为 3 维 (B, T, d_model) / x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        ### BEGIN SOLUTION
        B, T, d_model = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, T, d_model) -> (B, H, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, T, G * d_k) -> (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
        T_past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            positions = torch.arange(T_past, T_past + T, device=x.device)  # (T,)
            q = apply_rope(q, positions, self.rope_base)
            k = apply_rope(k, positions, self.rope_base)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)  # (B, G, T_past + T, d_k)
            v = torch.cat([cache[1], v], dim=2)  # (B, G, T_past + T, d_k)
        n_rep = H // G
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask,
                                              self.dropout_p, self.training)  # (B, H, T, d_k)
        out = out.transpose(1, 2).reshape(B, T, d_model)  # (B, T, H, d_k) -> (B, T, d_model)
        return self.W_o(out), (k, v)
        ### END SOLUTION


class SwiGLU(nn.Module):
    """SwiGLU feed-forward network (PaLM, LLaMA): ``down_proj(silu(gate_proj(x)) * up_proj(x))``.

    ``SwiGLU(d_model, d_ff)`` with attributes ``gate_proj``, ``up_proj``
    (``nn.Linear(d_model, d_ff, bias=False)``) and ``down_proj`` (``nn.Linear(d_ff, d_model,
    bias=False)``). ``forward(x (..., d_model)) -> (..., d_model)``; SiLU (``x * sigmoid(x)``)
    on the gate branch only, the up branch stays linear. Parameters: ``3 * d_model * d_ff``
    (LLaMA picks ``d_ff ≈ 8/3 d_model`` to match a 4x ReLU FFN's count).

    中文：SwiGLU 前馈网络，三个无偏置线性层；SiLU 只作用在 gate 分支上，up 分支保持线性，
    两者逐元素相乘后过 ``down_proj``。
    """

    def __init__(self, d_model, d_ff):
        super().__init__()
        ### BEGIN SOLUTION
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (..., d_ff) -> (..., d_model)
        ### END SOLUTION


class GPTBlock(nn.Module):
    """One decoder-only block (LLaMA-style): Pre-LN with RMSNorm, causal GQA with RoPE, SwiGLU.

    ``GPTBlock(d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, rope_base=10000.0, eps=1e-6)``
    with attributes ``norm1``, ``norm2`` (``RMSNorm(d_model, eps)``), ``attn``
    (``GroupedQueryAttention``, RoPE on), ``ffn`` (``SwiGLU(d_model, d_ff)``), ``dropout``.
    ``forward(x (B, T, d_model), mask=None, cache=None) -> (out (B, T, d_model), cache)``:
    ``h = x + dropout(attn(norm1(x), mask, cache))``, ``out = h + dropout(ffn(norm2(h)))``.

    中文：一个仅解码器块：Pre-LN（RMSNorm 在子层之前，残差路径不归一化）、带 RoPE 的因果 GQA、SwiGLU；
    返回 ``(out, cache)``。
    """

    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, rope_base=10000.0, eps=1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm1 = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope=True, rope_base=rope_base,
                                          dropout=dropout)
        self.norm2 = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, mask=None, cache=None):
        ### BEGIN SOLUTION
        attn_out, cache = self.attn(self.norm1(x), mask, cache)  # (B, T, d_model)
        h = x + self.dropout(attn_out)
        return h + self.dropout(self.ffn(self.norm2(h))), cache
        ### END SOLUTION


class GPT(nn.Module):
    """A small decoder-only language model: token embedding, ``num_layers`` GPTBlocks, final RMSNorm, LM head.

    ``GPT(vocab_size, d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2,
    max_len=256, dropout=0.0, tie_weights=False, rope_base=10000.0)`` with attributes
    ``tok_embed`` (``nn.Embedding(vocab_size, d_model)``), ``blocks`` (``nn.ModuleList``),
    ``norm`` (``RMSNorm``), ``lm_head`` (``nn.Linear(d_model, vocab_size, bias=False)``),
    ``max_len``. ``tie_weights=True`` makes ``lm_head.weight`` the embedding matrix itself.
    Positions come from RoPE inside attention (no positional table).

    - ``forward(idx (B, T)) -> logits (B, T, vocab_size)`` with the causal mask.
    - ``forward_cached(idx (B, T), caches=None) -> (logits, caches)``: ``caches`` one ``(k, v)``
      per block from the previous call (None: empty); query ``i`` sees keys ``j <= T_past + i``.
    ``ValueError`` when the total length exceeds ``max_len``.

    中文：小型仅解码器语言模型。位置信息来自注意力里的 RoPE；``tie_weights`` 时输出层与嵌入共用一个矩阵；
    ``forward_cached`` 用 KV 缓存只计算新 token。
    """

    def __init__(self, vocab_size, d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2,
                 max_len=256, dropout=0.0, tie_weights=False, rope_base=10000.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.max_len = max_len
        self.tok_embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [GPTBlock(d_model, num_heads, num_kv_heads, d_ff, dropout, rope_base) for _ in range(num_layers)]
        )
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        if tie_weights:
            self.lm_head.weight = self.tok_embed.weight  # one (vocab_size, d_model) matrix
        ### END SOLUTION

    def forward(self, idx):
        return self.forward_cached(idx)[0]

    def forward_cached(self, idx, caches=None):
        if idx.dim() != 2:
            raise ValueError(f"idx 应为 2 维 (B, T) / idx must be 2-D (B, T); got {tuple(idx.shape)}")
        ### BEGIN SOLUTION
        T = idx.size(1)
        T_past = 0 if caches is None else caches[0][0].size(2)
        if T_past + T > self.max_len:
            raise ValueError(f"长度 {T_past + T} 超过 max_len={self.max_len} / "
                             f"length {T_past + T} exceeds max_len={self.max_len}")
        # query i (position T_past + i) sees keys 0 .. T_past + i
        mask = torch.ones(T, T_past + T, dtype=torch.bool, device=idx.device).tril(diagonal=T_past)[None, None]
        x = self.drop(self.tok_embed(idx))  # (B, T, d_model)
        new_caches = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, mask, None if caches is None else caches[i])
            new_caches.append(cache)
        return self.lm_head(self.norm(x)), new_caches  # (B, T, vocab_size)
        ### END SOLUTION


def make_sliding_window_mask(T, window, device=None):
    """Causal sliding-window mask (Mistral, Longformer's local attention).

    ``make_sliding_window_mask(T, window, device=None) -> bool (1, 1, T, T)``: query ``i`` may
    attend to key ``j`` iff ``i - window < j <= i`` -- exactly ``window`` keys including itself
    (fewer for the first ``window - 1`` queries). ``window >= T`` gives the causal mask;
    ``ValueError`` when ``window < 1``.

    中文：因果滑动窗口掩码：查询 ``i`` 只能看 ``i - window < j <= i`` 的键，即包括自己在内的 ``window`` 个键。
    """
    if window < 1:
        raise ValueError(f"window 至少为 1 / window must be at least 1; got {window}")
    ### BEGIN SOLUTION
    i = torch.arange(T, device=device)[:, None]  # (T, 1) queries
    j = torch.arange(T, device=device)[None, :]  # (1, T) keys
    return ((j <= i) & (j > i - window))[None, None]  # (1, 1, T, T)
    ### END SOLUTION


def attention_flops_and_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    """FLOPs and attention-matrix bytes of one self-attention layer's forward pass.

    ``attention_flops_and_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4)
    -> (flops, attn_bytes)`` (two ints) for ``batch`` sequences of ``n`` tokens, width ``d``,
    ``H`` query heads, ``G = num_kv_heads or H`` KV heads, ``d_k = d // H``. A multiply-add counts
    2 FLOPs and only matmuls count: projections ``2 n d (2 d + 2 G d_k)`` (W_q, W_o: d x d;
    W_k, W_v: d x G d_k), scores ``Q K^T`` ``2 n^2 d``, ``weights @ V`` ``2 n^2 d``.
    ``attn_bytes = batch * H * n^2 * bytes_per_element``: the (B, H, n, n) matrix a naive
    attention materialises. The n^2 terms overtake the projections when ``4 n^2 d > 8 n d^2``, i.e. ``n > 2 d`` (MHA).

    中文：一层自注意力前向的 FLOPs（乘加算 2 次，只计矩阵乘法）和显式注意力矩阵 (B, H, n, n) 的字节数。
    """
    ### BEGIN SOLUTION
    G = num_kv_heads or H
    d_k = d // H
    projections = 2 * n * d * (2 * d + 2 * G * d_k)
    scores_and_mix = 2 * (2 * n * n * H * d_k)  # Q K^T and weights @ V, each 2 n^2 d_k per head
    return batch * (projections + scores_and_mix), batch * H * n * n * bytes_per_element
    ### END SOLUTION


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    """Bytes a KV cache holds: ``2 * num_layers * num_kv_heads * head_dim * seq_len * batch * bytes``.

    The 2 is K and V; ``seq_len=1`` gives the bytes per token. MHA, GQA and MQA differ only in
    ``num_kv_heads`` (H, G, 1); fp16/bf16 is 2 bytes per element.

    中文：KV 缓存的字节数（K 和 V 两份）；``seq_len=1`` 即每个 token 的字节数；MHA/GQA/MQA 只差在 ``num_kv_heads``。
    """
    ### BEGIN SOLUTION
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch * bytes_per_element
    ### END SOLUTION
