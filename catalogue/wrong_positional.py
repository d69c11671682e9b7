"""Wrong positional encodings."""

import torch
import torch.nn as nn


def _table(max_len, d_model, first=torch.sin, second=torch.cos, exponent=2.0):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len, dtype=pe.dtype).unsqueeze(1)
    i = torch.arange((d_model + 1) // 2, dtype=pe.dtype)
    angles = pos / 10000 ** (exponent * i / d_model)
    pe[:, 0::2] = first(angles)
    pe[:, 1::2] = second(angles[:, : d_model // 2])
    return pe


def pe_swapped(max_len, d_model):
    return _table(max_len, d_model, torch.cos, torch.sin)


def pe_exponent_uses_column_index(max_len, d_model):
    # 10000^(2k/d) with k the column index 2i: the exponent is doubled.
    return _table(max_len, d_model, exponent=4.0)


def pe_missing_factor_2(max_len, d_model):
    return _table(max_len, d_model, exponent=1.0)


class PENotSliced(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", _table(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe)  # bug: the whole max_len table


class PESwapped(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe_swapped(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(1)])


def rope_half_split(x, positions=None, base=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    ang = torch.arange(T, dtype=x.dtype)[:, None] * theta
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], dim=-1)


class LearnedPositionsReversed(nn.Module):
    """Looks up the positions backwards: the last token gets position 0."""

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        positions = torch.arange(x.size(1) - 1, -1, -1)  # bug: T-1, ..., 0
        return self.dropout(x + self.embed(positions))


CASES = [
    ("sinusoidal_positional_encoding", pe_swapped, "pe_sin_cos_swapped"),
    ("sinusoidal_positional_encoding", pe_exponent_uses_column_index, "pe_freq_factor_2"),
    ("sinusoidal_positional_encoding", pe_missing_factor_2, "pe_freq_factor_2"),
    ("PositionalEncoding", PENotSliced, "pe_not_sliced"),
    ("PositionalEncoding", PESwapped, "pe_sin_cos_swapped"),
    ("apply_rope", rope_half_split, "rope_half_split"),
    ("LearnedPositionalEmbedding", LearnedPositionsReversed, None),
]
