"""Wrong masks, encoder/decoder layers, Transformer, greedy decoding and its KV cache (earlier chapters provided)."""
import math

import torch
import torch.nn as nn

from .reference import load

R = load()
MultiHeadAttention, FeedForward, ResidualLayerNorm = R["MultiHeadAttention"], R["FeedForward"], R["ResidualLayerNorm"]
Transformer = R["Transformer"]


def pad_mask_queries_too(tokens, pad_id=0):
    keep = tokens != pad_id
    return keep[:, None, :, None] & keep[:, None, None, :]  # bug: (B, 1, T, T), hides query rows


def pad_mask_true_is_pad(tokens, pad_id=0):
    return (tokens == pad_id).unsqueeze(1).unsqueeze(2)


def causal_hides_diagonal(T, device=None):
    return torch.tril(torch.ones(T, T, device=device), diagonal=-1).bool()[None, None]


def causal_shows_next(T, device=None):
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1).unsqueeze(0).unsqueeze(0)


def causal_true_is_future(T, device=None):
    return torch.triu(torch.ones(1, 1, T, T, dtype=torch.bool, device=device), diagonal=1)


class _Enc(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = ResidualLayerNorm(d_model), ResidualLayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)


class EncoderNoResidual(_Enc):
    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x, src_mask)
        x = self.norm1.ln(self.dropout(a))  # bug: no residual
        return self.norm2(x, self.dropout(self.ffn(x))), attn


class EncoderIgnoresMask(_Enc):
    def forward(self, x, src_mask=None):
        a, attn = self.self_attn(x, x)  # bug: the padding mask is not passed on
        x = self.norm1(x, self.dropout(a))
        return self.norm2(x, self.dropout(self.ffn(x))), attn


class EncoderPreLN(_Enc):
    def forward(self, x, src_mask=None):
        h = self.norm1.ln(x)
        a, attn = self.self_attn(h, h, src_mask)
        x = x + self.dropout(a)
        return x + self.dropout(self.ffn(self.norm2.ln(x))), attn


class _Dec(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (ResidualLayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)


class DecoderCrossUsesTargetMask(_Dec):
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(y, memory, tgt_mask)  # bug: the target mask
        y = self.norm2(y, self.dropout(c))
        return self.norm3(y, self.dropout(self.ffn(y))), (sw, cw)


class DecoderNoCrossResidual(_Dec):
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        s, sw = self.self_attn(y, y, tgt_mask)
        y = self.norm1(y, self.dropout(s))
        c, cw = self.cross_attn(y, memory, memory_mask)
        y = self.norm2.ln(self.dropout(c))  # bug: no residual around cross-attention
        return self.norm3(y, self.dropout(self.ffn(y))), (sw, cw)


class TransformerUnscaledEmbeddings(Transformer):
    def encode(self, src):
        x = self.pos_enc(self.src_embed(src))  # bug: no * sqrt(d_model)
        mask = (src != self.pad_id)[:, None, None, :]
        for layer in self.encoder_layers:
            x, _ = layer(x, mask)
        return x

    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        mask = (tgt_in != self.pad_id)[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))
        y = self.pos_enc(self.tgt_embed(tgt_in))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerCausalOffByOne(Transformer):
    def decode(self, tgt_in, memory, src_mask=None):
        T = tgt_in.size(1)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # bug: next token visible
        mask = (tgt_in != self.pad_id)[:, None, None, :] & causal
        y = self.pos_enc(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder_layers:
            y, _ = layer(y, memory, mask, src_mask)
        return y


class TransformerNoMemoryMask(Transformer):
    def forward(self, src, tgt_in):
        return self.out_proj(self.decode(tgt_in, self.encode(src)))  # bug: src_mask not passed


@torch.no_grad()
def greedy_never_stops(model, src, bos_id, eos_id, max_new_tokens):
    memory = model.encode(src)
    src_mask = (src != model.pad_id)[:, None, None, :]
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    for _ in range(max_new_tokens):  # bug: never stops early, never pads
        nxt = model.out_proj(model.decode(ys, memory, src_mask)[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
    return ys


@torch.no_grad()
def greedy_without_padding(model, src, bos_id, eos_id, max_new_tokens):
    memory = model.encode(src)
    src_mask = (src != model.pad_id)[:, None, None, :]
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    for _ in range(max_new_tokens):
        nxt = model.out_proj(model.decode(ys, memory, src_mask)[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        if (ys == eos_id).any(dim=1).all():
            break
    return ys


@torch.no_grad()
def _cached_greedy(model, src, bos_id, eos_id, max_new_tokens, from_zero=False, pad=True, cross_mask=True):
    """KV-cache greedy decoding, learner style, with a switch for each bug the wrappers below make."""
    B, sdpa = src.size(0), R["scaled_dot_product_attention"]
    src_mask = (src != model.pad_id)[:, None, None, :]  # (B, 1, 1, T_s)
    memory = model.encode(src)

    def heads(x, mha):
        return x.view(B, -1, mha.num_heads, model.d_model // mha.num_heads).transpose(1, 2)  # (B, H, T, d_k)

    def merge(x):
        return x.transpose(1, 2).reshape(B, -1, model.d_model)  # (B, T, d_model)

    cross = [(heads(layer.cross_attn.W_k(memory), layer.cross_attn),
              heads(layer.cross_attn.W_v(memory), layer.cross_attn)) for layer in model.decoder_layers]
    keys, values = [[] for _ in model.decoder_layers], [[] for _ in model.decoder_layers]
    ys = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max_new_tokens):
        pos = 0 if from_zero else t  # bug when from_zero: the cache forgets where the token is
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + model.pos_enc.pe[:, pos : pos + 1]
        key_mask = (ys != model.pad_id)[:, None, None, :]  # (B, 1, 1, t + 1)
        for i, layer in enumerate(model.decoder_layers):
            sa, ca = layer.self_attn, layer.cross_attn
            keys[i].append(heads(sa.W_k(x), sa))
            values[i].append(heads(sa.W_v(x), sa))
            out, _ = sdpa(heads(sa.W_q(x), sa), torch.cat(keys[i], 2), torch.cat(values[i], 2), key_mask)
            x = layer.norm1(x, sa.W_o(merge(out)))
            out, _ = sdpa(heads(ca.W_q(x), ca), *cross[i], src_mask if cross_mask else None)
            x = layer.norm2(x, ca.W_o(merge(out)))
            x = layer.norm3(x, layer.ffn(x))
        nxt = model.out_proj(x[:, -1]).argmax(-1)
        if pad:
            nxt = nxt.masked_fill(done, model.pad_id)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys


def cached_positions_from_zero(model, src, bos_id, eos_id, max_new_tokens):
    return _cached_greedy(model, src, bos_id, eos_id, max_new_tokens, from_zero=True)


def cached_finished_rows_not_padded(model, src, bos_id, eos_id, max_new_tokens):
    return _cached_greedy(model, src, bos_id, eos_id, max_new_tokens, pad=False)


def cached_cross_attention_unmasked(model, src, bos_id, eos_id, max_new_tokens):
    return _cached_greedy(model, src, bos_id, eos_id, max_new_tokens, cross_mask=False)


CASES = [
    ("make_pad_mask", pad_mask_queries_too, "pad_mask_queries"),
    ("make_pad_mask", pad_mask_true_is_pad, "pad_mask_inverted"),
    ("make_subsequent_mask", causal_hides_diagonal, "causal_diagonal_hidden"),
    ("make_subsequent_mask", causal_shows_next, "causal_next_visible"),
    ("make_subsequent_mask", causal_true_is_future, "causal_inverted"),
    ("EncoderLayer", EncoderNoResidual, "missing_residual"),
    ("EncoderLayer", EncoderPreLN, "pre_ln_instead_of_post"),
    ("EncoderLayer", EncoderIgnoresMask, "src_mask_missing"),
    ("DecoderLayer", DecoderCrossUsesTargetMask, "cross_attn_target_mask"),
    ("DecoderLayer", DecoderNoCrossResidual, "missing_residual"),
    ("Transformer", TransformerUnscaledEmbeddings, "embed_not_scaled"),
    ("Transformer", TransformerCausalOffByOne, "causal_next_visible"),
    ("Transformer", TransformerNoMemoryMask, "memory_mask_missing"),
    ("greedy_decode", greedy_never_stops, "greedy_no_eos_stop"),
    ("greedy_decode", greedy_without_padding, "greedy_no_pad_after_eos"),
    ("greedy_decode_cached", cached_positions_from_zero, "kv_cache_pe_position_zero"),
    ("greedy_decode_cached", cached_finished_rows_not_padded, "greedy_no_pad_after_eos"),
    ("greedy_decode_cached", cached_cross_attention_unmasked, "memory_mask_missing"),
]
