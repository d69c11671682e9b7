"""Chapter 03: positional encoding (sinusoidal; bonus: learned, RoPE)."""
import math

import torch
import torch.nn as nn


def sinusoidal_positional_encoding(max_len, d_model):
    """Sinusoidal positional-encoding table of shape ``(max_len, d_model)``.

    Contract: ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))`` and
    ``PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))`` -- even columns sin, odd columns cos,
    both columns of a pair share one frequency. An odd ``d_model`` works (its last column is a
    sin). The table has the default dtype (``torch.get_default_dtype()``).

    Hints: ``position`` ``(max_len, 1)`` times ``div_term`` ``(ceil(d_model/2),)`` broadcasts to
    the angle table; ``div_term = exp(arange(0, d_model, 2) * (-ln(10000) / d_model))``;
    fill ``pe[:, 0::2]`` and ``pe[:, 1::2]`` (the latter has one column fewer when d_model is odd).

    中文：正弦位置编码表 ``(max_len, d_model)``：偶数列 sin、奇数列 cos，同一对共用频率
    ``10000^(-2i/d_model)``；``d_model`` 为奇数时最后一列是 sin；默认浮点类型。
    """
    ### BEGIN SOLUTION
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(max_len, dtype=pe.dtype).unsqueeze(1)  # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=pe.dtype) * (-math.log(10000.0) / d_model))
    angles = position * div_term  # (max_len, 1) * (ceil(d_model/2),) -> (max_len, ceil(d_model/2))
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe
    ### END SOLUTION


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a batch of embeddings, then applies dropout.

    ``PositionalEncoding(d_model, max_len=5000, dropout=0.0)`` registers the buffer
    ``pe (1, max_len, d_model)`` (a buffer: saved in ``state_dict``, moved by ``.to()``, not
    trained) and ``dropout`` (``nn.Dropout``).
    ``forward(x (B, T, d_model)) -> x + pe[:, :T]`` (then dropout); ``ValueError`` when
    ``T > max_len``.

    Hint: ``self.register_buffer("pe", table.unsqueeze(0))``.

    中文：把正弦表存成 buffer ``pe (1, max_len, d_model)``（随 ``state_dict`` 保存、随 ``.to()`` 移动、不训练），
    ``forward`` 返回 ``dropout(x + pe[:, :T])``；``T > max_len`` 时抛出 ``ValueError``。
    """

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        pe = sinusoidal_positional_encoding(max_len, d_model).unsqueeze(0)  # (1, max_len, d_model)
        self.register_buffer("pe", pe)
        ### END SOLUTION

    def forward(self, x):
        if x.dim() != 3:
            raise ValueError(f"x 应为 3 维 (B, T, d_model) / x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        if x.size(1) > self.pe.size(1):
            raise ValueError(
                f"序列长度 T={x.size(1)} 超过 max_len={self.pe.size(1)} / "
                f"sequence length T={x.size(1)} exceeds max_len={self.pe.size(1)}"
            )
        ### BEGIN SOLUTION
        x = x + self.pe[:, : x.size(1)]  # (B, T, d_model) + (1, T, d_model)
        return self.dropout(x)
        ### END SOLUTION


class LearnedPositionalEmbedding(nn.Module):
    """Bonus: a trained position table (BERT, GPT-2) instead of the fixed sinusoidal one.

    ``LearnedPositionalEmbedding(d_model, max_len=512, dropout=0.0)`` with attributes
    ``embed`` (``nn.Embedding(max_len, d_model)``, row ``t`` = the vector of position ``t``) and
    ``dropout``. ``forward(x (B, T, d_model)) -> dropout(x + embed(arange(T)))``; ``ValueError``
    when ``T > max_len`` (a learned table cannot extrapolate beyond the positions it has).

    Hint: build the positions with ``torch.arange(T, device=x.device)``.
    """

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.max_len = max_len
        self.embed = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x):
        if x.dim() != 3:
            raise ValueError(f"x 应为 3 维 (B, T, d_model) / x must be 3-D (B, T, d_model); got {tuple(x.shape)}")
        if x.size(1) > self.embed.num_embeddings:
            raise ValueError(
                f"序列长度 T={x.size(1)} 超过 max_len={self.embed.num_embeddings} / "
                f"sequence length T={x.size(1)} exceeds max_len={self.embed.num_embeddings}"
            )
        ### BEGIN SOLUTION
        positions = torch.arange(x.size(1), device=x.device)  # (T,)
        x = x + self.embed(positions)  # (B, T, d_model) + (T, d_model)
        return self.dropout(x)
        ### END SOLUTION


def rope_frequencies(d, base=10000.0):
    """Bonus (RoPE): the ``d // 2`` rotation frequencies ``theta_i = base^(-2i/d)``, i = 0 .. d/2-1.

    Returns a 1-D tensor of the default dtype; ``ValueError`` when ``d`` is odd (RoPE rotates
    pairs of features). Pair ``i`` (features ``2i`` and ``2i+1``) of the token at position ``m``
    is rotated by the angle ``m * theta_i``.
    """
    if d % 2 != 0:
        raise ValueError(f"RoPE 需要偶数维度，得到 d={d} / RoPE needs an even dimension, got d={d}")
    ### BEGIN SOLUTION
    return base ** (-torch.arange(0, d, 2, dtype=torch.get_default_dtype()) / d)  # (d/2,)
    ### END SOLUTION


def apply_rope(x, positions=None, base=10000.0):
    """Bonus (RoPE, rotary position embedding): rotate queries or keys by their position.

    ``x (..., T, d)`` with even ``d`` (e.g. ``(B, H, T, d_k)``); ``positions`` optional, integer
    or float, broadcastable to ``(..., T)`` (default ``arange(T)``). Returns a tensor of the
    shape of ``x``. Pairing: adjacent features ``(2i, 2i+1)`` form pair ``i`` (the "interleaved"
    layout of the RoFormer paper and Meta's original LLaMA code; not the "half-split"
    ``(i, i + d/2)`` ``rotate_half`` layout of GPT-NeoX and Hugging Face's Llama, whose checkpoint
    conversion permutes the rows of W_q / W_k), rotated by the angle ``positions * theta_i``
    (``theta`` from ``rope_frequencies``):

        out[..., 2i]   = x[..., 2i] * cos - x[..., 2i+1] * sin
        out[..., 2i+1] = x[..., 2i] * sin + x[..., 2i+1] * cos

    Property: ``apply_rope(q, m) . apply_rope(k, n)`` depends only on ``m - n``; norms are kept.
    Apply it to Q and K after the head split, never to V.
    """
    if x.dim() < 2:
        raise ValueError(f"x 至少需要 2 维 (..., T, d) / x needs at least 2 dims (..., T, d); got {tuple(x.shape)}")
    ### BEGIN SOLUTION
    T, d = x.shape[-2], x.shape[-1]
    theta = rope_frequencies(d, base).to(dtype=x.dtype, device=x.device)  # (d/2,)
    if positions is None:
        positions = torch.arange(T, device=x.device)
    angles = positions.to(x.dtype).unsqueeze(-1) * theta  # (..., T, 1) * (d/2,) -> (..., T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d)
    ### END SOLUTION
