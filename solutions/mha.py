"""Chapter 02: multi-head attention."""
import torch.nn as nn

from .attention import scaled_dot_product_attention


class MultiHeadAttention(nn.Module):
    """Multi-head attention (self-attention when ``x_kv is x_q``, cross-attention otherwise).

    ``MultiHeadAttention(d_model, num_heads, dropout=0.0)`` with attributes ``W_q, W_k, W_v, W_o``
    (each ``nn.Linear(d_model, d_model)``), ``num_heads`` and ``d_k = d_model // num_heads``.
    Raises ``ValueError`` when ``d_model`` is not divisible by ``num_heads``.

    ``forward(x_q, x_kv, mask=None) -> (out, attn)``: ``x_q (B, T_q, d_model)``,
    ``x_kv (B, T_k, d_model)``, ``mask`` bool broadcastable to ``(B, H, T_q, T_k)``
    (True = may attend); ``out (B, T_q, d_model)``, ``attn (B, H, T_q, T_k)`` (per head).

    Hints: split a projection ``(B, T, d_model)`` into heads ``(B, H, T, d_k)`` by viewing the last
    axis as ``(H, d_k)`` and then moving ``H`` in front of ``T`` (chapter 02, section 3); merging is the exact
    inverse (the transposed tensor is not contiguous), followed by ``W_o``.
    / 提示：分头先把最后一维看成 ``(H, d_k)``，再把 ``H`` 挪到 ``T`` 前面（第 02 章第 3 节）；合头是它的逆操作
    （转置后的张量不连续），最后过 ``W_o``。

    中文：多头注意力。属性 ``W_q, W_k, W_v, W_o``（各为 ``nn.Linear(d_model, d_model)``）、``num_heads``、``d_k``；
    ``d_model`` 不能被 ``num_heads`` 整除时抛出 ``ValueError``。``forward(x_q, x_kv, mask=None)`` 返回
    ``out (B, T_q, d_model)`` 和每个头的权重 ``attn (B, H, T_q, T_k)``；掩码 True = 可以看，所有头共用。
    """

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} 不能被 num_heads={num_heads} 整除 / "
                f"d_model={d_model} is not divisible by num_heads={num_heads}"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout_p = dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x_q, x_kv, mask=None):
        if x_q.dim() != 3 or x_kv.dim() != 3:
            raise ValueError(
                f"x_q、x_kv 应为 3 维 (B, T, d_model) / x_q and x_kv must be 3-D (B, T, d_model); "
                f"got {tuple(x_q.shape)} and {tuple(x_kv.shape)}"
            )
        ### BEGIN SOLUTION
        B, T_q, _ = x_q.shape
        T_k = x_kv.size(1)
        H, d_k = self.num_heads, self.d_k
        q = self.W_q(x_q).view(B, T_q, H, d_k).transpose(1, 2)  # (B, T_q, d_model) -> (B, H, T_q, d_k)
        k = self.W_k(x_kv).view(B, T_k, H, d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        v = self.W_v(x_kv).view(B, T_k, H, d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)
        # out: (B, H, T_q, d_k), attn: (B, H, T_q, T_k)
        out = out.transpose(1, 2).contiguous().view(B, T_q, self.d_model)  # (B, T_q, H, d_k) -> (B, T_q, d_model)
        return self.W_o(out), attn
        ### END SOLUTION
