"""Wrong softmax / attention implementations, one classic bug each."""
import math

import numpy as np
import torch
import torch.nn.functional as F


def softmax_no_max(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_always_last_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_whole_array(x, axis=-1):
    e = np.exp(x - x.max())
    return e / e.sum()  # bug: the whole array sums to 1, not each slice along axis


def attention_numpy_no_scale(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(np.asarray(mask).astype(bool), scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    if mask is not None:
        w = np.where(np.asarray(mask).astype(bool), w, 0.0)
    return w @ V, w


def _sdpa(Q, K, V, mask, scale, dim=-1, invert=False):
    scores = Q @ K.transpose(-2, -1) / scale
    if mask is not None:
        mask = mask.bool()
        blocked = mask if invert else ~mask
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    attn = F.softmax(scores, dim=dim)
    if mask is not None:
        attn = attn.masked_fill(blocked, 0.0)
    return attn @ V, attn


def sdpa_no_scale(Q, K, V, mask=None, dropout_p=0.0, training=False):
    return _sdpa(Q, K, V, mask, 1.0)


def sdpa_scale_by_dk(Q, K, V, mask=None, dropout_p=0.0, training=False):
    return _sdpa(Q, K, V, mask, Q.size(-1))


def sdpa_softmax_dim_2(Q, K, V, mask=None, dropout_p=0.0, training=False):
    return _sdpa(Q, K, V, mask, math.sqrt(Q.size(-1)), dim=-2)


def sdpa_inverted_mask(Q, K, V, mask=None, dropout_p=0.0, training=False):
    # "True means padding": the opposite of the contract.
    return _sdpa(Q, K, V, mask, math.sqrt(Q.size(-1)), invert=True)


def sdpa_mask_after_softmax(Q, K, V, mask=None, dropout_p=0.0, training=False):
    attn = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)
    if mask is not None:
        attn = attn * mask.bool()
    return attn @ V, attn


def sdpa_minus_inf(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    attn = scores.softmax(dim=-1)
    return attn @ V, attn


def sdpa_minus_1e9(Q, K, V, mask=None, dropout_p=0.0, training=False):
    # The Annotated Transformer's fill: a fully masked row becomes uniform.
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    attn = scores.softmax(dim=-1)
    return attn @ V, attn


def sdpa_mask_multiplies(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores * mask
    attn = scores.softmax(dim=-1)
    return attn @ V, attn


def sdpa_bool_only(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # ~ on a 0/1 int mask
    attn = scores.softmax(dim=-1)
    if mask is not None:
        attn = attn.masked_fill(~mask, 0.0)
    return attn @ V, attn


class SDPAModuleNoScale(torch.nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = dropout

    def forward(self, Q, K, V, mask=None):
        return sdpa_no_scale(Q, K, V, mask)


def sdpa_zero_then_zero_after(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        mask = mask.bool()
        scores = scores.masked_fill(~mask, 0.0)  # bug: 0 still gets weight ...
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # ... and zeroing afterwards leaves rows that do not sum to 1
    return weights @ V, weights


CASES = [
    ("scaled_dot_product_attention", sdpa_zero_then_zero_after, "mask_zero_then_after_softmax"),
    ("softmax", softmax_no_max, "softmax_unstable"),
    ("softmax", softmax_always_last_axis, "softmax_ignores_axis"),
    ("softmax", softmax_whole_array, "softmax_all_elements"),
    ("attention_numpy", attention_numpy_no_scale, "no_scale"),
    ("scaled_dot_product_attention", sdpa_no_scale, "no_scale"),
    ("scaled_dot_product_attention", sdpa_scale_by_dk, "scale_by_dk"),
    ("scaled_dot_product_attention", sdpa_softmax_dim_2, "softmax_wrong_axis"),
    ("scaled_dot_product_attention", sdpa_inverted_mask, "mask_inverted"),
    ("scaled_dot_product_attention", sdpa_mask_after_softmax, "mask_after_softmax"),
    ("scaled_dot_product_attention", sdpa_minus_inf, "nan_fully_masked"),
    ("scaled_dot_product_attention", sdpa_minus_1e9, "fully_masked_uniform"),
    ("scaled_dot_product_attention", sdpa_mask_multiplies, "mask_multiplies_scores"),
    ("scaled_dot_product_attention", sdpa_bool_only, "mask_not_bool"),
    ("ScaledDotProductAttention", SDPAModuleNoScale, "no_scale"),
]
