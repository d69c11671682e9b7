"""Idioms of the exercises checked in tutor/checks/positional.py (03 positions)."""
from . import idiom

# ---------------------------------------------------------------- 03_positional

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


# ---------------------------------------------------------------- 10_drills

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

