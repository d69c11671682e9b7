"""Right alternatives for the drill bank's checks that had none (lessons/10_drills.py)."""
import torch
import torch.nn as nn

from .reference import load

R = load()


def apply_rope_complex(x, positions=None, base=10000.0):
    """RoPE as a complex multiplication: pair (2i, 2i+1) is the number x[2i] + i·x[2i+1]."""
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T)
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = positions.to(x.dtype)[..., None] * theta  # (..., T, d/2)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())  # (..., T, d/2) complex
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)  # (..., T, d)


class PreLNResidualSwapped(nn.Module):
    """Pre-LN with the sum written the other way round and the norm applied through a local name."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = R["LayerNorm"](d_model, eps)

    def forward(self, x, sublayer):
        normed = self.ln(x)
        return sublayer(normed) + x


CASES = [
    ("apply_rope", apply_rope_complex),
    ("PreLNResidual", PreLNResidualSwapped),
]
