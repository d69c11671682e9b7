"""Idioms of the exercises checked in tutor/checks/masks.py (05 masks)."""
from . import idiom

# ---------------------------------------------------------------- 05_layers

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


idiom("subsequent_mask_ones_tril_chain", "05_layers", "make_subsequent_mask",
      "a float ones matrix, Tensor.tril(), .bool(), chained unsqueeze", r'''
def make_subsequent_mask(T, device=None):
    return torch.ones(T, T, device=device).tril().bool().unsqueeze(0).unsqueeze(0)    # (1, 1, T, T)
''')

