"""Idioms of the exercises checked in tutor/checks/attention.py (01 attention)."""
from . import idiom

# ---------------------------------------------------------------- 01_attention

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

