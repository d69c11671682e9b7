"""Right alternatives for chapter 13's bonus exercise (multi-head latent attention)."""
import math

import torch
import torch.nn as nn


class MLAAbsorbedEinsum(nn.Module):
    """Keys never built: W_uk is absorbed into the query (q_latent = q W_uk per head), scores against the
    cached latents directly, as DeepSeek-V2's inference does; values up-projected after the weighted sum."""

    def __init__(self, d_model, num_heads, d_latent):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        shapes = {"W_q": (d_model, d_model), "W_dkv": (d_model, d_latent), "W_uk": (d_latent, d_model),
                  "W_uv": (d_latent, d_model), "W_o": (d_model, d_model)}
        for name, (fan_in, fan_out) in shapes.items():
            setattr(self, name, nn.Linear(fan_in, fan_out, bias=False))

    def forward(self, x, mask=None, cache=None):
        B, T, _ = x.shape
        c = self.W_dkv(x)
        c = c if cache is None else torch.cat([cache, c], dim=1)                         # (B, S, r)
        q = self.W_q(x).view(B, T, self.num_heads, self.d_k)                              # (B, T, H, d_k)
        w_uk = self.W_uk.weight.view(self.num_heads, self.d_k, -1)                        # (H, d_k, r)
        w_uv = self.W_uv.weight.view(self.num_heads, self.d_k, -1)                        # (H, d_k, r)
        q_latent = torch.einsum("bthd,hdr->bhtr", q, w_uk)                                # (B, H, T, r)
        scores = torch.einsum("bhtr,bsr->bhts", q_latent, c) / math.sqrt(self.d_k)       # (B, H, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        mixed = torch.einsum("bhts,bsr->bhtr", weights, c)                                # (B, H, T, r)
        out = torch.einsum("bhtr,hdr->bthd", mixed, w_uv).reshape(B, T, -1)              # (B, T, d_model)
        return self.W_o(out), c


CASES = [
    ("MultiHeadLatentAttention", MLAAbsorbedEinsum),
]
