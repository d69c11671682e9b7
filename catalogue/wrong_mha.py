"""Wrong multi-head attention implementations (the notebook's correct SDPA is provided)."""
import math

import torch
import torch.nn as nn

from .reference import load

scaled_dot_product_attention = load()["scaled_dot_product_attention"]  # provided by the notebook


class _Base(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)


class MHASplitWithoutTranspose(_Base):
    def forward(self, x_q, x_kv, mask=None):
        B, T_q, _ = x_q.shape
        T_k = x_kv.size(1)
        q = self.W_q(x_q).view(B, self.num_heads, T_q, self.d_k)  # bug: straight view
        k = self.W_k(x_kv).view(B, self.num_heads, T_k, self.d_k)
        v = self.W_v(x_kv).view(B, self.num_heads, T_k, self.d_k)
        out, attn = scaled_dot_product_attention(q, k, v, mask)
        out = out.transpose(1, 2).contiguous().view(B, T_q, self.d_model)
        return self.W_o(out), attn


class _Split(_Base):
    def heads(self, x_q, x_kv):
        B, T_q, _ = x_q.shape
        T_k = x_kv.size(1)
        q = self.W_q(x_q).view(B, T_q, self.num_heads, self.d_k).transpose(1, 2)
        k = self.W_k(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)
        v = self.W_v(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)
        return q, k, v


class MHAMergeWithoutTranspose(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        out, attn = scaled_dot_product_attention(q, k, v, mask)
        out = out.reshape(x_q.size(0), x_q.size(1), self.d_model)  # bug: no transpose(1, 2)
        return self.W_o(out), attn


class MHAViewWithoutContiguous(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        out, attn = scaled_dot_product_attention(q, k, v, mask)
        out = out.transpose(1, 2).view(x_q.size(0), x_q.size(1), self.d_model)  # bug: not contiguous
        return self.W_o(out), attn


class MHANoOutputProjection(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        out, attn = scaled_dot_product_attention(q, k, v, mask)
        return out.transpose(1, 2).contiguous().view(x_q.size(0), x_q.size(1), self.d_model), attn


class MHASwappedKV(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        out, attn = scaled_dot_product_attention(q, v, k, mask)  # bug: K and V swapped
        return self.W_o(out.transpose(1, 2).contiguous().view(x_q.size(0), x_q.size(1), self.d_model)), attn


class MHAScaledByDModel(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # bug: sqrt(d_model)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        attn = scores.softmax(-1)
        if mask is not None:
            attn = attn.masked_fill(~mask, 0.0)
        out = (attn @ v).transpose(1, 2).contiguous().view(x_q.size(0), x_q.size(1), self.d_model)
        return self.W_o(out), attn


class MHAInlineNoScale(_Split):
    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.heads(x_q, x_kv)
        scores = q @ k.transpose(-2, -1)  # bug: no 1/sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        attn = scores.softmax(-1)
        if mask is not None:
            attn = attn.masked_fill(~mask, 0.0)
        out = (attn @ v).transpose(1, 2).contiguous().view(x_q.size(0), x_q.size(1), self.d_model)
        return self.W_o(out), attn


class MHAWithoutWo(nn.Module):
    """Forgot W_o altogether (no attribute, no projection)."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)

    forward = MHANoOutputProjection.forward
    heads = _Split.heads


CASES = [
    ("MultiHeadAttention", MHASplitWithoutTranspose, "split_heads_no_transpose"),
    ("MultiHeadAttention", MHAMergeWithoutTranspose, "merge_heads_no_transpose"),
    ("MultiHeadAttention", MHAViewWithoutContiguous, "view_without_contiguous"),
    ("MultiHeadAttention", MHANoOutputProjection, "missing_w_o"),
    ("MultiHeadAttention", MHAWithoutWo, "missing_w_o"),
    ("MultiHeadAttention", MHASwappedKV, "kv_swapped"),
    ("MultiHeadAttention", MHAScaledByDModel, "scale_by_d_model"),
    ("MultiHeadAttention", MHAInlineNoScale, "no_scale"),
]
