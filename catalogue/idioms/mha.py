"""Idioms of the exercises checked in tutor/checks/mha.py (02 multi-head attention)."""
from . import idiom

# ---------------------------------------------------------------- 02_multihead

idiom("mha_module_init_call_extra_repr", "02_multihead", "MultiHeadAttention",
      "nn.Module.__init__(self), extra_repr with self.__class__.__name__, ValueError with an f-string, "
      "view/transpose/reshape", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        nn.Module.__init__(self)
        if d_model % num_heads:
            raise ValueError(f"{self.__class__.__name__}: d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def extra_repr(self):
        return f"{self.__class__.__name__}: d_model={self.d_model}, num_heads={self.num_heads}, d_k={self.d_k}"

    def forward(self, x_q, x_kv, mask=None):
        B, T_q, _ = x_q.shape
        T_k = x_kv.shape[1]
        q = self.W_q(x_q).view(B, T_q, self.num_heads, self.d_k).transpose(1, 2)    # (B, H, T_q, d_k)
        k = self.W_k(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        v = self.W_v(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        out = out.transpose(1, 2).reshape(B, T_q, self.d_model)                     # (B, T_q, d_model)
        return self.W_o(out), attn
''')


idiom("mha_super_cls_loop_over_heads", "02_multihead", "MultiHeadAttention",
      "super(Cls, self).__init__(), a Python loop over heads slicing the projections, torch.broadcast_to "
      "for the mask, torch.cat/torch.stack", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super(MultiHeadAttention, self).__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout_p = dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv, mask=None):
        q, k, v = self.W_q(x_q), self.W_k(x_kv), self.W_v(x_kv)               # (B, T, d_model)
        B, T_q, T_k = x_q.size(0), x_q.size(1), x_kv.size(1)
        if mask is not None:
            mask = torch.broadcast_to(mask, (B, self.num_heads, T_q, T_k))
        outs, weights = [], []
        for h in range(self.num_heads):
            cols = slice(h * self.d_k, (h + 1) * self.d_k)                     # head h's features
            o, w = scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols],
                                                None if mask is None else mask[:, h],
                                                self.dropout_p, self.training)
            outs.append(o)                                                     # (B, T_q, d_k)
            weights.append(w)                                                  # (B, T_q, T_k)
        return self.W_o(torch.cat(outs, dim=-1)), torch.stack(weights, dim=1)  # (B, T_q, d_model), (B, H, T_q, T_k)
''')


idiom("mha_einsum_unflatten_finfo", "02_multihead", "MultiHeadAttention",
      "typing.Optional, tuple-unpacked nn.Linear generator, unflatten/flatten, torch.einsum, own masked softmax "
      "with masked_fill and torch.finfo(...).min, math.sqrt, F.dropout", r'''
from typing import Optional


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        self.num_heads, self.d_k, self.p = num_heads, d_model // num_heads, dropout
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor, mask: Optional[torch.Tensor] = None):
        heads = (self.num_heads, self.d_k)
        q = self.W_q(x_q).unflatten(-1, heads)                                  # (B, T_q, H, d_k)
        k = self.W_k(x_kv).unflatten(-1, heads)                                 # (B, T_k, H, d_k)
        v = self.W_v(x_kv).unflatten(-1, heads)                                 # (B, T_k, H, d_k)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_k)    # (B, H, T_q, T_k)
        if mask is not None:
            blocked = ~mask.bool()
            scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
        attn = scores.softmax(dim=-1)
        if mask is not None:
            attn = attn.masked_fill(blocked, 0.0)
        attn = F.dropout(attn, self.p, self.training)
        out = torch.einsum("bhqk,bkhd->bqhd", attn, v).flatten(-2)             # (B, T_q, H, d_k) -> (B, T_q, d_model)
        return self.W_o(out), attn
''')


idiom("mha_split_cells_setattr_staticmethod", "02_multihead", "MultiHeadAttention",
      "class split over two cells (MultiHeadAttention.forward = _mha_forward), setattr/getattr with f-strings "
      "on the learner's own module, @staticmethod helpers, permute/reshape", r'''
class MultiHeadAttention(nn.Module):
    """Multi-head attention; forward is written in the next cell."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) % num_heads ({num_heads}) != 0")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout_p = dropout
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model))

    @staticmethod
    def split_heads(x, num_heads):
        B, T, d_model = x.shape
        return x.reshape(B, T, num_heads, d_model // num_heads).permute(0, 2, 1, 3)   # (B, H, T, d_k)

    @staticmethod
    def merge_heads(x):
        B, H, T, d_k = x.shape
        return x.permute(0, 2, 1, 3).reshape(B, T, H * d_k)                            # (B, T, d_model)
''', r'''
def _mha_forward(self, x_q, x_kv, mask=None):
    q, k, v = (self.split_heads(getattr(self, f"W_{c}")(x), self.num_heads)
               for c, x in zip("qkv", (x_q, x_kv, x_kv)))                               # (B, H, T, d_k) each
    out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)
    return self.W_o(self.merge_heads(out)), attn


MultiHeadAttention.forward = _mha_forward
''')


idiom("mha_reset_parameters_fused_kv", "02_multihead", "MultiHeadAttention",
      "reset_parameters override (xavier_uniform_, zeros_), keys and values in one F.linear of torch.cat "
      "weights, chunk, a generator over (q, k, v), flatten of a transposed tensor", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"cannot split d_model={d_model} into {num_heads} heads")
        self.d_model, self.num_heads, self.d_k, self.dropout = d_model, num_heads, d_model // num_heads, dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.W_q, self.W_k, self.W_v, self.W_o):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x_q, x_kv, mask=None):
        B = x_q.size(0)
        w_kv = torch.cat([self.W_k.weight, self.W_v.weight])            # (2 d_model, d_model)
        b_kv = torch.cat([self.W_k.bias, self.W_v.bias])                # (2 d_model,)
        k, v = F.linear(x_kv, w_kv, b_kv).chunk(2, dim=-1)              # 2 x (B, T_k, d_model)
        q, k, v = (t.view(B, -1, self.num_heads, self.d_k).transpose(1, 2) for t in (self.W_q(x_q), k, v))
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        return self.W_o(out.transpose(1, 2).flatten(2)), attn            # (B, T_q, H, d_k) -> (B, T_q, d_model)
''')


idiom("mha_reimports_namedtuple_property_call", "02_multihead", "MultiHeadAttention",
      "re-imports in the cell (import torch, from torch import Tensor, nn, from torch.nn import functional as F), "
      "a typing.NamedTuple output, add_module in a loop, @property d_k, __call__ overridden with type hints "
      "calling super().__call__", r'''
import math
from typing import NamedTuple, Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class AttentionOutput(NamedTuple):
    out: Tensor      # (B, T_q, d_model)
    attn: Tensor     # (B, H, T_q, T_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.d_model, self.num_heads, self.dropout_p = d_model, num_heads, dropout
        for name in ("W_q", "W_k", "W_v", "W_o"):
            self.add_module(name, nn.Linear(d_model, d_model))

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads

    def __call__(self, x_q: Tensor, x_kv: Tensor, mask: Optional[Tensor] = None) -> AttentionOutput:
        return super().__call__(x_q, x_kv, mask)

    def forward(self, x_q, x_kv, mask=None):
        B, T_q, _ = x_q.shape
        q = self.W_q(x_q).view(B, T_q, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_q, d_k)
        k = self.W_k(x_kv).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        v = self.W_v(x_kv).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)
        out = out.transpose(1, 2).contiguous().view(B, T_q, self.d_model)          # (B, T_q, d_model)
        return AttentionOutput(self.W_o(out), attn)
''')


idiom("mha_nonpersistent_scale_buffer", "02_multihead", "MultiHeadAttention",
      "a non-persistent buffer for the scale (moved by .double()/.to(), not in state_dict), reshape(B, -1, H, d_k), "
      "own attention with masked_fill(-inf) then nan_to_num for rows that see nothing", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model}, num_heads={num_heads}: not divisible")
        self.num_heads, self.d_k, self.d_model = num_heads, d_model // num_heads, d_model
        self.attn_dropout = nn.Dropout(dropout)
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("scale", torch.tensor(self.d_k ** -0.5), persistent=False)

    def forward(self, x_q, x_kv, mask=None):
        B = x_q.size(0)
        q = self.W_q(x_q).reshape(B, -1, self.num_heads, self.d_k).transpose(1, 2)    # (B, H, T_q, d_k)
        k = self.W_k(x_kv).reshape(B, -1, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        v = self.W_v(x_kv).reshape(B, -1, self.num_heads, self.d_k).transpose(1, 2)   # (B, H, T_k, d_k)
        scores = (q @ k.transpose(-2, -1)) * self.scale                               # (B, H, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)               # a row that sees nothing -> 0
        attn = self.attn_dropout(attn)
        out = (attn @ v).transpose(1, 2).reshape(B, -1, self.d_model)                 # (B, T_q, d_model)
        return self.W_o(out), attn
''')

