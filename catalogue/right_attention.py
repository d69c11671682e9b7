"""Right alternatives for softmax and attention: different code, same contract."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def softmax_logsumexp(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return np.exp(x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)))


def attention_numpy_einsum(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        keep = np.broadcast_to(np.asarray(mask) != 0, scores.shape)
        scores = np.where(keep, scores, -np.inf)
        row_max = np.max(scores, axis=-1, keepdims=True)
        e = np.where(keep, np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    else:
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return np.einsum("...qk,...kv->...qv", w, V), w


def sdpa_einsum(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        mask = mask.bool()
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    attn = scores.softmax(dim=-1)
    if mask is not None:
        attn = attn.masked_fill(~mask, 0.0)
    return torch.einsum("...qk,...kv->...qv", attn, V), attn


def sdpa_additive_float_mask(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        keep = mask.to(scores.dtype)  # 1 = attend, 0 = blocked
        scores = scores + (1.0 - keep) * torch.finfo(scores.dtype).min  # additive mask
    attn = torch.softmax(scores, dim=-1)
    if mask is not None:
        attn = attn * keep  # fully blocked rows -> zeros
    return attn @ V, attn


def sdpa_large_negative(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    attn = torch.softmax(scores, dim=-1)
    if mask is not None:
        attn = attn.masked_fill(mask == 0, 0.0)  # the contract: a fully blocked row gives zeros
    return attn @ V, attn


def sdpa_baddbmm(Q, K, V, mask=None, dropout_p=0.0, training=False):
    *lead, T_q, d_k = Q.shape
    T_k = K.size(-2)
    q = Q.reshape(-1, T_q, d_k)  # (N, T_q, d_k)
    k = K.expand(*lead, T_k, d_k).reshape(-1, T_k, d_k)  # (N, T_k, d_k)
    bias = torch.zeros(q.size(0), T_q, T_k, dtype=Q.dtype)
    if mask is not None:
        keep = mask.bool().expand(*lead, T_q, T_k).reshape(-1, T_q, T_k)
        bias = bias.masked_fill(~keep, torch.finfo(Q.dtype).min)
    scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1 / math.sqrt(d_k))  # (N, T_q, T_k)
    attn = scores.softmax(-1)
    if mask is not None:
        attn = attn.masked_fill(~keep, 0.0)
    attn = attn.reshape(*lead, T_q, T_k)
    return attn @ V, attn


def sdpa_handwritten_softmax(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        keep = mask.bool()
        scores = scores.masked_fill(~keep, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)  # exp(-inf) = 0
    total = e.sum(dim=-1, keepdim=True)
    attn = e / total.clamp_min(torch.finfo(e.dtype).tiny)  # fully blocked rows: 0 / tiny = 0
    return attn @ V, attn


def sdpa_minus_inf_nan_to_num(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    attn = torch.nan_to_num(scores.softmax(dim=-1))  # NaN rows -> zeros; gradients stay finite
    return attn @ V, attn


class SDPAModuleEinsum(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.p = dropout

    def forward(self, Q, K, V, mask=None):
        _, attn = sdpa_einsum(Q, K, V, mask)
        attn = F.dropout(attn, self.p, self.training)  # dropout on the weights, in training mode only
        return torch.einsum("...qk,...kv->...qv", attn, V), attn


CASES = [
    ("softmax", softmax_logsumexp),
    ("attention_numpy", attention_numpy_einsum),
    ("scaled_dot_product_attention", sdpa_einsum),
    ("scaled_dot_product_attention", sdpa_additive_float_mask),
    ("scaled_dot_product_attention", sdpa_large_negative),
    ("scaled_dot_product_attention", sdpa_baddbmm),
    ("scaled_dot_product_attention", sdpa_handwritten_softmax),
    ("scaled_dot_product_attention", sdpa_minus_inf_nan_to_num),
    ("ScaledDotProductAttention", SDPAModuleEinsum),
]
