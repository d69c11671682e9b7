"""Idiomatic right answers, written as whole notebook cells, the way people really write PyTorch.

Each ``Idiom`` replaces one graded exercise cell of a chapter: ``cells[0]`` takes the place of the
exercise cell's code, ``cells[1:]`` are cells the learner inserts right after it (before the
tests). Every idiom is right: it passes the chapter's visible tests and the hidden check
(``tests/test_idioms.py`` runs them as the notebook does; the class simulation grades them with
``nbgrader autograde``). The code uses only what the notebook provides (setup imports, provided
cells, earlier exercises) and never the built-ins an exercise replaces.
"""
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Idiom:
    id: str         # readable, unique: "mha_module_init_call"
    chapter: str    # "02_multihead"
    exercise: str   # the exercise cell it replaces, by the first name defined there: "MultiHeadAttention"
    cells: tuple    # code cells as the learner types them (cells[0] replaces the exercise cell)
    idioms: str     # the idioms it exercises, in words


def _cells(*sources):
    return tuple(textwrap.dedent(s).strip("\n") + "\n" for s in sources)


IDIOMS = []


def idiom(id, chapter, exercise, idioms, *sources):
    IDIOMS.append(Idiom(id, chapter, exercise, _cells(*sources), idioms))


# ---------------------------------------------------------------- 01 attention

idiom("softmax_logsumexp_typed", "01_attention", "softmax",
      "typing import, type hints, log-sum-exp, ndarray methods (x.max, .sum) with keepdims", r'''
from typing import Union

ArrayLike = Union[np.ndarray, list]


def softmax(x: ArrayLike, axis: int = -1) -> np.ndarray:
    """Stable softmax through log-sum-exp: exp(x - logsumexp(x))."""
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis, keepdims=True)                                  # the max along axis, kept for broadcasting
    log_z = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))      # log of the normaliser
    return np.exp(x - log_z)
''')

idiom("softmax_moveaxis_assert", "01_attention", "softmax",
      "assert with an f-string, np.moveaxis to work on the last axis, [..., None] broadcasting", r'''
def softmax(x, axis=-1):
    assert x.ndim >= 1, f"softmax needs at least one axis, got a {x.ndim}-D array"
    last = np.moveaxis(x, axis, -1)                 # the softmax axis moved to the end
    e = np.exp(last - last.max(-1)[..., None])
    return np.moveaxis(e / e.sum(-1)[..., None], -1, axis)
''')

idiom("attention_numpy_einsum_where", "01_attention", "attention_numpy",
      "np.einsum with ellipsis, np.sqrt, np.where masking with a large negative number, keyword arguments", r'''
def attention_numpy(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(d_k)     # (..., T_q, T_k)
    if mask is not None:
        keep = np.asarray(mask, dtype=bool)
        scores = np.where(keep, scores, -1e9)
    weights = softmax(scores, axis=-1)                                 # (..., T_q, T_k)
    if mask is not None:
        weights = np.where(keep, weights, 0.0)
    return np.einsum("...qk,...kd->...qd", weights, V), weights        # (..., T_q, d_v)
''')

idiom("attention_numpy_additive_mask", "01_attention", "attention_numpy",
      "additive mask (1 - mask) * -1e9, swapaxes, matmul operator, in-place *= to zero blocked weights", r'''
def attention_numpy(Q, K, V, mask=None):
    scores = Q @ K.swapaxes(-1, -2) * Q.shape[-1] ** -0.5          # (..., T_q, T_k)
    if mask is not None:
        keep = np.asarray(mask).astype(scores.dtype)                # 1.0 = may attend
        scores = scores + (1.0 - keep) * -1e9                       # additive mask
    weights = softmax(scores)
    if mask is not None:
        weights *= keep                                             # a row that sees nothing becomes zeros
    return weights @ V, weights
''')

idiom("sdpa_einsum_where_typed", "01_attention", "scaled_dot_product_attention",
      "Optional/Tuple type hints, raising ValueError with an f-string, torch.einsum, ** -0.5 scaling, "
      "torch.where with torch.finfo(...).min, F.dropout(training=...)", r'''
from typing import Optional, Tuple


def scaled_dot_product_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    if Q.size(-1) != K.size(-1):
        raise ValueError(f"Q and K need the same d_k, got {Q.size(-1)} and {K.size(-1)}")
    scores = torch.einsum("...qd,...kd->...qk", Q, K) * Q.size(-1) ** -0.5     # (..., T_q, T_k)
    if mask is not None:
        mask = mask.bool()
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    attn = scores.softmax(dim=-1)
    if mask is not None:
        attn = torch.where(mask, attn, 0.0)                                     # fully blocked rows -> zeros
    attn = F.dropout(attn, p=dropout_p, training=training)
    return torch.einsum("...qk,...kd->...qd", attn, V), attn                    # (..., T_q, d_v)
''')

idiom("sdpa_additive_bert_mask", "01_attention", "scaled_dot_product_attention",
      "additive float mask (1 - mask) * -1e4 as in BERT, torch.matmul, math.sqrt, multiply by the mask after "
      "softmax", r'''
def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    d_k = K.shape[-1]
    scores = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(d_k)     # (..., T_q, T_k)
    if mask is not None:
        keep = mask.to(scores.dtype)                                   # 1.0 = may attend
        scores = scores + (1.0 - keep) * -1e4                          # additive mask
    attn = torch.softmax(scores, dim=-1)
    if mask is not None:
        attn = attn * keep                                             # rows that see nothing -> zeros
    if training and dropout_p:
        attn = F.dropout(attn, dropout_p)
    return torch.matmul(attn, V), attn                                 # (..., T_q, d_v)
''')

idiom("sdpa_manual_softmax_masked_fill", "01_attention", "scaled_dot_product_attention",
      "softmax written by hand (amax().detach(), exp, sum, clamp_min), masked_fill with -inf and nan_to_num, "
      "K.mT, pre-scaled queries", r'''
def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scale = 1.0 / math.sqrt(Q.shape[-1])
    scores = (Q * scale) @ K.mT                                        # (..., T_q, d_k) @ (..., d_k, T_k)
    if mask is not None:
        mask = mask != 0
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    row_max = torch.nan_to_num(scores.amax(dim=-1, keepdim=True).detach(), neginf=0.0)  # (..., T_q, 1)
    e = torch.exp(scores - row_max)                                    # exp(-inf) = 0 for blocked keys
    attn = e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    if training and dropout_p > 0:
        attn = F.dropout(attn, p=dropout_p, training=True)
    return attn @ V, attn
''')

idiom("sdpa_module_nn_dropout_extra_repr", "01_attention", "ScaledDotProductAttention",
      "nn.Dropout submodule applied to the weights, extra_repr with self.__class__.__name__, type hints", r'''
class ScaledDotProductAttention(nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, Q, K, V, mask=None):
        _, attn = scaled_dot_product_attention(Q, K, V, mask)        # (..., T_q, T_k), no dropout inside
        attn = self.dropout(attn)                                     # active in train mode only
        return attn @ V, attn

    def extra_repr(self) -> str:
        return f"{self.__class__.__name__} with p={self.dropout.p}"
''')

idiom("sdpa_module_super_cls_repr", "01_attention", "ScaledDotProductAttention",
      "super(Cls, self).__init__(), __repr__ with type(self).__name__, keyword call of the function", r'''
class ScaledDotProductAttention(nn.Module):
    def __init__(self, dropout=0.0):
        super(ScaledDotProductAttention, self).__init__()
        self.p = float(dropout)

    def __repr__(self):
        return f"{type(self).__name__}(dropout={self.p})"

    def forward(self, Q, K, V, mask=None):
        return scaled_dot_product_attention(Q, K, V, mask=mask, dropout_p=self.p, training=self.training)
''')

# ---------------------------------------------------------------- 02 multi-head attention

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

# ---------------------------------------------------------------- 03 positional encoding

idiom("pe_lru_cache_interleave", "03_positional", "sinusoidal_positional_encoding",
      "import functools, @functools.lru_cache helper at module level keyed by dtype, torch.outer, "
      "sin/cos interleaved with torch.stack + flatten, ** for the frequencies, type hints", r'''
import functools


@functools.lru_cache(maxsize=None)
def _inverse_frequencies(d_model: int, dtype: torch.dtype) -> torch.Tensor:
    """10000^(-2i/d_model) for i = 0 .. ceil(d_model/2) - 1, computed once per (d_model, dtype)."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)                  # (ceil(d_model/2),)
    return 10000.0 ** (-two_i / d_model)


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    dtype = torch.get_default_dtype()
    positions = torch.arange(max_len, dtype=dtype)                    # (max_len,)
    angles = torch.outer(positions, _inverse_frequencies(d_model, dtype))   # (max_len, ceil(d_model/2))
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)         # (max_len, ceil(d_model/2), 2)
    return table.flatten(1)[:, :d_model]                              # (max_len, d_model): sin, cos, sin, ...
''')

idiom("pe_loop_over_pairs", "03_positional", "sinusoidal_positional_encoding",
      "a Python loop over column pairs with scalar frequencies, in-place column writes", r'''
def sinusoidal_positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len, dtype=pe.dtype)
    for i in range(0, d_model, 2):
        freq = 1.0 / 10000 ** (i / d_model)
        pe[:, i] = torch.sin(pos * freq)
        if i + 1 < d_model:                      # an odd d_model has no last cos column
            pe[:, i + 1] = torch.cos(pos * freq)
    return pe
''')

idiom("pe_nograd_where_parity", "03_positional", "sinusoidal_positional_encoding",
      "@torch.no_grad() on a table builder, torch.where on column parity, torch.pow", r'''
@torch.no_grad()
def sinusoidal_positional_encoding(max_len, d_model):
    pos = torch.arange(max_len).unsqueeze(1).to(torch.get_default_dtype())    # (max_len, 1)
    j = torch.arange(d_model)                                                  # (d_model,)
    angle = pos / torch.pow(10000.0, (j - j % 2) / d_model)                    # (max_len, d_model)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))
''')

idiom("posenc_getitem_table_vars_repr", "03_positional", "PositionalEncoding",
      "a helper class with __getitem__ (slices of the table) and a __repr__ built from vars(self), "
      "register_buffer(persistent=True), ValueError with an f-string", r'''
class SinusoidTable:
    """Rows of the sinusoidal table by position: SinusoidTable(d_model)[:max_len] -> (max_len, d_model)."""

    def __init__(self, d_model):
        self.d_model = d_model

    def __getitem__(self, rows: slice) -> torch.Tensor:
        return sinusoidal_positional_encoding(rows.stop, self.d_model)[rows]

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        table = SinusoidTable(d_model)[:max_len].unsqueeze(0)  # (1, max_len, d_model)
        self.register_buffer("pe", table, persistent=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.pe.shape[1]:
            raise ValueError(f"sequence length {T} is longer than max_len={self.pe.shape[1]}")
        return self.dropout(x + self.pe[:, :T])
''')

idiom("posenc_classmethod_narrow", "03_positional", "PositionalEncoding",
      "a class-level buffer annotation, @classmethod table builder, narrow, type(self).__name__ in the error", r'''
class PositionalEncoding(nn.Module):
    pe: torch.Tensor  # buffer (1, max_len, d_model)

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", self.table(max_len, d_model))

    @classmethod
    def table(cls, max_len, d_model):
        return sinusoidal_positional_encoding(max_len, d_model)[None]        # (1, max_len, d_model)

    def forward(self, x):
        T = x.size(-2)
        if T > self.pe.size(1):
            raise ValueError(f"{type(self).__name__}: T={T} exceeds max_len={self.pe.size(1)}")
        return self.dropout(x + self.pe.narrow(1, 0, T))                     # (B, T, d_model) + (1, T, d_model)
''')

# ---------------------------------------------------------------- 04 FFN, LayerNorm, residual

idiom("ffn_getattr_F_io_typing", "04_ffn_layernorm", "FeedForward",
      "import io and typing, getattr(F, activation) to pick the function, a typed class attribute, "
      "print(..., file=io.StringIO())", r'''
import io
import typing


class FeedForward(nn.Module):
    ACTIVATIONS: typing.Tuple[str, ...] = ("relu", "gelu")

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {self.ACTIVATIONS}")
        self.activation = getattr(F, activation)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))  # (..., d_model) -> (..., d_ff) -> (..., d_model)

    def describe(self) -> str:
        buf = io.StringIO()
        print(f"{type(self).__name__}: {self.fc1.in_features} -> {self.fc1.out_features} -> {self.fc2.out_features}",
              file=buf)
        return buf.getvalue()
''')

idiom("ffn_classmethod_activation_modules", "04_ffn_layernorm", "FeedForward",
      "@classmethod factory, a dict of nn.ReLU/nn.GELU classes, KeyError re-raised as ValueError from None", r'''
class FeedForward(nn.Module):
    _activations = {"relu": nn.ReLU, "gelu": nn.GELU}

    @classmethod
    def make_activation(cls, name):
        try:
            return cls._activations[name]()
        except KeyError:
            raise ValueError(f"activation must be one of {sorted(cls._activations)}, got {name!r}") from None

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = self.make_activation(activation)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        h = self.act(self.fc1(x))        # (..., d_ff)
        return self.fc2(self.dropout(h))
''')

idiom("ffn_dataclass_partial_reset_parameters", "04_ffn_layernorm", "FeedForward",
      "import dataclasses and functools, a frozen @dataclass config with __post_init__ validation, "
      "functools.partial(F.gelu, approximate='none'), reset_parameters override, extra_repr from "
      "dataclasses.asdict", r'''
import dataclasses
import functools


@dataclasses.dataclass(frozen=True)
class FFNConfig:
    d_model: int
    d_ff: int
    dropout: float = 0.0
    activation: str = "relu"

    def __post_init__(self):
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {self.activation!r}")


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.config = FFNConfig(d_model, d_ff, dropout, activation)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = functools.partial(F.gelu, approximate="none") if activation == "gelu" else F.relu
        self.reset_parameters()

    def reset_parameters(self):
        for layer in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self.config).items())

    def forward(self, x):
        return self.fc2(self.dropout(self.act(self.fc1(x))))
''')

idiom("ffn_lambda_exact_gelu", "04_ffn_layernorm", "FeedForward",
      "lambdas stored as attributes, ReLU as clamp_min, exact GELU written with torch.erf and math.sqrt", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation == "relu":
            self.activation = lambda h: h.clamp_min(0.0)
        elif activation == "gelu":
            self.activation = lambda h: 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))   # exact GELU
        else:
            raise ValueError(f"activation {activation!r} is neither 'relu' nor 'gelu'")
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(self.activation(self.fc1(x))))
''')

idiom("layernorm_helper_call_vars_repr", "04_ffn_layernorm", "LayerNorm",
      "a small helper class with __call__ and a __repr__ built from vars(self), stored on the module", r'''
class Standardize:
    """Callable helper: (x - mean) / sqrt(var + eps) over one axis (biased variance)."""

    def __init__(self, eps: float, dim: int = -1):
        self.eps = eps
        self.dim = dim

    def __call__(self, x):
        mean = x.mean(self.dim, keepdim=True)                     # (..., 1)
        var = ((x - mean) ** 2).mean(self.dim, keepdim=True)      # (..., 1)
        return (x - mean) / torch.sqrt(var + self.eps)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.standardize = Standardize(eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return self.standardize(x) * self.weight + self.bias
''')

idiom("layernorm_var_mean_rsqrt", "04_ffn_layernorm", "LayerNorm",
      "torch.var_mean(correction=0), torch.rsqrt, a normalized_shape tuple, extra_repr, type hints", r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.normalized_shape = (d_model,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)    # (..., 1) each
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"
''')

idiom("layernorm_reset_parameters_module_helper", "04_ffn_layernorm", "LayerNorm",
      "a helper function at module level, super(Cls, self).__init__(), torch.empty parameters filled by a "
      "reset_parameters override (nn.init.ones_/zeros_), ** 0.5, torch.addcmul", r'''
def normalize_last_dim(x: torch.Tensor, eps: float) -> torch.Tensor:
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / (centred.pow(2).mean(dim=-1, keepdim=True) + eps) ** 0.5


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super(LayerNorm, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d_model))
        self.bias = nn.Parameter(torch.empty(d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x):
        return torch.addcmul(self.bias, normalize_last_dim(x, self.eps), self.weight)
''')

idiom("residual_split_cells", "04_ffn_layernorm", "ResidualLayerNorm",
      "class split over two cells (ResidualLayerNorm.forward = _residual_forward), torch.add, keyword eps", r'''
class ResidualLayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.ln = LayerNorm(d_model, eps=eps)
''', r'''
def _residual_forward(self, x, sublayer_out):
    """Post-LN: add the sublayer's output to its input, then normalise."""
    return self.ln(torch.add(x, sublayer_out))


ResidualLayerNorm.forward = _residual_forward
''')

idiom("residual_module_init_call_assert", "04_ffn_layernorm", "ResidualLayerNorm",
      "nn.Module.__init__(self), assert on shapes with an f-string", r'''
class ResidualLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        nn.Module.__init__(self)
        self.ln = LayerNorm(d_model, eps)

    def forward(self, x, sublayer_out):
        assert x.shape == sublayer_out.shape, f"shapes differ: {tuple(x.shape)} vs {tuple(sublayer_out.shape)}"
        return self.ln(x + sublayer_out)
''')

# ---------------------------------------------------------------- 05 masks and layers

idiom("pad_mask_ne_unsqueeze_assert", "05_layers", "make_pad_mask",
      "type hints, assert with an f-string, Tensor.ne, unsqueeze twice", r'''
def make_pad_mask(tokens: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    assert tokens.dim() == 2, f"tokens must be (B, T), got {tuple(tokens.shape)}"
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)        # (B, T) -> (B, 1, 1, T)
''')

idiom("pad_mask_nograd_view", "05_layers", "make_pad_mask",
      "@torch.no_grad() on a mask builder, shape unpacking, view", r'''
@torch.no_grad()
def make_pad_mask(tokens, pad_id=0):
    B, T = tokens.shape
    return (tokens != pad_id).view(B, 1, 1, T)                # (B, T) -> (B, 1, 1, T)
''')

idiom("subsequent_mask_triu_invert", "05_layers", "make_subsequent_mask",
      "torch.triu(diagonal=1) of the blocked future, inverted with ~, view", r'''
def make_subsequent_mask(T, device=None):
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)   # True above the diagonal
    return ~future.view(1, 1, T, T)
''')

idiom("subsequent_mask_lru_cache_arange", "05_layers", "make_subsequent_mask",
      "import functools, @functools.lru_cache(maxsize=16) helper keyed by (T, device), arange comparison, clone", r'''
import functools


@functools.lru_cache(maxsize=16)
def _causal(T: int, device) -> torch.Tensor:
    i = torch.arange(T, device=device)
    return i[:, None] >= i[None, :]                 # (T, T): query i sees key j when j <= i


def make_subsequent_mask(T, device=None):
    return _causal(T, device).clone()[None, None]   # (1, 1, T, T), a fresh tensor each call
''')

idiom("encoder_layer_module_init_call_kwargs", "05_layers", "EncoderLayer",
      "nn.Module.__init__(self), Optional/Tuple hints, keyword arguments everywhere", r'''
from typing import Optional, Tuple


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        nn.Module.__init__(self)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout=dropout, activation="relu")
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        attn_out, attn = self.self_attn(x_q=x, x_kv=x, mask=src_mask)      # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x, sublayer_out=self.dropout(attn_out))
        x = self.norm2(x, sublayer_out=self.dropout(self.ffn(x)))
        return x, attn
''')

idiom("encoder_layer_helper_call_class", "05_layers", "EncoderLayer",
      "a plain helper class with __call__ holding the layer's own norm and dropout, norms from a generator", r'''
class AddNorm:
    """x, out -> norm(x, dropout(out)): one Post-LN sublayer connection, as a plain callable."""

    def __init__(self, norm, dropout):
        self.norm, self.dropout = norm, dropout

    def __call__(self, x, out):
        return self.norm(x, self.dropout(out))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = (ResidualLayerNorm(d_model) for _ in range(2))
        self.dropout = nn.Dropout(dropout)
        self.add_norm1 = AddNorm(self.norm1, self.dropout)
        self.add_norm2 = AddNorm(self.norm2, self.dropout)

    def forward(self, x, src_mask=None):
        out, attn = self.self_attn(x, x, src_mask)          # (B, T, d_model), (B, H, T, T)
        x = self.add_norm1(x, out)
        x = self.add_norm2(x, self.ffn(x))
        return x, attn
''')

idiom("decoder_layer_setattr_getattr_loop", "05_layers", "DecoderLayer",
      "super(Cls, self).__init__(), setattr/getattr with f-strings for norm1..3, a loop over sublayer lambdas", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super(DecoderLayer, self).__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        for i in (1, 2, 3):
            setattr(self, f"norm{i}", ResidualLayerNorm(d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        sublayers = (
            lambda h: self.self_attn(h, h, tgt_mask),           # masked self-attention
            lambda h: self.cross_attn(h, memory, memory_mask),  # queries from h, keys/values from memory
            lambda h: (self.ffn(h), None),
        )
        weights = []
        for i, sublayer in enumerate(sublayers, start=1):
            out, w = sublayer(y)
            y = getattr(self, f"norm{i}")(y, self.dropout(out))
            weights.append(w)
        return y, (weights[0], weights[1])
''')

idiom("decoder_layer_split_cells_typed", "05_layers", "DecoderLayer",
      "class split over two cells (DecoderLayer.forward = decoder_forward), a Tensor alias, Optional/Tuple hints", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.norm3 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
''', r'''
from typing import Optional, Tuple

Tensor = torch.Tensor


def decoder_forward(self, y: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                    memory_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    out, self_w = self.self_attn(y, y, tgt_mask)                 # (B, T_t, d_model), (B, H, T_t, T_t)
    y = self.norm1(y, self.dropout(out))
    out, cross_w = self.cross_attn(y, memory, memory_mask)       # (B, T_t, d_model), (B, H, T_t, T_s)
    y = self.norm2(y, self.dropout(out))
    y = self.norm3(y, self.dropout(self.ffn(y)))
    return y, (self_w, cross_w)


DecoderLayer.forward = decoder_forward
''')

idiom("decoder_layer_module_helper_function", "05_layers", "DecoderLayer",
      "a helper function at module level taking the layer's modules, keyword mask arguments", r'''
def add_and_norm(norm: nn.Module, dropout: nn.Module, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Post-LN sublayer connection: norm(x, dropout(out))."""
    return norm(x, dropout(out))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (ResidualLayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        sa, self_w = self.self_attn(y, y, mask=tgt_mask)
        y = add_and_norm(self.norm1, self.dropout, y, sa)
        ca, cross_w = self.cross_attn(y, memory, mask=memory_mask)
        y = add_and_norm(self.norm2, self.dropout, y, ca)
        y = add_and_norm(self.norm3, self.dropout, y, self.ffn(y))
        return y, (self_w, cross_w)
''')

# ---------------------------------------------------------------- 06 Transformer

idiom("transformer_modulelist_reset_while_where", "06_transformer", "Transformer",
      "nn.ModuleList comprehensions, reset_parameters override, a shared embed helper method, ** 0.5 scaling; "
      "greedy_decode as a while loop with new_full, torch.where for finished rows", r'''
class Transformer(nn.Module):
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
        self.reset_parameters()

    def reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def embed(self, tokens, table):
        return self.pos_enc(table(tokens) * self.d_model ** 0.5)         # (B, T, d_model)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)                       # (B, 1, 1, T_s)
        x = self.embed(src, self.src_embed)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.embed(tgt_in, self.tgt_embed)
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), make_pad_mask(src, self.pad_id)))

    @torch.no_grad()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        memory, src_mask = self.encode(src), make_pad_mask(src, self.pad_id)
        ys = src.new_full((src.size(0), 1), bos_id)                      # (B, 1)
        done = torch.zeros_like(ys[:, 0], dtype=torch.bool)              # (B,)
        while ys.size(1) <= max_new_tokens and not done.all():
            logits = self.out_proj(self.decode(ys, memory, src_mask)[:, -1])      # (B, tgt_vocab)
            nxt = torch.where(done, torch.full_like(ys[:, 0], self.pad_id), logits.argmax(-1))
            ys = torch.cat((ys, nxt[:, None]), dim=1)
            done = done | (nxt == eos_id)
        return ys
''')

idiom("transformer_super_cls_itertools_columns", "06_transformer", "Transformer",
      "super(Cls, self).__init__(), import itertools, named_parameters loop, math.sqrt stored once, "
      "Optional hint; greedy_decode inside `with torch.no_grad()` collecting token columns in a list, "
      "itertools.repeat, boolean-index assignment, out_proj over every position", r'''
import itertools
from typing import Optional


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super(Transformer, self).__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len=max_len, dropout=dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        mask = make_pad_mask(src, pad_id=self.pad_id)
        h = self.pos_enc(self.src_embed(src) * self.scale)
        for layer in self.encoder_layers:
            h = layer(h, mask)[0]
        return h

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: Optional[torch.Tensor] = None):
        causal = make_subsequent_mask(tgt_in.shape[1], device=tgt_in.device)
        mask = causal & make_pad_mask(tgt_in, self.pad_id)               # (B, 1, T_t, T_t)
        h = self.pos_enc(self.tgt_embed(tgt_in) * self.scale)
        for layer in self.decoder_layers:
            h, _weights = layer(h, memory, tgt_mask=mask, memory_mask=src_mask)
        return h

    def forward(self, src, tgt_in):
        src_mask = make_pad_mask(src, self.pad_id)
        memory = self.encode(src)
        hidden = self.decode(tgt_in, memory, src_mask)
        return self.out_proj(hidden)

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        with torch.no_grad():
            src_mask = make_pad_mask(src, self.pad_id)
            memory = self.encode(src)
            columns = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
            alive = torch.ones(src.shape[0], dtype=torch.bool, device=src.device)
            for _ in itertools.repeat(None, max_new_tokens):
                ys = torch.stack(columns, dim=1)                              # (B, t)
                logits = self.out_proj(self.decode(ys, memory, src_mask))     # (B, t, tgt_vocab)
                token = logits[:, -1].argmax(dim=-1)                          # (B,)
                token[~alive] = self.pad_id
                columns.append(token)
                alive &= token != eos_id
                if not alive.any():
                    break
            return torch.stack(columns, dim=1)
''')

idiom("transformer_split_cells_preallocated_greedy", "06_transformer", "Transformer",
      "class split over two cells: greedy_decode written as a module-level @torch.no_grad() function "
      "(preallocated output buffer, masked_fill, early return of a slice) and attached with "
      "Transformer.greedy_decode = greedy_decode; helper method for masks", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def masks(self, src, tgt_in):
        """(src_mask (B, 1, 1, T_s), tgt_mask (B, 1, T_t, T_t)) from self.pad_id."""
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        return make_pad_mask(src, self.pad_id), tgt_mask

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = self.masks(tgt_in, tgt_in)[1]
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        src_mask, _ = self.masks(src, tgt_in)
        return self.out_proj(self.decode(tgt_in, self.encode(src), src_mask))
''', r'''
@torch.no_grad()
def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
    B = src.size(0)
    src_mask = make_pad_mask(src, self.pad_id)
    memory = self.encode(src)                                                  # (B, T_s, d_model)
    ys = torch.full((B, 1 + max_new_tokens), self.pad_id, dtype=torch.long, device=src.device)
    ys[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for t in range(max_new_tokens):
        hidden = self.decode(ys[:, : t + 1], memory, src_mask)                 # (B, t + 1, d_model)
        next_token = self.out_proj(hidden[:, -1]).argmax(dim=-1)               # (B,)
        ys[:, t + 1] = next_token.masked_fill(finished, self.pad_id)
        finished |= ys[:, t + 1] == eos_id
        if finished.all():
            return ys[:, : t + 2]
    return ys


Transformer.greedy_decode = greedy_decode
''')

idiom("greedy_while_new_full_where", "06_transformer", "greedy_decode",
      "@torch.no_grad() on a while loop, src.new_full, torch.where for the finished rows, type hints", r'''
@torch.no_grad()
def greedy_decode(model: nn.Module, src: torch.Tensor, bos_id: int, eos_id: int,
                  max_new_tokens: int) -> torch.Tensor:
    memory, src_mask = model.encode(src), make_pad_mask(src, model.pad_id)
    ys = src.new_full((src.size(0), 1), bos_id)                          # (B, 1)
    done = torch.zeros_like(ys[:, 0], dtype=torch.bool)                  # (B,)
    while ys.size(1) <= max_new_tokens and not done.all():
        logits = model.out_proj(model.decode(ys, memory, src_mask)[:, -1])          # (B, tgt_vocab)
        nxt = torch.where(done, torch.full_like(ys[:, 0], model.pad_id), logits.argmax(-1))
        ys = torch.cat((ys, nxt[:, None]), dim=1)
        done = done | (nxt == eos_id)
    return ys
''')

idiom("greedy_preallocated_early_return", "06_transformer", "greedy_decode",
      "a preallocated (B, 1 + max_new_tokens) buffer filled with pad_id, column assignment, masked_fill, "
      "an early return of a slice", r'''
@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    B = src.shape[0]
    src_mask = make_pad_mask(src, model.pad_id)
    memory = model.encode(src)
    out = torch.full((B, 1 + max_new_tokens), model.pad_id, dtype=torch.long, device=src.device)
    out[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for t in range(max_new_tokens):
        hidden = model.decode(out[:, : t + 1], memory, src_mask)           # (B, t + 1, d_model)
        out[:, t + 1] = model.out_proj(hidden[:, -1]).argmax(dim=-1).masked_fill(finished, model.pad_id)
        finished |= out[:, t + 1] == eos_id
        if finished.all():
            return out[:, : t + 2]
    return out
''')

idiom("greedy_columns_list_inference_mode", "06_transformer", "greedy_decode",
      "a `with torch.inference_mode()` block, token columns collected in a list and stacked, itertools.repeat, "
      "boolean-index assignment, logical_and/logical_not bookkeeping, out_proj over every position", r'''
import itertools


def greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    with torch.inference_mode():
        src_mask = make_pad_mask(src, pad_id=model.pad_id)
        memory = model.encode(src)
        columns = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
        alive = torch.ones(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in itertools.repeat(None, max_new_tokens):
            ys = torch.stack(columns, dim=1)                                   # (B, t)
            logits = model.out_proj(model.decode(ys, memory, src_mask))        # (B, t, tgt_vocab)
            token = logits[:, -1].argmax(dim=-1)                               # (B,)
            token[torch.logical_not(alive)] = model.pad_id
            columns.append(token)
            alive = torch.logical_and(alive, token != eos_id)
            if not alive.any():
                break
        return torch.stack(columns, dim=1)
''')

idiom("transformer_annotated_layers_return_x", "06_transformer", "Transformer",
      "the Annotated Transformer's layers, which return x alone (subclasses of the chapter 05 layers), "
      "and a Transformer built on them: the visible tests must not assume (x, weights)", r'''
class EncoderLayerX(EncoderLayer):
    """The Annotated Transformer's encoder layer returns x alone."""

    def forward(self, x, src_mask=None):
        return super().forward(x, src_mask)[0]


class DecoderLayerX(DecoderLayer):
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        return super().forward(y, memory, tgt_mask, memory_mask)[0]


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayerX(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayerX(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.out_proj = nn.Linear(d_model, tgt_vocab)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), make_pad_mask(src, self.pad_id)))

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        return greedy_decode(self, src, bos_id, eos_id, max_new_tokens)
''')

# ---------------------------------------------------------------- 07 copy task

idiom("copy_batch_rows_namedtuple", "07_copy_task", "make_copy_batch",
      "import collections, a namedtuple return value, a Python loop building rows as lists, .tolist()", r'''
import collections

CopyBatch = collections.namedtuple("CopyBatch", ["src", "tgt_in", "tgt_out"])


def make_copy_batch(batch_size, vocab_size, min_len, max_len, generator=None):
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator).tolist()
    src_rows, tgt_rows = [], []
    for L in lengths:
        x = torch.randint(3, vocab_size, (L,), generator=generator).tolist()
        pad = [PAD_ID] * (max_len - L)
        src_rows.append(x + [EOS_ID] + pad)
        tgt_rows.append([BOS_ID] + x + pad)
    src = torch.tensor(src_rows, dtype=torch.long)                       # (B, max_len + 1)
    return CopyBatch(src, torch.tensor(tgt_rows, dtype=torch.long), src.clone())
''')

idiom("copy_batch_where_roll_typed", "07_copy_task", "make_copy_batch",
      "Optional[torch.Generator]/Tuple hints, nested torch.where with scalars, roll for the shift right, expand", r'''
from typing import Optional, Tuple


def make_copy_batch(batch_size: int, vocab_size: int, min_len: int, max_len: int,
                    generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lengths = torch.randint(min_len, max_len + 1, (batch_size, 1), generator=generator)       # (B, 1)
    content = torch.randint(3, vocab_size, (batch_size, max_len + 1), generator=generator)    # (B, max_len + 1)
    pos = torch.arange(max_len + 1).expand(batch_size, -1)                                     # (B, max_len + 1)
    src = torch.where(pos < lengths, content, torch.where(pos == lengths, EOS_ID, PAD_ID))
    shifted = content.roll(1, dims=1)  # shifted[:, p] = content[:, p - 1]
    tgt_in = torch.where(pos == 0, BOS_ID, torch.where(pos <= lengths, shifted, PAD_ID))
    return src, tgt_in, src.clone()
''')

idiom("copy_loss_log_softmax_gather", "07_copy_task", "copy_loss",
      "log_softmax + gather, torch.where with zeros_like, sum over a count of real tokens", r'''
def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    log_probs = logits.log_softmax(dim=-1)                                   # (B, T, V)
    nll = -log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)          # (B, T)
    keep = tgt_out != pad_id                                                 # (B, T)
    return torch.where(keep, nll, torch.zeros_like(nll)).sum() / keep.sum()
''')

idiom("copy_loss_flatten_nll_loss", "07_copy_task", "copy_loss",
      "type hints, ValueError with an f-string, F.nll_loss of F.log_softmax with ignore_index, flatten(0, 1)", r'''
def copy_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    if logits.shape[:2] != tgt_out.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and tgt_out {tuple(tgt_out.shape)} disagree on (B, T)")
    log_probs = F.log_softmax(logits, dim=-1).flatten(0, 1)                  # (B*T, V)
    return F.nll_loss(log_probs, tgt_out.flatten(), ignore_index=pad_id)
''')

idiom("copy_loss_boolean_index", "07_copy_task", "copy_loss",
      "boolean indexing keeps the real tokens, F.cross_entropy without ignore_index", r'''
def copy_loss(logits, tgt_out, pad_id=PAD_ID):
    real = tgt_out.ne(pad_id)                                # (B, T)
    return F.cross_entropy(logits[real], tgt_out[real])     # (N, V) vs (N,)
''')

idiom("exact_match_python_itertools", "07_copy_task", "exact_match",
      "import itertools, a Python loop over .tolist() rows, list.index, chain/repeat/islice to pad short rows", r'''
import itertools


def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    correct = 0
    for p_row, t_row in zip(pred.tolist(), tgt_out.tolist()):
        end = t_row.index(eos_id) + 1                                     # up to and including the first EOS
        p_prefix = list(itertools.islice(itertools.chain(p_row, itertools.repeat(pad_id)), end))
        correct += p_prefix == t_row[:end]
    return correct / len(tgt_out)
''')

idiom("exact_match_nograd_cumsum_pad", "07_copy_task", "exact_match",
      "@torch.no_grad() (no gradient is compared), F.pad with a value, cumsum to find what follows the first EOS, "
      "float() of a mean", r'''
@torch.no_grad()
def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    T = tgt_out.size(1)
    pred = F.pad(pred, (0, max(0, T - pred.size(1))), value=pad_id)[:, :T]     # (B, T)
    is_eos = tgt_out == eos_id
    after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0                      # (B, T): strictly after the first EOS
    row_ok = (pred.eq(tgt_out) | after_eos).all(dim=1)                          # (B,)
    return float(row_ok.float().mean())
''')

idiom("train_step_zero_grad_first", "07_copy_task", "train_step",
      "model.train(), optimizer.zero_grad(set_to_none=True) before the forward pass, float(loss), return hint", r'''
def train_step(model, optimizer, scheduler, src, tgt_in, tgt_out) -> float:
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = copy_loss(model(src, tgt_in), tgt_out)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return float(loss)
''')

idiom("train_step_typed_model_zero_grad", "07_copy_task", "train_step",
      "full type hints (nn.Module, torch.optim.Optimizer, LRScheduler), model.zero_grad(), loss.detach().item()", r'''
def train_step(model: nn.Module, optimizer: torch.optim.Optimizer,
               scheduler: torch.optim.lr_scheduler.LRScheduler,
               src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> float:
    logits = model(src, tgt_in)                               # (B, T, V)
    loss = copy_loss(logits, tgt_out, pad_id=PAD_ID)
    model.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.detach().item()
''')

# ---------------------------------------------------------------- 08 GPT (components graded only here)

idiom("char_tokenizer_dict_as_tensor", "08_gpt", "CharTokenizer",
      "dict.fromkeys for the distinct characters, an itos dict, torch.as_tensor, str.join over a generator", r'''
class CharTokenizer:
    def __init__(self, text: str) -> None:
        self.chars = sorted(dict.fromkeys(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> torch.Tensor:
        return torch.as_tensor([self.stoi[ch] for ch in s], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.itos[int(i)] for i in ids)
''')


# ---------------------------------------------------------------- more idioms: imports, hooks and helpers people use

idiom("sdpa_module_learner_base_class", "01_attention", "ScaledDotProductAttention",
      "a learner-written base class with extra_repr, the exercise class subclassing it without its own __init__", r'''
class AttentionBase(nn.Module):
    """Shared by every attention module I write: the dropout probability and its repr."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout_p = dropout

    def extra_repr(self):
        return f"dropout={self.dropout_p}"


class ScaledDotProductAttention(AttentionBase):
    def forward(self, Q, K, V, mask=None):
        return scaled_dot_product_attention(Q, K, V, mask, self.dropout_p, self.training)
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

idiom("posenc_ordereddict_cache", "03_positional", "PositionalEncoding",
      "from collections import OrderedDict, a module-level cache dict written by subscript, move_to_end and "
      "popitem (the learner's own dict), clone of a cached table", r'''
from collections import OrderedDict

_TABLES = OrderedDict()   # (max_len, d_model, dtype) -> table; the most recently used last


def cached_table(max_len, d_model):
    key = (max_len, d_model, torch.get_default_dtype())
    if key not in _TABLES:
        _TABLES[key] = sinusoidal_positional_encoding(max_len, d_model)
    _TABLES.move_to_end(key)
    if len(_TABLES) > 8:
        _TABLES.popitem(last=False)
    return _TABLES[key].clone()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", cached_table(max_len, d_model).unsqueeze(0))   # (1, max_len, d_model)

    def forward(self, x):
        if x.size(1) > self.pe.size(1):
            raise ValueError(f"T={x.size(1)} > max_len={self.pe.size(1)}")
        return self.dropout(x + self.pe[:, : x.size(1)])
''')

idiom("ffn_wraps_decorator_full_path_getattr", "04_ffn_layernorm", "FeedForward",
      "a learner-written decorator with functools.wraps around forward (shape assert), "
      "getattr(torch.nn.functional, name) by its full path", r'''
from functools import wraps


def keeps_shape(forward):
    """Decorator: the wrapped forward must return a tensor of its input's shape."""
    @wraps(forward)
    def wrapper(self, x):
        out = forward(self, x)
        assert out.shape == x.shape, f"{type(self).__name__}: {tuple(x.shape)} -> {tuple(out.shape)}"
        return out
    return wrapper


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.activation_name = activation
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    @keeps_shape
    def forward(self, x):
        act = getattr(torch.nn.functional, self.activation_name)
        return self.fc2(self.dropout(act(self.fc1(x))))
''')

idiom("layernorm_register_parameter_constants", "04_ffn_layernorm", "LayerNorm",
      "from torch.nn import Module, Parameter; Module.__init__(self); a __constants__ class attribute; "
      "register_parameter; torch.square", r'''
from torch.nn import Module, Parameter


class LayerNorm(Module):
    __constants__ = ["eps"]

    def __init__(self, d_model, eps=1e-5):
        Module.__init__(self)
        self.eps = eps
        self.register_parameter("weight", Parameter(torch.ones(d_model)))
        self.register_parameter("bias", Parameter(torch.zeros(d_model)))

    def forward(self, x):
        mu = torch.mean(x, dim=-1, keepdim=True)                            # (..., 1)
        sigma2 = torch.mean(torch.square(x - mu), dim=-1, keepdim=True)     # (..., 1)
        return self.weight * (x - mu) / torch.sqrt(sigma2 + self.eps) + self.bias
''')

idiom("subsequent_mask_ones_tril_chain", "05_layers", "make_subsequent_mask",
      "a float ones matrix, Tensor.tril(), .bool(), chained unsqueeze", r'''
def make_subsequent_mask(T, device=None):
    return torch.ones(T, T, device=device).tril().bool().unsqueeze(0).unsqueeze(0)    # (1, 1, T, T)
''')

idiom("encoder_layer_partial_sublayer_method", "05_layers", "EncoderLayer",
      "functools.partial as a local factory, a private _sublayer method taking a lambda or a module", r'''
from functools import partial


class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        Norm = partial(ResidualLayerNorm, d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = Norm(), Norm()
        self.dropout = nn.Dropout(dropout)

    def _sublayer(self, x, norm, fn):
        out = fn(x)
        out, weights = out if isinstance(out, tuple) else (out, None)
        return norm(x, self.dropout(out)), weights

    def forward(self, x, src_mask=None):
        x, attn = self._sublayer(x, self.norm1, lambda h: self.self_attn(h, h, src_mask))
        x, _ = self._sublayer(x, self.norm2, self.ffn)
        return x, attn
''')

idiom("transformer_clones_deepcopy_inference_mode", "06_transformer", "Transformer",
      "import copy and the Annotated Transformer's clones() helper (copy.deepcopy in an nn.ModuleList); "
      "greedy_decode under @torch.inference_mode() with boolean-row assignment and torch.logical_or", r'''
import copy


def clones(module, n):
    """n independent deep copies of a module, in an nn.ModuleList."""
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = clones(EncoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.decoder_layers = clones(DecoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)[0]
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        tgt_mask = make_subsequent_mask(T, tgt_in.device) & make_pad_mask(tgt_in, self.pad_id)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)[0]
        return y

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.out_proj(self.decode(tgt_in, memory, make_pad_mask(src, self.pad_id)))

    @torch.inference_mode()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        src_mask = make_pad_mask(src, self.pad_id)
        memory = self.encode(src)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)      # (B, 1)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)            # (B,)
        for _ in range(max_new_tokens):
            logits = self.out_proj(self.decode(ys, memory, src_mask)[:, -1])               # (B, tgt_vocab)
            next_token = logits.argmax(-1, keepdim=True)                                    # (B, 1)
            next_token[finished] = self.pad_id
            ys = torch.cat([ys, next_token], dim=-1)
            finished = torch.logical_or(finished, next_token.squeeze(-1) == eos_id)
            if torch.all(finished):
                break
        return ys
''')

idiom("copy_loss_reduction_sum_typed_imports", "07_copy_task", "copy_loss",
      "re-imports (import torch.nn.functional as F, from torch import Tensor), shape unpacking, view, "
      "reduction='sum' divided by the count of real tokens", r'''
import torch.nn.functional as F
from torch import Tensor


def copy_loss(logits: Tensor, tgt_out: Tensor, pad_id: int = PAD_ID) -> Tensor:
    B, T, V = logits.shape
    total = F.cross_entropy(logits.reshape(B * T, V), tgt_out.reshape(B * T), ignore_index=pad_id, reduction="sum")
    return total / (tgt_out != pad_id).sum()
''')

idiom("exact_match_numpy_rows", "07_copy_task", "exact_match",
      "NumPy: .cpu().numpy(), np.pad with constant_values, argmax for the first EOS, np.array_equal per row, "
      "float(np.mean(...))", r'''
def exact_match(pred, tgt_out, eos_id=EOS_ID, pad_id=PAD_ID):
    p, t = pred.cpu().numpy(), tgt_out.cpu().numpy()
    T = t.shape[1]
    if p.shape[1] < T:
        p = np.pad(p, ((0, 0), (0, T - p.shape[1])), constant_values=pad_id)       # (B, T)
    ends = (t == eos_id).argmax(axis=1)                                             # (B,): first EOS
    hits = [np.array_equal(p[i, : e + 1], t[i, : e + 1]) for i, e in enumerate(ends)]
    return float(np.mean(hits))
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

idiom("decoder_layer_functional_dropout", "05_layers", "DecoderLayer",
      "dropout as a float and F.dropout(..., training=self.training) instead of an nn.Dropout attribute, "
      "positional call of the sublayers", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.norm3 = ResidualLayerNorm(d_model)
        self.p = dropout

    def drop(self, t):
        return F.dropout(t, p=self.p, training=self.training)

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        a, self_w = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.drop(a))
        c, cross_w = self.cross_attn(y, memory, memory_mask)
        y = self.norm2(y, self.drop(c))
        return self.norm3(y, self.drop(self.ffn(y))), (self_w, cross_w)
''')

idiom("transformer_padding_idx_hparams_eval_restore", "06_transformer", "Transformer",
      "hyper-parameters saved from locals() (a dict comprehension skipping self and __class__), "
      "nn.Embedding(padding_idx=pad_id), greedy_decode that switches to eval() and restores the mode in "
      "try/finally, torch.no_grad() as a context manager, finished rows via masked_fill", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.hparams = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self.hparams.items())

    def encode(self, src):
        src_mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        tgt_mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return y

    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src), src_mask=make_pad_mask(src, self.pad_id)))

    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                memory, src_mask = self.encode(src), make_pad_mask(src, self.pad_id)
                ys = torch.full((len(src), 1), bos_id, dtype=torch.long, device=src.device)    # (B, 1)
                finished = torch.zeros(len(src), dtype=torch.bool, device=src.device)         # (B,)
                for _ in range(max_new_tokens):
                    next_token = self.out_proj(self.decode(ys, memory, src_mask)[:, -1]).argmax(-1)   # (B,)
                    next_token = next_token.masked_fill(finished, self.pad_id)
                    ys = torch.cat([ys, next_token.unsqueeze(-1)], dim=-1)
                    finished = finished | next_token.eq(eos_id)
                    if finished.all():
                        break
                return ys
        finally:
            self.train(was_training)
''')

idiom("transformer_greedy_calls_forward", "06_transformer", "Transformer",
      "the simplest greedy decoding: re-run the whole model self(src, ys) every step and take the last "
      "position's arg-max; `for step in range(...)` with an early break; nn.ModuleList of a list comprehension", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                 dropout=0.1, max_len=512, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out_proj = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src):
        mask = make_pad_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        mask = make_pad_mask(tgt_in, self.pad_id) & make_subsequent_mask(tgt_in.size(1), tgt_in.device)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.out_proj(self.decode(tgt_in, memory, make_pad_mask(src, self.pad_id)))

    @torch.no_grad()
    def greedy_decode(self, src, bos_id, eos_id, max_new_tokens):
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for step in range(max_new_tokens):
            next_token = self(src, ys)[:, -1].argmax(dim=-1)          # (B,): the whole model again, last position
            next_token[done] = self.pad_id
            ys = torch.cat([ys, next_token[:, None]], dim=1)
            done |= next_token == eos_id
            if done.all():
                break
        return ys
''')

idiom("ffn_sequential_sharing_named_layers", "04_ffn_layernorm", "FeedForward",
      "an nn.Sequential pipeline built from the contract's own fc1/dropout/fc2 modules (shared, so state_dict "
      "holds both names), activation chosen from a dict of module classes", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"unsupported activation {activation!r} (use one of {list(acts)})")
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.net = nn.Sequential(self.fc1, acts[activation](), self.dropout, self.fc2)   # same modules, one pipeline

    def forward(self, x):
        return self.net(x)
''')

# ---------------------------------------------------------------- 10 drills (components graded only here)

idiom("rope_complex_polar", "10_drills", "rope_frequencies",
      "RoPE as complex multiplication (the LLaMA idiom): view_as_complex of feature pairs, torch.polar, "
      "view_as_real + flatten; 1.0 / base ** (...) frequencies in the default dtype; ValueError for odd d", r'''
def rope_frequencies(d, base=10000.0):
    if d % 2:
        raise ValueError(f"RoPE rotates pairs of features: d must be even, got {d}")
    return 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.get_default_dtype()) / d)     # (d/2,)


def apply_rope(x, positions=None, base=10000.0):
    T, d = x.shape[-2:]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    angles = positions.to(x.dtype)[..., None] * rope_frequencies(d, base).to(x)          # (..., T, d/2)
    rotation = torch.polar(torch.ones_like(angles), angles)                              # e^(i angle), complex
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())      # (..., T, d/2), complex
    return torch.view_as_real(pairs * rotation).flatten(-2)                              # (..., T, d)
''')

idiom("rmsnorm_rsqrt_super_cls_extra_repr", "10_drills", "RMSNorm",
      "super(Cls, self).__init__(), torch.rsqrt of the mean square, extra_repr with type hints", r'''
class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super(RMSNorm, self).__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"
''')

idiom("preln_callable_hint_module_init_call", "10_drills", "PreLNResidual",
      "nn.Module.__init__(self), typing.Callable hint for the sublayer argument, a named residual", r'''
from typing import Callable

import torch
from torch import nn


class PreLNResidual(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        nn.Module.__init__(self)
        self.ln = LayerNorm(d_model, eps=eps)

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        residual = x
        return residual + sublayer(self.ln(x))
''')

# ---------------------------------------------------------------- 08 GPT, 09 decoding, 10 drills: the LLM components
# One idiom per exercise cell; a component graded in both chapters has its idiom in one of them
# (coverage is by exercise name). The 08 cells that hold two exercises (repeat_kv with
# GroupedQueryAttention, sampling_probs with sample_next_token) are written whole.

idiom("gqa_repeat_interleave_partial_unflatten", "08_gpt", "repeat_kv",
      "torch.repeat_interleave for the KV heads, super(Cls, self).__init__(), functools.partial(nn.Linear, "
      "bias=False) as a layer factory, unflatten/flatten for the heads, `if cache:` on the (k, v) tuple", r'''
import functools


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, T, d_k) -> (B, G * n_rep, T, d_k): query head h reads KV head h // n_rep."""
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super(GroupedQueryAttention, self).__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"num_heads must divide d_model and num_kv_heads must divide num_heads: "
                             f"{d_model}, {num_heads}, {num_kv_heads}")
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.rope, self.rope_base, self.dropout = rope, rope_base, dropout
        linear = functools.partial(nn.Linear, bias=False)
        self.W_q, self.W_o = linear(d_model, d_model), linear(d_model, d_model)
        self.W_k, self.W_v = linear(d_model, num_kv_heads * self.d_k), linear(d_model, num_kv_heads * self.d_k)

    def _heads(self, t, n):
        return t.unflatten(-1, (n, self.d_k)).transpose(1, 2)          # (B, T, n * d_k) -> (B, n, T, d_k)

    def forward(self, x, mask=None, cache=None):
        if x.dim() != 3:
            raise ValueError(f"x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        q = self._heads(self.W_q(x), self.num_heads)                   # (B, H, T, d_k)
        k = self._heads(self.W_k(x), self.num_kv_heads)                # (B, G, T, d_k)
        v = self._heads(self.W_v(x), self.num_kv_heads)                # (B, G, T, d_k)
        start = cache[0].shape[-2] if cache else 0                     # T_past
        if self.rope:
            positions = start + torch.arange(x.shape[1], device=x.device)
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        if cache:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)   # (B, G, T_past + T, d_k)
        n_rep = self.num_heads // self.num_kv_heads
        out, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask=mask,
                                              dropout_p=self.dropout, training=self.training)   # (B, H, T, d_k)
        return self.W_o(out.transpose(1, 2).flatten(2)), (k, v)        # (B, T, H, d_k) -> (B, T, d_model)
''')

idiom("swiglu_module_init_call_manual_silu_typed", "08_gpt", "SwiGLU",
      "nn.Module.__init__(self), SiLU written out as x * torch.sigmoid(x) in a module-level helper, "
      "setattr over a name table, type hints", r'''
def silu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        nn.Module.__init__(self)
        for name, (n_in, n_out) in {"gate_proj": (d_model, d_ff), "up_proj": (d_model, d_ff),
                                    "down_proj": (d_ff, d_model)}.items():
            setattr(self, name, nn.Linear(n_in, n_out, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = silu(self.gate_proj(x)), self.up_proj(x)              # (..., d_ff) each
        return self.down_proj(gate * up)                                 # (..., d_model)
''')

idiom("gpt_block_residual_helper_keywords", "08_gpt", "GPTBlock",
      "super(Cls, self).__init__(), keyword arguments to the parts, a residual helper method taking a "
      "callable, a lambda that keeps the cache from the attention call", r'''
class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, rope_base=10000.0, eps=1e-6):
        super(GPTBlock, self).__init__()
        self.norm1 = RMSNorm(d_model, eps=eps)
        self.attn = GroupedQueryAttention(d_model, num_heads=num_heads, num_kv_heads=num_kv_heads,
                                          rope=True, rope_base=rope_base, dropout=dropout)
        self.norm2 = RMSNorm(d_model, eps=eps)
        self.ffn = SwiGLU(d_model, d_ff=d_ff)
        self.dropout = nn.Dropout(p=dropout)

    def _residual(self, x, norm, sublayer):
        """Pre-LN: x + dropout(sublayer(norm(x)))."""
        return x + self.dropout(sublayer(norm(x)))

    def forward(self, x, mask=None, cache=None):
        new_cache = []

        def attend(h):
            out, kv = self.attn(h, mask=mask, cache=cache)
            new_cache.append(kv)
            return out

        h = self._residual(x, self.norm1, attend)                       # (B, T, d_model)
        return self._residual(h, self.norm2, self.ffn), new_cache[0]
''')

idiom("gpt_apply_init_staticmethod_arange_mask", "08_gpt", "GPT",
      "nn.ModuleList comprehension, self.apply with a @staticmethod initialiser (the Hugging Face idiom), "
      "the cached causal mask from two aranges, zip over [None] * n caches, type hints", r'''
from typing import List, Optional, Tuple


class GPT(nn.Module):
    def __init__(self, vocab_size, d_model=64, num_heads=4, num_kv_heads=2, d_ff=172, num_layers=2,
                 max_len=256, dropout=0.0, tie_weights=False, rope_base=10000.0):
        super().__init__()
        self.max_len = max_len
        self.tok_embed = nn.Embedding(vocab_size, d_model)
        self.emb_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, num_kv_heads, d_ff, dropout=dropout,
                                             rope_base=rope_base) for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init_weights)
        if tie_weights:
            self.lm_head.weight = self.tok_embed.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits, _ = self.forward_cached(idx)
        return logits

    def forward_cached(self, idx: torch.Tensor, caches: Optional[List[Tuple[torch.Tensor, torch.Tensor]]] = None):
        if idx.dim() != 2:
            raise ValueError(f"idx must be 2-D (B, T); got {tuple(idx.shape)}")
        caches = caches or [None] * len(self.blocks)
        past = 0 if caches[0] is None else caches[0][0].shape[2]        # T_past
        total = past + idx.shape[1]
        if total > self.max_len:
            raise ValueError(f"length {total} exceeds max_len={self.max_len}")
        query_pos = torch.arange(past, total, device=idx.device)          # (T,)
        key_pos = torch.arange(total, device=idx.device)                  # (T_past + T,)
        mask = (key_pos[None, :] <= query_pos[:, None])[None, None]       # (1, 1, T, T_past + T)
        x = self.emb_dropout(self.tok_embed(idx))                         # (B, T, d_model)
        new_caches = []
        for block, cache in zip(self.blocks, caches):
            x, cache = block(x, mask, cache)
            new_caches.append(cache)
        return self.lm_head(self.norm(x)), new_caches                     # (B, T, vocab_size)
''')

idiom("warmup_cosine_lr_typed_clip_foreach_norms", "08_gpt", "warmup_cosine_lr",
      "type hints, an early return for the warmup, progress clamped with min(); clipping under @torch.no_grad() "
      "with torch.linalg.vector_norm over stacked norms, torch.clamp of the factor, a generator listed once", r"""
def warmup_cosine_lr(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> float:
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps                 # step 0 already learns
    decay_steps = max(1, max_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)      # 0 -> 1 over the decay
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))           # 1 -> 0
    return min_lr + cosine * (max_lr - min_lr)


@torch.no_grad()
def clip_grad_norm(parameters, max_norm):
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g) for g in grads])   # (P,)
    total = torch.linalg.vector_norm(norms)                            # the global L2 norm
    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(factor)
    return total.item()
""")

idiom("adamw_state_dict_lerp_addcdiv", "08_gpt", "AdamW",
      "per-parameter state in a dict keyed by id(p), Tensor.lerp_ for the first moment, addcmul_/addcdiv_, "
      "the step size folded into a float (PyTorch's own layout)", r"""
class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.state = {id(p): {"t": 0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
                      for p in self.params}

    @torch.no_grad()
    def step(self):
        beta1, beta2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            state = self.state[id(p)]
            state["t"] += 1
            t = state["t"]
            p.mul_(1.0 - self.lr * self.weight_decay)                     # decoupled decay first
            state["exp_avg"].lerp_(p.grad, 1.0 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
            denom = (state["exp_avg_sq"] / (1.0 - beta2 ** t)).sqrt_().add_(self.eps)
            p.addcdiv_(state["exp_avg"], denom, value=-self.lr / (1.0 - beta1 ** t))

    def zero_grad(self):
        for p in self.params:
            p.grad = None
""")

idiom("top_k_sort_where_optional", "09_decoding", "top_k_filter",
      "torch.sort instead of torch.topk, the k-th value by slicing, torch.where with a -inf tensor, Optional hint", r'''
from typing import Optional


def top_k_filter(logits: torch.Tensor, k: Optional[int]) -> torch.Tensor:
    if k is None or k >= logits.shape[-1]:
        return logits
    ranked, _ = torch.sort(logits, dim=-1, descending=True)             # (..., V)
    kth = ranked[..., k - 1:k]                                           # (..., 1) the k-th largest
    return torch.where(logits >= kth, logits, torch.full_like(logits, -math.inf))
''')

idiom("sampling_filter_table_multinomial_index", "09_decoding", "sampling_probs",
      "the filters applied from a table of (function, argument) pairs, logits.div, F.softmax, "
      "torch.argmax, torch.multinomial(num_samples=1)[:, 0]", r'''
def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    logits = logits.div(temperature)                                   # before the softmax
    for keep, arg in ((top_k_filter, top_k), (top_p_filter, top_p)):   # top-k first, then top-p
        logits = keep(logits, arg)
    return F.softmax(logits, dim=-1)                                   # (B, V)


def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if not temperature:
        return torch.argmax(logits, dim=-1)                            # greedy, (B,)
    probs = sampling_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]   # (B, 1) -> (B,)
''')

idiom("generate_preallocated_while_no_grad_block", "09_decoding", "generate",
      "a preallocated output tensor filled in a while loop, `with torch.no_grad():` instead of the decorator, "
      "keyword arguments to sample_next_token", r'''
def generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True):
    B, T0 = idx.shape
    out = idx.new_zeros(B, T0 + max_new_tokens)                       # (B, T0 + n)
    out[:, :T0] = idx
    t, caches = T0, None
    with torch.no_grad():
        while t < T0 + max_new_tokens:
            if use_cache:
                fresh = out[:, :t] if caches is None else out[:, t - 1:t]   # the prompt once, then one token
                logits, caches = model.forward_cached(fresh, caches)        # (B, T_step, V)
            else:
                logits = model(out[:, :t])                                  # (B, t, V)
            out[:, t] = sample_next_token(logits[:, -1], temperature=temperature, top_k=top_k,
                                          top_p=top_p, generator=generator)
            t += 1
    return out
''')

idiom("beam_search_python_lists_nlargest", "09_decoding", "beam_search",
      "beams as Python lists of token ids with float log-prob sums, heapq.nlargest over (beam, token) pairs, "
      "a NamedTuple for hypotheses, max() over candidates with a key", r'''
import heapq
from typing import NamedTuple


class Hypothesis(NamedTuple):
    tokens: list
    logp: float


@torch.no_grad()
def beam_search(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    start = prefix.tolist()
    alive, finished = [Hypothesis(start, 0.0)], []
    for _ in range(max_new_tokens):
        ys = torch.tensor([h.tokens for h in alive], dtype=torch.long, device=prefix.device)   # (N, t)
        log_probs = step_fn(ys).double().tolist()                                             # N lists of V
        pairs = ((h.logp + lp, i, v) for i, h in enumerate(alive) for v, lp in enumerate(log_probs[i]))
        best = heapq.nlargest(beam_size, pairs, key=lambda pair: pair[0])
        extended = [Hypothesis(alive[i].tokens + [v], score) for score, i, v in best]
        finished += [h for h in extended if h.tokens[-1] == eos_id]
        alive = [h for h in extended if h.tokens[-1] != eos_id]
        if not alive or len(finished) >= beam_size:
            break

    def normalised(h):
        return h.logp / (len(h.tokens) - len(start)) ** alpha

    winner = max(finished + alive, key=normalised)
    return torch.tensor(winner.tokens, dtype=torch.long, device=prefix.device), normalised(winner)
''')

idiom("gqa_grouped_einsum_no_repeat", "10_drills", "GroupedQueryAttention",
      "grouped einsum over (B, G, n_rep, T, d_k) query groups instead of repeating K/V, the mask expanded and "
      "unflattened to the groups, torch.where with finfo.min, F.dropout(training=...), permute + flatten", r'''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, rope: bool = True,
                 rope_base: float = 10000.0, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
            raise ValueError(f"bad head counts: d_model={d_model}, num_heads={num_heads}, num_kv_heads={num_kv_heads}")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.rope, self.rope_base, self.p = rope, rope_base, dropout
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        if x.dim() != 3:
            raise ValueError(f"x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        B, T, _ = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        r = H // G                                                                 # query heads per KV head
        q = self.W_q(x).view(B, T, G, r, d_k).permute(0, 2, 3, 1, 4)              # (B, G, r, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).permute(0, 2, 1, 3)                    # (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).permute(0, 2, 1, 3)                    # (B, G, T, d_k)
        past_k, past_v = cache if cache is not None else (k[:, :, :0], v[:, :, :0])
        if self.rope:
            positions = torch.arange(T, device=x.device) + past_k.shape[2]
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)               # (B, G, T_k, d_k)
        scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(d_k)          # (B, G, r, T, T_k)
        if mask is not None:
            keep = mask.bool().expand(B, H, T, k.shape[2]).unflatten(1, (G, r))    # (B, G, r, T, T_k)
            scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = torch.where(keep, weights, 0.0)                              # a blind row -> zeros
        weights = F.dropout(weights, self.p, training=self.training)
        out = torch.einsum("bgrqk,bgkd->bgrqd", weights, v)                        # (B, G, r, T, d_k)
        return self.W_o(out.permute(0, 3, 1, 2, 4).flatten(2)), (k, v)            # (B, T, G, r, d_k) -> (B, T, d_model)
''')

idiom("sliding_window_tril_triu_band", "10_drills", "make_sliding_window_mask",
      "the band as torch.ones(...).tril().triu(1 - window), [None, None] for the broadcast axes", r'''
def make_sliding_window_mask(T, window, device=None):
    if window < 1:
        raise ValueError(f"window must be at least 1; got {window}")
    band = torch.ones(T, T, dtype=torch.bool, device=device).tril().triu(1 - window)   # i - window < j <= i
    return band[None, None]                                                           # (1, 1, T, T)
''')

idiom("top_p_row_loop_stable_sort", "10_drills", "top_p_filter",
      "a plain Python loop over the sorted tokens of each row (mass before each token accumulated by hand), "
      "flatten(0, -2) for the leading axes, boolean indexing back to vocabulary order", r'''
def top_p_filter(logits, p):
    if p is None or p >= 1.0:
        return logits
    rows = logits.reshape(-1, logits.shape[-1])                       # (N, V)
    drop = torch.zeros_like(rows, dtype=torch.bool)                  # (N, V)
    probs = rows.softmax(-1)
    for n in range(rows.shape[0]):
        ranked, order = torch.sort(probs[n], descending=True, stable=True)
        mass = torch.zeros((), dtype=ranked.dtype)
        for prob, token in zip(ranked, order):
            if mass >= p:                                            # the tokens before already reach p
                drop[n, token] = True
            mass = mass + prob
    return rows.masked_fill(drop, float("-inf")).view_as(logits)
''')

idiom("sample_next_token_typed_max_indices", "10_drills", "sample_next_token",
      "Optional[torch.Generator] hint, logits.max(-1).indices for greedy, .view(-1) on the draw", r'''
from typing import Optional


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                      top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    if temperature == 0.0:
        return logits.max(dim=-1).indices                                        # (B,)
    draw = torch.multinomial(sampling_probs(logits, temperature, top_k, top_p), 1, generator=generator)
    return draw.view(-1)                                                         # (B, 1) -> (B,)
''')

idiom("softmax_backward_jacobian_movedim", "10_drills", "softmax_backward",
      "the full Jacobian diag(y) - y y^T with torch.diag_embed, a batched matrix-vector product, movedim "
      "to put `dim` last and back", r'''
def softmax_backward(y, grad_y, dim=-1):
    y_last, g_last = y.movedim(dim, -1), grad_y.movedim(dim, -1)                 # (..., n)
    jacobian = torch.diag_embed(y_last) - y_last[..., :, None] * y_last[..., None, :]   # (..., n, n), symmetric
    grad = (jacobian @ g_last[..., None]).squeeze(-1)                            # (..., n, n) @ (..., n, 1)
    return grad.movedim(-1, dim)
''')

idiom("layer_norm_backward_var_mean_rsqrt_einsum", "10_drills", "layer_norm_backward",
      "torch.var_mean(correction=0), torch.rsqrt, the sum form (d * g - sum g - x_hat * sum(g x_hat)) / (d * sigma), "
      "einsum for the parameter gradients", r'''
def layer_norm_backward(x, weight, grad_out, eps=1e-5):
    d = x.shape[-1]
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)            # (..., 1) each
    rstd = torch.rsqrt(var + eps)                                                 # 1 / sigma
    x_hat = (x - mean) * rstd                                                     # (..., d)
    g = grad_out * weight                                                         # (..., d)
    grad_x = rstd / d * (d * g - g.sum(-1, keepdim=True) - x_hat * (g * x_hat).sum(-1, keepdim=True))
    rows_out, rows_hat = grad_out.reshape(-1, d), x_hat.reshape(-1, d)            # (N, d)
    grad_weight = torch.einsum("nd,nd->d", rows_out, rows_hat)
    return grad_x, grad_weight, rows_out.sum(0)
''')

idiom("cross_entropy_log_softmax_one_hot_target", "10_drills", "cross_entropy",
      "F.log_softmax, the smoothed target distribution built with F.one_hot, masked_select(...).mean() "
      "over the kept positions", r'''
def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.shape[-1]
    log_p = F.log_softmax(logits.reshape(-1, C), dim=-1)                          # (N, C)
    target = target.reshape(-1)                                                   # (N,)
    keep = target.ne(ignore_index)                                                # (N,)
    onehot = F.one_hot(torch.where(keep, target, 0), C).to(log_p.dtype)           # (N, C)
    q = (1.0 - label_smoothing) * onehot + label_smoothing / C                    # smoothed target
    per_position = -(q * log_p).sum(-1)                                           # (N,)
    return per_position.masked_select(keep).mean()                                # NaN if all ignored
''')

idiom("attention_cost_named_terms_namedtuple", "10_drills", "attention_flops_and_memory",
      "each matmul as a named term, a typing.NamedTuple result (still a tuple), `num_kv_heads or H`", r'''
from typing import NamedTuple


class AttentionCost(NamedTuple):
    flops: int
    attn_bytes: int


def attention_flops_and_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    G = num_kv_heads or H
    d_k = d // H
    q_proj = o_proj = 2 * n * d * d                 # (n, d) @ (d, d)
    k_proj = v_proj = 2 * n * d * (G * d_k)         # (n, d) @ (d, G * d_k)
    scores = 2 * H * n * n * d_k                    # Q K^T per head: (n, d_k) @ (d_k, n)
    mix = 2 * H * n * n * d_k                       # weights @ V per head: (n, n) @ (n, d_k)
    flops = batch * (q_proj + k_proj + v_proj + o_proj + scores + mix)
    return AttentionCost(flops, batch * H * n * n * bytes_per_element)
''')

idiom("kv_cache_bytes_math_prod", "10_drills", "kv_cache_bytes",
      "math.prod over the factors, keyword-only style names in a tuple", r'''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    k_and_v = 2
    return math.prod((k_and_v, num_layers, num_kv_heads, head_dim, seq_len, batch, bytes_per_element))
''')


# ---------------------------------------------------------------- 11 tokenizers: BPE

idiom("learn_bpe_counter_most_common_lists", "11_tokenizers", "learn_bpe",
      "collections.Counter with most_common(1), words as lists in a list of [symbols, freq] pairs, itertools.pairwise",
      r"""
import collections
import itertools


def learn_bpe(word_freqs, num_merges):
    words = [[list(word) + [END_OF_WORD], freq] for word, freq in word_freqs.items()]
    merges = []
    while len(merges) < num_merges:
        counts = collections.Counter()
        for symbols, freq in words:
            for pair in itertools.pairwise(symbols):          # inside one word only
                counts[pair] += freq
        if not counts:
            break
        (best, n), = counts.most_common(1)                     # ties: first counted, as max()
        if n < 2:
            break
        for entry in words:
            entry[0] = list(merge_pair(tuple(entry[0]), best))
        merges.append(best)
    return merges
""")

idiom("bpe_encode_functools_reduce_decode_split", "11_tokenizers", "bpe_encode",
      "functools.reduce over the merges, decode through str.split and str.join", r"""
import functools


def bpe_encode(word, merges):
    start = tuple(word) + (END_OF_WORD,)
    return list(functools.reduce(merge_pair, merges, start))   # rank order: the list's order


def bpe_decode(tokens):
    words = "".join(tokens).split(END_OF_WORD)
    return " ".join(w for w in words if w)
""")
