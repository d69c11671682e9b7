"""Idioms of the exercises checked in tutor/checks/layers.py (05 encoder and decoder layers)."""
from . import idiom

# ---------------------------------------------------------------- 05_layers

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

