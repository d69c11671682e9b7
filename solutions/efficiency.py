"""Chapter 13: efficiency by hand. Online softmax, tiled attention (FlashAttention's forward), a
mixture-of-experts layer with its load-balancing loss, symmetric INT8 per-channel quantization, and (bonus)
multi-head latent attention's compressed KV cache.

Reuses chapter 08's ``SwiGLU`` as the experts. Each piece equals its plain version: ``online_softmax``
equals ``torch.softmax``, ``tiled_attention`` equals chapter 01's ``scaled_dot_product_attention``
(tests/test_reference_efficiency.py proves them).
"""
import math

import torch
import torch.nn as nn

from .attention import scaled_dot_product_attention
from .llm import SwiGLU


def online_softmax(x):
    """Softmax over the last axis in **one pass** over its elements (Milakov & Gimelshein, 2018).

    Walks the last axis once, keeping for every row a running maximum ``m`` and a running sum
    ``s = sum_j exp(x_j - m)``. When a new element raises the maximum to ``m_new``, the sum so far is
    rescaled by ``exp(m - m_new)`` before the new term ``exp(x_j - m_new)`` is added; at the end
    ``y = exp(x - m) / s``. Equals ``torch.softmax(x, dim=-1)``; any shape ``(..., n)`` with ``n >= 1``.

    中文：沿最后一维的一遍（one-pass）softmax：每行维护到目前为止的最大值 ``m`` 与和 ``s``；
    新元素把最大值抬到 ``m_new`` 时，先把旧的和乘以 ``exp(m - m_new)``（重新缩放），再加上
    ``exp(x_j - m_new)``；最后 ``y = exp(x - m) / s``。结果等于 ``torch.softmax(x, dim=-1)``。
    """
    ### BEGIN SOLUTION
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)  # (...,) running max
    s = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)                # (...,) running sum
    for j in range(x.shape[-1]):
        x_j = x[..., j]                                                          # (...,)
        m_new = torch.maximum(m, x_j)
        s = s * torch.exp(m - m_new) + torch.exp(x_j - m_new)                    # rescale, then add
        m = m_new
    return torch.exp(x - m[..., None]) / s[..., None]                            # (..., n)
    ### END SOLUTION


def tiled_attention(q, k, v, block_size=64, causal=False):
    """Attention's forward in blocks, as FlashAttention computes it, never holding a ``T_q x T_k`` matrix.

    ``q (..., T_q, d)``, ``k (..., T_k, d)``, ``v (..., T_k, d_v)`` -> ``(..., T_q, d_v)``, equal to
    ``softmax(q k^T / sqrt(d)) v`` (chapter 01's ``scaled_dot_product_attention``). For each block of
    at most ``block_size`` queries, the keys and values are visited in blocks of ``block_size``: the
    block's scores ``(..., b_q, b_k)``, a running row maximum ``m``, a running sum ``row_sum`` and an output
    accumulator ``acc``, both rescaled by ``exp(m_old - m_new)`` whenever the maximum grows; the
    accumulator is divided by ``row_sum`` once, at the end. The largest temporary is ``b_q x b_k``.

    ``causal=True`` (needs ``T_q == T_k``): query ``i`` sees keys ``j <= i``; key blocks entirely above
    the diagonal are skipped, and the diagonal block is masked inside. ``ValueError`` (bilingual)
    for ``block_size < 1`` or a causal call with ``T_q != T_k``.

    中文：分块计算注意力的前向（FlashAttention 的做法），从不生成 ``T_q x T_k`` 的矩阵：每块查询依次
    走过每块键/值，维护每行的运行最大值 ``m``、运行和 ``row_sum`` 与输出累加器 ``acc``；最大值变大时
    ``row_sum`` 和 ``acc`` 都乘以 ``exp(m_old - m_new)``，最后才除以 ``row_sum``。``causal=True`` 时跳过
    对角线以上的整块，对角线上的块在块内遮挡。
    """
    if block_size < 1:
        raise ValueError(f"block_size 必须 >= 1 / block_size must be >= 1, got {block_size}")
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    if causal and T_q != T_k:
        raise ValueError(f"causal=True 需要 T_q == T_k / causal=True needs T_q == T_k, got {T_q} and {T_k}")
    ### BEGIN SOLUTION
    scale = 1.0 / math.sqrt(d)
    out = q.new_empty(q.shape[:-1] + v.shape[-1:])                               # (..., T_q, d_v)
    for i0 in range(0, T_q, block_size):
        q_blk = q[..., i0:i0 + block_size, :]                                    # (..., b_q, d)
        b_q = q_blk.shape[-2]
        m = q.new_full(q_blk.shape[:-1], float("-inf"))                          # (..., b_q) running max
        row_sum = q.new_zeros(q_blk.shape[:-1])                                  # (..., b_q) running sum
        acc = q.new_zeros(q_blk.shape[:-1] + v.shape[-1:])                       # (..., b_q, d_v)
        k_end = min(T_k, i0 + b_q) if causal else T_k                            # later key blocks are all masked
        for j0 in range(0, k_end, block_size):
            k_blk, v_blk = k[..., j0:j0 + block_size, :], v[..., j0:j0 + block_size, :]   # (..., b_k, d)
            scores = q_blk @ k_blk.transpose(-2, -1) * scale                     # (..., b_q, d) @ (..., d, b_k)
            if causal and j0 + k_blk.shape[-2] > i0:                             # the block crosses the diagonal
                rows = torch.arange(i0, i0 + b_q, device=q.device)[:, None]      # (b_q, 1) query positions
                cols = torch.arange(j0, j0 + k_blk.shape[-2], device=q.device)[None, :]   # (1, b_k)
                scores = scores.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1))                        # (..., b_q)
            p = torch.exp(scores - m_new[..., None])                             # (..., b_q, b_k)
            rescale = torch.exp(m - m_new)                                       # (..., b_q)
            row_sum = row_sum * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v_blk                           # (..., b_q, b_k) @ (..., b_k, d_v)
            m = m_new
        out[..., i0:i0 + b_q, :] = acc / row_sum[..., None]
    return out
    ### END SOLUTION


class TopKRouter(nn.Module):
    """The router of a mixture of experts: a linear gate, a softmax over **all** experts, then the top k.

    ``TopKRouter(d_model, num_experts, top_k=2, normalize=True)`` with attribute ``gate``
    (``nn.Linear(d_model, num_experts, bias=False)``). ``forward(x (N, d_model)) ->
    (weights (N, top_k), indices (N, top_k) long, logits (N, num_experts))``: ``probs =
    softmax(logits)`` over the experts, ``weights, indices = probs.topk(top_k)`` (largest first);
    ``normalize=True`` divides the k weights by their sum (Mixtral, Qwen-MoE, DeepSeek-V3), which
    equals a softmax over the k chosen logits (Mixtral's top-k-then-softmax); ``normalize=False``
    keeps the full softmax's probabilities (Switch Transformer with k = 1, DeepSeek-V2), where
    top-k-then-softmax is a different, wrong answer.

    中文：MoE 的路由器：线性门控，先在**全部**专家上做 softmax，再取前 k 个。``normalize=True`` 时把
    k 个权重除以它们的和（Mixtral、Qwen-MoE、DeepSeek-V3；这正等于“先 top-k 再 softmax”）；
    ``normalize=False`` 时保留全体 softmax 的概率（Switch、DeepSeek-V2），此时先 top-k 再 softmax 就错了。
    """

    def __init__(self, d_model, num_experts, top_k=2, normalize=True):
        super().__init__()
        self.top_k, self.normalize = top_k, normalize
        ### BEGIN SOLUTION
        self.gate = nn.Linear(d_model, num_experts, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        logits = self.gate(x)                                                    # (N, E)
        probs = torch.softmax(logits, dim=-1)                                    # over all experts
        weights, indices = probs.topk(self.top_k, dim=-1)                        # (N, k) each
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, indices, logits
        ### END SOLUTION


class MoELayer(nn.Module):
    """A sparse mixture-of-experts feed-forward layer: each token goes to its router's top k experts.

    ``MoELayer(d_model, d_ff, num_experts, top_k=2, normalize=True)`` with attributes ``router``
    (``TopKRouter(d_model, num_experts, top_k, normalize)``) and ``experts`` (an ``nn.ModuleList`` of
    ``num_experts`` ``SwiGLU(d_model, d_ff)``). ``forward(x (B, T, d_model)) -> (out (B, T, d_model),
    logits (B*T, num_experts), indices (B*T, top_k))``: the tokens flattened to ``(N, d_model)``, each
    expert run once on the tokens routed to it, its output weighted by that token's router weight
    and added in place: ``out_t = sum_{e in top-k(t)} w_{t,e} * expert_e(x_t)``.

    中文：稀疏 MoE 前馈层：每个 token 只送到路由器选出的 k 个专家；每个专家只在分给它的 token 上
    运行一次，输出乘以该 token 的路由权重后加回原位置。
    """

    def __init__(self, d_model, d_ff, num_experts, top_k=2, normalize=True):
        super().__init__()
        ### BEGIN SOLUTION
        self.router = TopKRouter(d_model, num_experts, top_k, normalize)
        self.experts = nn.ModuleList(SwiGLU(d_model, d_ff) for _ in range(num_experts))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        B, T, d_model = x.shape
        tokens = x.reshape(B * T, d_model)                                       # (N, d_model)
        weights, indices, logits = self.router(tokens)                           # (N, k), (N, k), (N, E)
        out = torch.zeros_like(tokens)                                           # (N, d_model)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(indices == e)                          # (n_e,) each
            if token_idx.numel():
                y = expert(tokens[token_idx]) * weights[token_idx, slot, None]   # (n_e, d_model)
                out = out.index_add(0, token_idx, y)
        return out.reshape(B, T, d_model), logits, indices                       # (B, T, d_model)
        ### END SOLUTION


def load_balancing_loss(router_logits, expert_index, num_experts):
    """The Switch / Mixtral auxiliary load-balancing loss ``N * sum_i f_i * P_i`` (Fedus et al., 2021).

    ``router_logits (T, N)`` of ``T`` tokens over ``N = num_experts`` experts, ``expert_index (T, k)``
    the experts each token was sent to. ``f_i``: the fraction of the tokens sent to expert ``i``
    (counted from ``expert_index``, a token counts once for each of its k experts, so the f sum to k:
    Hugging Face's ``load_balancing_loss_func``); ``P_i``: the mean over tokens of the router's softmax
    probability of expert ``i``. A uniform router with balanced counts gives ``k``; the loss is
    smallest when both are uniform. A scalar tensor, differentiable through ``P`` only.

    中文：Switch / Mixtral 的负载均衡辅助损失 ``N * sum_i f_i * P_i``：``f_i`` 是被分给专家 ``i``
    的 token 比例（按 ``expert_index`` 计数，不是概率；一个 token 对它的 k 个专家各计一次），
    ``P_i`` 是路由 softmax（沿专家维）中专家 ``i`` 的概率对 token 求平均。
    """
    ### BEGIN SOLUTION
    T = router_logits.shape[0]
    probs = torch.softmax(router_logits, dim=-1)                                 # (T, N), over the experts
    counts = torch.bincount(expert_index.reshape(-1), minlength=num_experts)     # (N,)
    f = counts.to(probs.dtype) / T                                               # fraction of tokens
    P = probs.mean(dim=0)                                                        # (N,) mean over tokens
    return num_experts * (f * P).sum()
    ### END SOLUTION


def quantize_int8(w):
    """Symmetric INT8 quantization with one scale per output channel (a row of ``w (out, in)``).

    ``scale = max_j |w_ij| / 127`` for each row (shape ``(out, 1)``, the dtype of ``w``), ``q =
    round(w / scale)`` clamped to ``[-127, 127]`` as ``torch.int8``. A row of zeros gets scale 1
    (its q is 0). Returns ``(q, scale)``; ``dequantize_int8(q, scale)`` is within ``scale / 2`` of
    ``w``, element by element.

    中文：对称 INT8 逐输出通道量化：每行一个 ``scale = 该行最大绝对值 / 127``，``q = round(w / scale)``
    并截断到 ``[-127, 127]``，存成 ``torch.int8``；全零的行 scale 取 1。
    """
    ### BEGIN SOLUTION
    absmax = w.abs().amax(dim=1, keepdim=True)                                   # (out, 1)
    scale = torch.where(absmax > 0, absmax / 127, torch.ones_like(absmax))
    q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)                   # (out, in)
    return q, scale
    ### END SOLUTION


def dequantize_int8(q, scale):
    """``q (out, in) int8`` and ``scale (out, 1)`` back to floating point: ``q * scale`` in the scale's dtype.

    中文：反量化：``q * scale``，类型与 scale 相同。
    """
    ### BEGIN SOLUTION
    return q.to(scale.dtype) * scale                                             # (out, in) * (out, 1)
    ### END SOLUTION


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2), its KV compression: the cache holds one latent vector a token.

    ``MultiHeadLatentAttention(d_model, num_heads, d_latent)`` with attributes ``W_q`` (``nn.Linear(d_model,
    d_model, bias=False)``), ``W_dkv`` (``nn.Linear(d_model, d_latent, bias=False)``, the down-projection),
    ``W_uk`` and ``W_uv`` (``nn.Linear(d_latent, d_model, bias=False)``, the up-projections of keys and values)
    and ``W_o`` (``nn.Linear(d_model, d_model, bias=False)``); ``d_k = d_model // num_heads``. Without
    DeepSeek's decoupled RoPE key (chapter 13 reads about it).

    ``forward(x (B, T, d_model), mask=None, cache=None) -> (out (B, T, d_model), cache (B, T_past + T,
    d_latent))``: ``c = W_dkv(x)`` appended to ``cache`` (the latents of earlier tokens, or None), keys
    ``W_uk(c)`` and values ``W_uv(c)`` of every cached token split into heads, chapter 01's attention with
    ``mask`` (bool, True = may attend, broadcastable to ``(B, H, T, T_past + T)``), heads merged, ``W_o``.

    中文：多头潜在注意力（DeepSeek-V2）的 KV 压缩：每个 token 只缓存一个 ``d_latent`` 维的潜向量
    ``c = W_dkv(x)``；用时由 ``W_uk``、``W_uv`` 升回每个头的 K 和 V。不含解耦的 RoPE key。
    """

    def __init__(self, d_model, num_heads, d_latent):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        ### BEGIN SOLUTION
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_dkv = nn.Linear(d_model, d_latent, bias=False)
        self.W_uk = nn.Linear(d_latent, d_model, bias=False)
        self.W_uv = nn.Linear(d_latent, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, mask=None, cache=None):
        ### BEGIN SOLUTION
        B, T, d_model = x.shape
        latent = self.W_dkv(x)                                                   # (B, T, d_latent)
        if cache is not None:
            latent = torch.cat([cache, latent], dim=1)                           # (B, T_past + T, d_latent)
        T_k = latent.shape[1]
        q = self.W_q(x).view(B, T, self.num_heads, self.d_k).transpose(1, 2)     # (B, H, T, d_k)
        k = self.W_uk(latent).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        v = self.W_uv(latent).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        out, _ = scaled_dot_product_attention(q, k, v, mask)                     # (B, H, T, d_k)
        out = out.transpose(1, 2).reshape(B, T, d_model)                         # (B, T, H, d_k) -> (B, T, d_model)
        return self.W_o(out), latent
        ### END SOLUTION
