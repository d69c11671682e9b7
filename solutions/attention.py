"""Chapter 01: softmax, attention in NumPy, scaled dot-product attention in PyTorch."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def softmax(x, axis=-1):
    """Numerically stable softmax of a NumPy array along ``axis``.

    Contract: ``softmax(x, axis=-1) -> np.ndarray`` with the same shape as ``x``; the values
    along ``axis`` are positive and sum to 1, also for huge inputs such as ``[1000, 1001]``.

    Hint: softmax(x) == softmax(x - c) for any constant c. Subtract the maximum along
    ``axis`` (``keepdims=True``) before ``np.exp`` so that no exponent overflows.

    中文：沿 ``axis`` 做数值稳定的 softmax，输出与 ``x`` 同形，沿 ``axis`` 为正且和为 1，
    对 ``[1000, 1001]`` 这样的大输入也不溢出。提示：softmax 对整体平移不变。
    """
    ### BEGIN SOLUTION
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)
    ### END SOLUTION


def attention_numpy(Q, K, V, mask=None):
    """Scaled dot-product attention in NumPy.

    Shapes: Q ``(..., T_q, d_k)``, K ``(..., T_k, d_k)``, V ``(..., T_k, d_v)``;
    ``mask`` (optional) bool or 0/1, broadcastable to ``(..., T_q, T_k)``, True = may attend.
    Returns ``(out (..., T_q, d_v), weights (..., T_q, T_k))``.

    Contract: weights = softmax(Q K^T / sqrt(d_k)) over the keys; a query row that may attend
    to no key gets all-zero weights and a zero output (never NaN).

    Hints: ``np.swapaxes(K, -1, -2)`` transposes the last two axes; fill blocked scores with a
    large negative number before the softmax, then set the blocked weights to exactly 0.

    中文：NumPy 版缩放点积注意力，返回 ``(out, weights)``；掩码 True（或 1）= 可以看，
    被遮挡的权重为 0，一个键都看不见的查询行得到全 0 的权重和输出（不是 NaN）。
    """
    ### BEGIN SOLUTION
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        mask = np.asarray(mask).astype(bool)
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)  # fully blocked rows become zeros
    out = weights @ V  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
    return out, weights
    ### END SOLUTION


def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    """Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V.

    Shapes: Q ``(..., T_q, d_k)``, K ``(..., T_k, d_k)``, V ``(..., T_k, d_v)``
    (e.g. ``(B, H, T, d_k)``). ``mask`` (optional) is bool (0/1 accepted), broadcastable to
    the scores ``(..., T_q, T_k)``; True = may attend (as in ``F.scaled_dot_product_attention``).
    Returns ``(out (..., T_q, d_v), attn (..., T_q, T_k))``.

    Contract: scale by ``1 / sqrt(d_k)``; blocked positions get weight 0; a query row with no
    visible key gets zero weights and a zero output, never NaN (also not in the gradients).
    Dropout with probability ``dropout_p`` is applied to the weights only when ``training``;
    the returned ``attn`` is the weights that multiplied V.

    Hints: transpose only the last two axes of K; before the softmax, fill the blocked scores with
    the most negative finite number of their dtype (``torch.finfo``) so that the softmax stays
    finite; after it, set the blocked weights to exactly 0 (this is what zeroes fully blocked rows).
    / 提示：只转置 K 的最后两维；softmax 之前用该 dtype 最小的有限数（``torch.finfo``）填充被遮挡的分数，
    softmax 之后把被遮挡的权重置为 0（全被遮挡的行就是这样变成 0 的）。

    中文：缩放点积注意力，形状与掩码约定见上（True = 可以看，可广播到 ``(..., T_q, T_k)``）；
    除以 ``sqrt(d_k)``；被遮挡位置权重为 0；全被遮挡的行输出 0，前向和梯度里都没有 NaN；
    只在 ``training`` 时对权重做 dropout，返回的 ``attn`` 就是乘到 V 上的那份权重。
    """
    if Q.dim() < 2 or K.dim() < 2 or V.dim() < 2:
        raise ValueError(
            f"Q、K、V 至少需要 2 维 (..., T, d) / Q, K, V need at least 2 dims (..., T, d); "
            f"got Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)}"
        )
    if mask is not None:
        scores_shape = (*torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2]), Q.size(-2), K.size(-2))
        try:
            ok = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"mask 形状 {tuple(mask.shape)} 无法广播到注意力分数 {scores_shape} / "
                f"mask of shape {tuple(mask.shape)} is not broadcastable to the scores {scores_shape}"
            )
    ### BEGIN SOLUTION
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    if mask is not None:
        mask = mask.to(torch.bool)
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    attn = F.softmax(scores, dim=-1)  # (..., T_q, T_k)
    if mask is not None:
        attn = attn.masked_fill(~mask, 0.0)  # fully blocked rows: zeros instead of a uniform row
    if training and dropout_p > 0.0:
        attn = F.dropout(attn, p=dropout_p)
    out = attn @ V  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
    return out, attn
    ### END SOLUTION


class ScaledDotProductAttention(nn.Module):
    """Module wrapper around ``scaled_dot_product_attention``.

    ``ScaledDotProductAttention(dropout=0.0)``; ``forward(Q, K, V, mask=None) -> (out, attn)``
    with the shapes and mask convention of ``scaled_dot_product_attention``.

    Hint: dropout only in training mode: pass ``self.training`` on to the function.

    中文：把上面的函数包成 ``nn.Module``（没有可学习参数），dropout 只在训练模式下生效。
    """

    def __init__(self, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.dropout_p = dropout
        ### END SOLUTION

    def forward(self, Q, K, V, mask=None):
        ### BEGIN SOLUTION
        return scaled_dot_product_attention(Q, K, V, mask, self.dropout_p, self.training)
        ### END SOLUTION
