"""Chapter 05 (part 2): Post-LN encoder and decoder layers."""
import torch.nn as nn

from .ffn_norm import FeedForward, ResidualLayerNorm
from .mha import MultiHeadAttention


class EncoderLayer(nn.Module):
    """One Post-LN encoder layer: self-attention, then the feed-forward network.

    ``EncoderLayer(d_model, num_heads, d_ff, dropout=0.1)`` with attributes ``self_attn``
    (``MultiHeadAttention``), ``ffn`` (``FeedForward``, ReLU), ``norm1, norm2``
    (``ResidualLayerNorm``) and ``dropout``.
    ``forward(x (B, T, d_model), src_mask=None) -> (x (B, T, d_model), attn (B, H, T, T))``:

        x = norm1(x, dropout(self_attn(x, x, src_mask)))
        x = norm2(x, dropout(ffn(x)))

    ``src_mask`` is usually ``make_pad_mask(src)`` ``(B, 1, 1, T)``. Equals
    ``nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True)``.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, src_mask=None):
        ### BEGIN SOLUTION
        attn_out, attn = self.self_attn(x, x, src_mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x, self.dropout(attn_out))
        x = self.norm2(x, self.dropout(self.ffn(x)))
        return x, attn
        ### END SOLUTION


class DecoderLayer(nn.Module):
    """One Post-LN decoder layer: masked self-attention, cross-attention, feed-forward network.

    ``DecoderLayer(d_model, num_heads, d_ff, dropout=0.1)`` with attributes ``self_attn``,
    ``cross_attn`` (``MultiHeadAttention``), ``ffn``, ``norm1, norm2, norm3`` and ``dropout``.
    ``forward(y (B, T_t, d_model), memory (B, T_s, d_model), tgt_mask=None, memory_mask=None)
    -> (y, (self_attn_w (B, H, T_t, T_t), cross_attn_w (B, H, T_t, T_s)))``:

        y = norm1(y, dropout(self_attn(y, y, tgt_mask)))            # tgt_mask: causal & tgt padding
        y = norm2(y, dropout(cross_attn(y, memory, memory_mask)))   # queries from y, keys/values from memory
        y = norm3(y, dropout(ffn(y)))

    ``memory_mask`` is the *source* padding mask ``(B, 1, 1, T_s)``, never the target mask.
    Equals ``nn.TransformerDecoderLayer(..., batch_first=True)``.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = ResidualLayerNorm(d_model)
        self.norm2 = ResidualLayerNorm(d_model)
        self.norm3 = ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        ### BEGIN SOLUTION
        self_out, self_attn_w = self.self_attn(y, y, tgt_mask)  # (B, T_t, d_model), (B, H, T_t, T_t)
        y = self.norm1(y, self.dropout(self_out))
        cross_out, cross_attn_w = self.cross_attn(y, memory, memory_mask)  # (B, T_t, d_model), (B, H, T_t, T_s)
        y = self.norm2(y, self.dropout(cross_out))
        y = self.norm3(y, self.dropout(self.ffn(y)))
        return y, (self_attn_w, cross_attn_w)
        ### END SOLUTION
