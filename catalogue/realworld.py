"""Real-world-style implementations: each written for this course in the style of a well-known
public tutorial or library (the Annotated Transformer, BERT/Hugging Face, GPT-2, d2l, PyTorch's
own conventions, ...), adapted to the contract's names and signatures. Each one is wrong for this
contract, often in more than one way, usually inside a part of a composite.

A check must fail each one AND name every real difference, in the part where it sits.
``CASES``: ``(check name, object, ids, where)``: ``ids`` the set of diagnosis ids the message must
name (all of them, and no other), ``where`` a part path the message must name (or None).
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .reference import load

R = load()
MultiHeadAttention, FeedForward, LayerNorm = R["MultiHeadAttention"], R["FeedForward"], R["LayerNorm"]
EncoderLayer, DecoderLayer, Transformer = R["EncoderLayer"], R["DecoderLayer"], R["Transformer"]


# ---------------------------------------------------------------- softmax and attention

def softmax_textbook(x, axis=-1):
    """The textbook formula, as in many blog posts: no max subtracted, and the last axis always."""
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def sdpa_int_mask_unscaled(Q, K, V, mask=None, dropout_p=0.0, training=False):
    """The issue's case: 1/sqrt(d_k) forgotten, and ``~mask`` assumes a bool mask."""
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    attn = scores.softmax(dim=-1)
    if mask is not None:
        attn = attn.masked_fill(~mask, 0.0)
    return attn @ V, attn


def sdpa_d2l_masked_softmax(Q, K, V, mask=None, dropout_p=0.0, training=False):
    """d2l's masked_softmax: blocked scores replaced by -1e6, weights not zeroed afterwards."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = torch.where(mask.bool(), scores, torch.full_like(scores, -1e6))
    attn = F.softmax(scores, dim=-1)
    return attn @ V, attn


def sdpa_annotated_unscaled(Q, K, V, mask=None, dropout_p=0.0, training=False):
    """The Annotated Transformer's ``attention()`` with the scale forgotten: -1e9 fill, no zeroing."""
    scores = torch.matmul(Q, K.transpose(-2, -1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, V), p_attn


class MHABlogStyle(nn.Module):
    """One projection per name, heads by view/transpose, scaled by sqrt(d_model), -1e9 fill."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv, mask=None):
        B = x_q.size(0)
        q, k, v = (lin(x).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
                   for lin, x in ((self.W_q, x_q), (self.W_k, x_kv), (self.W_v, x_kv)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # (B, H, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = scores.softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).contiguous().view(B, -1, self.d_model)  # (B, T_q, d_model)
        return self.W_o(out), attn


class MHAEinsum(nn.Module):
    """einsum heads (as in several blog posts), blocked scores filled with -inf."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.h = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x_q, x_kv, mask=None):
        B, T_q, D = x_q.shape
        T_k, d_k = x_kv.shape[1], D // self.h
        q = self.W_q(x_q).reshape(B, T_q, self.h, d_k)  # (B, T_q, H, d_k)
        k = self.W_k(x_kv).reshape(B, T_k, self.h, d_k)  # (B, T_k, H, d_k)
        v = self.W_v(x_kv).reshape(B, T_k, self.h, d_k)  # (B, T_k, H, d_k)
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / d_k ** 0.5  # (B, H, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(B, T_q, D)  # (B, T_q, d_model)
        return self.W_o(out), attn


class MHAAnnotatedMaskUnsqueeze(MultiHeadAttention):
    """The Annotated Transformer's ``mask.unsqueeze(1)`` ("same mask applied to all h heads"), on a
    mask that already has its head axis."""

    def forward(self, x_q, x_kv, mask=None):
        return super().forward(x_q, x_kv, None if mask is None else mask.unsqueeze(1))


class MHAAveragedWeights(MultiHeadAttention):
    """``nn.MultiheadAttention``'s default ``average_attn_weights=True``."""

    def forward(self, x_q, x_kv, mask=None):
        out, attn = super().forward(x_q, x_kv, mask)
        return out, attn.mean(dim=1)


# ---------------------------------------------------------------- FFN and LayerNorm

class FFNGPT2Gelu(nn.Module):
    """GPT-2's ``gelu_new``: the tanh approximation of GELU."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1, self.fc2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)
        self.activation = activation

    def forward(self, x):
        h = self.fc1(x)
        if self.activation == "gelu":
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        else:
            h = h.clamp(min=0)
        return self.fc2(self.dropout(h))


class FFNAlwaysTanhGelu(nn.Module):
    """A GPT-2 block's MLP pasted in: tanh GELU whatever ``activation`` says."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class PositionalEncodingPyTorchTutorial(nn.Module):
    """PyTorch's tutorial PositionalEncoding (sequence-first) with its buffer made batch-first, but
    still sliced by ``x.size(0)``."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]
        self.register_buffer("pe", pe.transpose(0, 1))  # (1, max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(0)])


class AnnotatedLayerNorm(nn.Module):
    """The Annotated Transformer's LayerNorm: ``std`` (unbiased), eps outside the root, eps=1e-6."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class BertLayerNorm(nn.Module):
    """The old Hugging Face BertLayerNorm ("TF style, epsilon inside the square root"), eps fixed at 1e-12."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.variance_epsilon = 1e-12

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.variance_epsilon)
        return self.weight * x + self.bias


class UnbiasedLayerNorm(LayerNorm):
    """``x.var(-1)`` keeps torch's default, the unbiased estimate."""

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + self.eps) * self.weight + self.bias


class TorchVarLayerNorm(nn.Module):
    """``torch.var`` (unbiased by default) and eps=1e-6 as a default that the layers never override."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        return self.weight * (x - mean) / torch.sqrt(torch.var(x, -1, keepdim=True) + self.eps) + self.bias


class LayerNormNoAffineVar(nn.Module):
    """A standardisation (``x.var`` unbiased) whose weight and bias are declared but never used."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + self.eps)


class AnnotatedResidual(nn.Module):
    """Post-LN as the contract asks, but around the Annotated Transformer's LayerNorm."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.ln = AnnotatedLayerNorm(d_model, eps)

    def forward(self, x, sublayer_out):
        return self.ln(x + sublayer_out)


def _residual(norm_class, **norm_kwargs):
    """A Post-LN ``ResidualLayerNorm`` around another LayerNorm."""
    class Residual(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.ln = norm_class(d_model, **norm_kwargs)

        def forward(self, x, sublayer_out):
            return self.ln(x + sublayer_out)
    return Residual


class SublayerConnection(nn.Module):
    """The Annotated Transformer's residual connection, ``x + dropout(sublayer(norm(x)))``: Pre-LN."""

    def __init__(self, d_model, dropout=0.1):
        super().__init__()
        self.ln = AnnotatedLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.ln(x)))


# ---------------------------------------------------------------- encoder and decoder layers

class AnnotatedEncoderLayer(nn.Module):
    """The Annotated Transformer's EncoderLayer with the contract's names."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = SublayerConnection(d_model, dropout), SublayerConnection(d_model, dropout)

    def forward(self, x, src_mask=None):
        weights = []

        def attend(h):
            out, w = self.self_attn(h, h, src_mask)
            weights.append(w)
            return out

        x = self.norm1(x, attend)
        return self.norm2(x, self.ffn), weights[0]


class AnnotatedDecoderLayer(nn.Module):
    """The Annotated Transformer's DecoderLayer with the contract's names."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (SublayerConnection(d_model, dropout) for _ in range(3))

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        weights = []

        def attend(attn, kv, mask):
            def run(h):
                out, w = attn(h, h if kv is None else kv, mask)
                weights.append(w)
                return out
            return run

        y = self.norm1(y, attend(self.self_attn, None, tgt_mask))
        y = self.norm2(y, attend(self.cross_attn, memory, memory_mask))
        return self.norm3(y, self.ffn), tuple(weights)


def _encoder(norm_class):
    class Encoder(EncoderLayer):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
            super().__init__(d_model, num_heads, d_ff, dropout)
            self.norm1, self.norm2 = norm_class(d_model), norm_class(d_model)
    return Encoder


def _decoder(norm_class):
    class Decoder(DecoderLayer):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
            super().__init__(d_model, num_heads, d_ff, dropout)
            self.norm1, self.norm2, self.norm3 = (norm_class(d_model) for _ in range(3))
    return Decoder


def _named(cls, name):
    cls.__name__ = cls.__qualname__ = name
    return cls


EncoderLayerBertEps = _named(_encoder(_residual(LayerNorm, eps=1e-12)), "EncoderLayerBertEps")  # BERT's layer_norm_eps
EncoderLayerUnbiasedNorm = _named(_encoder(_residual(UnbiasedLayerNorm)), "EncoderLayerUnbiasedNorm")
DecoderLayerBertEps = _named(_decoder(_residual(LayerNorm, eps=1e-12)), "DecoderLayerBertEps")
DecoderLayerUnbiasedNorm = _named(_decoder(_residual(UnbiasedLayerNorm)), "DecoderLayerUnbiasedNorm")
EncoderLayerTorchVar = _named(_encoder(_residual(TorchVarLayerNorm)), "EncoderLayerTorchVar")


class EncoderLayerMaskForgotten(EncoderLayer):
    """An einsum attention (right) inside, but ``src_mask`` never reaches it."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.self_attn = MHAEinsum(d_model, num_heads, dropout)

    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x)
        x = self.norm1(x, self.dropout(a))
        return self.norm2(x, self.dropout(self.ffn(x))), attn


class EncoderLayerSkipFromInput(EncoderLayer):
    """Both residuals taken from the layer's input ``x``."""

    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x, src_mask)
        h = self.norm1(x, self.dropout(a))
        return self.norm2(x, self.dropout(self.ffn(h))), attn


class EncoderLayerNormsSwapped(EncoderLayer):
    """norm2 after self-attention, norm1 after the FFN."""

    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x, src_mask)
        x = self.norm2(x, self.dropout(a))
        return self.norm1(x, self.dropout(self.ffn(x))), attn


class DecoderLayerQueriesFromMemory(DecoderLayer):
    """Cross-attention called as ``cross_attn(memory, y, ...)``: queries from the encoder."""

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(memory, y, memory_mask)
        y = self.norm2(y, self.dropout(c))
        return self.norm3(y, self.dropout(self.ffn(y))), (sw, cw)


class DecoderLayerNoFFNResidual(DecoderLayer):
    """The FFN sublayer normalised without its residual."""

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(y, memory, memory_mask)
        y = self.norm2(y, self.dropout(c))
        return self.norm3.ln(self.dropout(self.ffn(y))), (sw, cw)


class EncoderLayerOneNorm(EncoderLayer):
    """A copy-paste slip: ``norm1`` after both sublayers, ``norm2`` never used."""

    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x, src_mask)
        x = self.norm1(x, self.dropout(a))
        return self.norm1(x, self.dropout(self.ffn(x))), attn


class EncoderLayerAliasedNorm(EncoderLayer):
    """"The norms are identical, make one": ``self.norm2 = self.norm1``."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.norm2 = self.norm1


class EncoderLayerBlogAttention(EncoderLayer):
    """A self-written attention (the blog-style MHA above) inside a correct layer."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.self_attn = MHABlogStyle(d_model, num_heads, dropout)


class DecoderLayerPreNorm(DecoderLayer):
    """GPT-2 / most modern models: normalise before each sublayer (Pre-LN)."""

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        h = self.norm1.ln(y)
        s, sw = self.self_attn(h, h, tgt_mask)
        y = y + self.dropout(s)
        c, cw = self.cross_attn(self.norm2.ln(y), memory, memory_mask)
        y = y + self.dropout(c)
        return y + self.dropout(self.ffn(self.norm3.ln(y))), (sw, cw)


class DecoderLayerCrossTargetMaskUnbiased(DecoderLayerUnbiasedNorm):
    """Two mistakes in two places: the target mask on cross-attention, and an unbiased LayerNorm."""

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(y, memory, tgt_mask)
        y = self.norm2(y, self.dropout(c))
        return self.norm3(y, self.dropout(self.ffn(y))), (sw, cw)


# ---------------------------------------------------------------- Transformer

def _transformer(encoder=EncoderLayer, decoder=DecoderLayer, clones=True):
    """A Transformer whose layers are ``encoder``/``decoder``; ``clones=False``: ``[layer] * N``."""
    class Model(Transformer):
        def __init__(self, src_vocab, tgt_vocab, d_model=256, num_heads=8, d_ff=512, num_layers=4,
                     dropout=0.1, max_len=512, pad_id=0):
            super().__init__(src_vocab, tgt_vocab, d_model, num_heads, d_ff, num_layers, dropout, max_len, pad_id)
            args = (d_model, num_heads, d_ff, dropout)
            if clones:
                self.encoder_layers = nn.ModuleList(encoder(*args) for _ in range(num_layers))
                self.decoder_layers = nn.ModuleList(decoder(*args) for _ in range(num_layers))
            else:
                self.encoder_layers = nn.ModuleList([encoder(*args)] * num_layers)
                self.decoder_layers = nn.ModuleList([decoder(*args)] * num_layers)
    return Model


TransformerListTimesN = _named(_transformer(clones=False), "TransformerListTimesN")
TransformerAnnotatedLayers = _named(_transformer(AnnotatedEncoderLayer, AnnotatedDecoderLayer),
                                    "TransformerAnnotatedLayers")


class TransformerPadMaskSquare(Transformer):
    """A (B, 1, T, T) padding mask, "both the query and the key must be real": hides query rows."""

    def _pad_mask(self, tokens):
        keep = tokens != self.pad_id  # (B, T)
        return (keep.unsqueeze(1) & keep.unsqueeze(2)).unsqueeze(1)  # (B, 1, T, T)

    def encode(self, src):
        x = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x, _ = layer(x, self._pad_mask(src))
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = self._pad_mask(tgt_in) & torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerTriuMask(Transformer):
    """PyTorch's causal convention (``triu``, True = blocked) used where True means "may attend"."""

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        mask = (tgt_in != self.pad_id)[:, None, None, :] & causal
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerCausalOnlyMask(Transformer):
    """PyTorch's tutorial: the decoder self-attention gets the causal mask only, no target padding."""

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]  # (1, 1, T, T)
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerTargetWithoutPositions(Transformer):
    """Positions added on the source side only."""

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = (tgt_in != self.pad_id)[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.tgt_embed(tgt_in) * math.sqrt(self.d_model)
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerEmbeddingTimesDModel(Transformer):
    """Embeddings multiplied by d_model, not its square root."""

    def encode(self, src):
        x = self.pos_enc(self.src_embed(src) * self.d_model)
        for layer in self.encoder_layers:
            x, _ = layer(x, (src != self.pad_id)[:, None, None, :])
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = (tgt_in != self.pad_id)[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.pos_enc(self.tgt_embed(tgt_in) * self.d_model)
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerTiedOutput(Transformer):
    """Press & Wolf weight tying (as in the paper's section 3.4): output projection = target embedding."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.out_proj.weight = self.tgt_embed.weight


class TransformerBertStyle(_transformer(EncoderLayerBertEps, DecoderLayerBertEps)):
    """Unscaled embeddings (as BERT and many tutorials) and BERT's eps=1e-12 in every LayerNorm."""

    def encode(self, src):
        x = self.pos_enc(self.src_embed(src))
        for layer in self.encoder_layers:
            x, _ = layer(x, (src != self.pad_id)[:, None, None, :])
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = (tgt_in != self.pad_id)[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.pos_enc(self.tgt_embed(tgt_in))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


LN_ANNOTATED = {"ln_unbiased_var", "ln_eps_outside_sqrt", "ln_eps_value"}  # std, eps outside, eps=1e-6

CASES = [
    ("softmax", softmax_textbook, {"softmax_unstable", "softmax_ignores_axis"}, None),
    ("scaled_dot_product_attention", sdpa_int_mask_unscaled, {"no_scale", "mask_not_bool"}, None),
    ("scaled_dot_product_attention", sdpa_d2l_masked_softmax, {"fully_masked_uniform"}, None),
    ("scaled_dot_product_attention", sdpa_annotated_unscaled, {"no_scale", "fully_masked_uniform"}, None),
    ("MultiHeadAttention", MHABlogStyle, {"scale_by_d_model", "fully_masked_uniform"}, None),
    ("MultiHeadAttention", MHAEinsum, {"nan_fully_masked"}, None),
    ("MultiHeadAttention", MHAAnnotatedMaskUnsqueeze, {"mask_shape"}, None),
    ("MultiHeadAttention", MHAAveragedWeights, {"attn_averaged_over_heads"}, None),
    ("PositionalEncoding", PositionalEncodingPyTorchTutorial, {"pe_sliced_by_batch"}, None),
    ("FeedForward", FFNAlwaysTanhGelu, {"ffn_wrong_activation", "ffn_gelu_tanh"}, None),
    ("FeedForward", FFNGPT2Gelu, {"ffn_gelu_tanh"}, None),
    ("LayerNorm", AnnotatedLayerNorm, {"ln_unbiased_var", "ln_eps_outside_sqrt"}, None),
    ("LayerNorm", BertLayerNorm, {"ln_eps_value"}, None),
    ("LayerNorm", LayerNormNoAffineVar, {"ln_unbiased_var", "ln_no_affine"}, None),
    ("ResidualLayerNorm", AnnotatedResidual, {"ln_unbiased_var", "ln_eps_outside_sqrt"}, "ln"),
    ("EncoderLayer", AnnotatedEncoderLayer, LN_ANNOTATED | {"pre_ln_instead_of_post"}, "norm1.ln"),
    ("EncoderLayer", EncoderLayerBertEps, {"ln_eps_value"}, "norm1.ln"),
    ("EncoderLayer", EncoderLayerUnbiasedNorm, {"ln_unbiased_var"}, "norm2.ln"),
    ("EncoderLayer", EncoderLayerOneNorm, {"shared_norm"}, None),
    ("EncoderLayer", EncoderLayerAliasedNorm, {"shared_norm"}, "norm1, norm2"),
    ("EncoderLayer", EncoderLayerBlogAttention, {"scale_by_d_model"}, "self_attn"),
    ("EncoderLayer", EncoderLayerTorchVar, {"ln_unbiased_var", "ln_eps_value"}, "norm1.ln"),
    ("EncoderLayer", EncoderLayerMaskForgotten, {"src_mask_missing"}, None),
    ("EncoderLayer", EncoderLayerSkipFromInput, {"residual_wrong_source"}, None),
    ("EncoderLayer", EncoderLayerNormsSwapped, {"norms_swapped"}, None),
    ("DecoderLayer", AnnotatedDecoderLayer, LN_ANNOTATED | {"pre_ln_instead_of_post"}, "norm3.ln"),
    ("DecoderLayer", DecoderLayerPreNorm, {"pre_ln_instead_of_post"}, None),
    ("DecoderLayer", DecoderLayerNoFFNResidual, {"missing_residual"}, None),
    ("DecoderLayer", DecoderLayerQueriesFromMemory, {"cross_attn_wrong_source"}, None),
    ("DecoderLayer", DecoderLayerBertEps, {"ln_eps_value"}, "norm2.ln"),
    ("DecoderLayer", DecoderLayerCrossTargetMaskUnbiased, {"cross_attn_target_mask", "ln_unbiased_var"}, "norm1.ln"),
    ("Transformer", TransformerListTimesN, {"layers_shared"}, "encoder_layers.0, encoder_layers.1"),
    ("Transformer", TransformerAnnotatedLayers, LN_ANNOTATED | {"pre_ln_instead_of_post"}, "decoder_layers.1"),
    ("Transformer", TransformerPadMaskSquare, {"pad_mask_queries"}, None),
    ("Transformer", TransformerTriuMask, {"causal_inverted"}, None),
    ("Transformer", TransformerCausalOnlyMask, {"tgt_pad_missing"}, None),
    ("Transformer", TransformerTargetWithoutPositions, {"positions_missing"}, None),
    ("Transformer", TransformerEmbeddingTimesDModel, {"embed_scaled_by_d_model"}, None),
    ("Transformer", TransformerTiedOutput, {"weights_tied"}, "tgt_embed.weight, out_proj.weight"),
    ("Transformer", TransformerBertStyle, {"embed_not_scaled", "ln_eps_value"}, "encoder_layers.0.norm1.ln"),
]
