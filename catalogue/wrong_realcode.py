"""Wrong implementations of the mistakes real public code makes (issue 25): each a classic mistake
the checks now name, and the recomputations a KV-cache exercise must refuse even when the tokens are
right (the cost is measured on the provided model)."""
import math

import numpy as np
import torch
import torch.nn as nn

from .reference import load
from .wrong_llm import _GQA

R = load()


def softmax_sums_axis_0(x, axis=-1):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)  # bug: axis 0 whatever axis says


class GQANegInfFill(_GQA):
    """The contract's GQA with LLaMA's -inf mask and no zeroing: a fully masked row gives NaN."""

    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)
        T_past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            pos = self.positions(T_past, T)
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        scores = q @ self.expand(k).transpose(-2, -1) / math.sqrt(d_k)  # (B, H, T, T_past + T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # bug: a row with no visible key is all -inf
        out = scores.softmax(-1) @ self.expand(v)  # (B, H, T, d_k)
        return self.W_o(out.transpose(1, 2).reshape(B, T, d)), (k, v)


class GQACachesRepeatedHeads(_GQA):
    """Repeats the KV heads before caching them: the cache holds H heads, the memory GQA saves is spent."""

    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)
        T_past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            pos = self.positions(T_past, T)
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        k, v = self.expand(k), self.expand(v)  # bug: (B, H, T, d_k) from here on, cache included
        if cache is not None:
            k, v = torch.cat([self.expand(cache[0]) if cache[0].size(1) != H else cache[0], k], 2), \
                torch.cat([self.expand(cache[1]) if cache[1].size(1) != H else cache[1], v], 2)
        out, _ = R["scaled_dot_product_attention"](q, k, v, mask)
        return self.W_o(out.transpose(1, 2).reshape(B, T, d)), (k, v)


class RMSNormPlusOne(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight)  # bug: Gemma's 1 + w


def sampling_probs_no_top_p(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.softmax(R["top_k_filter"](logits / temperature, top_k), -1)  # bug: top_p ignored


def sampling_probs_no_top_k(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.softmax(R["top_p_filter"](logits / temperature, top_p), -1)  # bug: top_k ignored


def sample_without_generator(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    probs = R["sampling_probs"](logits, temperature, top_k, top_p)
    torch.multinomial(probs, 1, generator=generator)  # a draw thrown away ...
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # bug: ... so the second one is used


def sample_no_top_p(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(R["top_k_filter"](logits / temperature, top_k), -1)  # bug: top_p ignored
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class FFNInferenceMode(nn.Module):
    """A right FFN whose forward runs under torch.inference_mode: no autograd graph."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.ffn = None
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout, self.activation = nn.Dropout(dropout), activation

    @torch.inference_mode()  # bug: the output carries no graph
    def forward(self, x):
        h = self.fc1(x)
        h = torch.relu(h) if self.activation == "relu" else torch.nn.functional.gelu(h)
        return self.fc2(self.dropout(h))


@torch.no_grad()
def generate_recomputes(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                        use_cache=True):
    for _ in range(max_new_tokens):
        logits = model(idx)  # bug: the whole prefix again at every step, use_cache or not
        nxt = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx


def generate_new_tokens_only(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                             use_cache=True):
    T0 = idx.size(1)
    out = R["generate"](model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache)
    return out[:, T0:]  # bug: the prompt dropped


def greedy_cached_calls_plain(model, src, bos_id, eos_id, max_new_tokens):
    return R["greedy_decode"](model, src, bos_id, eos_id, max_new_tokens)  # bug: no cache at all


def _greedy_cached(model, src, bos_id, eos_id, max_new_tokens, cross_every_step=False, preallocated=False):
    """Cached greedy decoding (the reference's algorithm), with a preallocated self-attention cache or
    with the cross-attention keys/values projected again at every step."""
    B = src.size(0)
    d_model, pad_id = model.d_model, model.pad_id
    src_mask = R["make_pad_mask"](src, pad_id)  # (B, 1, 1, T_s)
    memory = model.encode(src)  # (B, T_s, d_model)

    def split(x, heads):
        return x.view(B, x.size(1), heads, -1).transpose(1, 2)  # (B, T, d_model) -> (B, H, T, d_k)

    def merge(x):
        return x.transpose(1, 2).reshape(B, x.size(2), d_model)  # (B, H, T, d_k) -> (B, T, d_model)

    def cross_kv(layer):
        ca = layer.cross_attn
        return split(ca.W_k(memory), ca.num_heads), split(ca.W_v(memory), ca.num_heads)  # (B, H, T_s, d_k) each

    layers = list(model.decoder_layers)
    cross = None if cross_every_step else [cross_kv(layer) for layer in layers]
    H = layers[0].self_attn.num_heads
    buffers = [(torch.zeros(B, H, max_new_tokens, d_model // H), torch.zeros(B, H, max_new_tokens, d_model // H))
               for _ in layers]  # (B, H, max_new_tokens, d_k): written in place, step by step
    kept = [None] * len(layers)
    ys = torch.full((B, 1), bos_id, dtype=torch.long)
    finished = torch.zeros(B, dtype=torch.bool)
    for t in range(max_new_tokens):
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(d_model) + model.pos_enc.pe[:, t:t + 1]  # (B, 1, d_model)
        key_mask = R["make_pad_mask"](ys, pad_id)  # (B, 1, 1, t + 1)
        for i, layer in enumerate(layers):
            sa = layer.self_attn
            k_new, v_new = split(sa.W_k(x), sa.num_heads), split(sa.W_v(x), sa.num_heads)  # (B, H, 1, d_k)
            if preallocated:  # and the new token projected as a (B, d_model) matrix: (B, d_model) -> (B, H, 1, d_k)
                k_new = sa.W_k(x.reshape(B, d_model)).view(B, sa.num_heads, 1, -1)
                v_new = sa.W_v(x.reshape(B, d_model)).view(B, sa.num_heads, 1, -1)
                buffers[i][0][:, :, t:t + 1], buffers[i][1][:, :, t:t + 1] = k_new, v_new
                k, v = buffers[i][0][:, :, :t + 1], buffers[i][1][:, :, :t + 1]  # (B, H, t + 1, d_k)
            else:
                k = k_new if kept[i] is None else torch.cat([kept[i][0], k_new], 2)
                v = v_new if kept[i] is None else torch.cat([kept[i][1], v_new], 2)
                kept[i] = (k, v)
            out, _ = R["scaled_dot_product_attention"](split(sa.W_q(x), sa.num_heads), k, v, key_mask)
            x = layer.norm1(x, sa.W_o(merge(out)))
            ca = layer.cross_attn
            ck, cv = cross_kv(layer) if cross_every_step else cross[i]
            out, _ = R["scaled_dot_product_attention"](split(ca.W_q(x), ca.num_heads), ck, cv, src_mask)
            x = layer.norm2(x, ca.W_o(merge(out)))
            x = layer.norm3(x, layer.ffn(x))
        nxt = model.out_proj(x[:, -1]).argmax(-1).masked_fill(finished, pad_id)  # (B,)
        ys = torch.cat([ys, nxt[:, None]], 1)
        finished |= nxt == eos_id
        if finished.all():
            break
    return ys


def greedy_cached_cross_every_step(model, src, bos_id, eos_id, max_new_tokens):
    return _greedy_cached(model, src, bos_id, eos_id, max_new_tokens, cross_every_step=True)  # bug


def beam_raw_score(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    tokens, score = R["beam_search"](step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha)
    n = tokens.numel() - prefix.numel()
    return tokens, score * n ** alpha  # bug: the chosen beam's raw sum reported, not its normalised score


def softmax_backward_no_keepdim(y, grad_y, dim=-1):
    return y * (grad_y - (grad_y * y).sum(dim))  # bug: no keepdim=True


def layer_norm_backward_grads_swapped(x, weight, grad_out, eps=1e-5):
    gx, gw, gb = R["layer_norm_backward"](x, weight, grad_out, eps)
    return gx, gb, gw  # bug: weight and bias gradients swapped


def layer_norm_backward_sums_0_1(x, weight, grad_out, eps=1e-5):
    sigma = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    g = grad_out * weight
    gx = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / sigma
    return gx, (grad_out * x_hat).sum((0, 1)), grad_out.sum((0, 1))  # bug: llm.c's (B, T, C) axes only


CASES = [
    ("softmax", softmax_sums_axis_0, "softmax_fixed_axis"),
    ("GroupedQueryAttention", GQANegInfFill, "nan_fully_masked"),
    ("GroupedQueryAttention", GQACachesRepeatedHeads, "kv_cache_repeated_heads"),
    ("RMSNorm", RMSNormPlusOne, "rms_weight_plus_one"),
    ("sampling_probs", sampling_probs_no_top_p, "top_p_missing"),
    ("sampling_probs", sampling_probs_no_top_k, "top_k_missing"),
    ("sample_next_token", sample_without_generator, "sample_draw_not_contract"),
    ("sample_next_token", sample_no_top_p, "top_p_missing"),
    ("FeedForward", FFNInferenceMode, "no_autograd_graph"),
    ("generate", generate_recomputes, "kv_cache_recomputes"),
    ("generate", generate_new_tokens_only, "generate_new_tokens_only"),
    ("greedy_decode_cached", greedy_cached_calls_plain, "kv_cache_recomputes"),
    ("greedy_decode_cached", greedy_cached_cross_every_step, "cross_kv_recomputed"),
    ("beam_search", beam_raw_score, "beam_score_differs"),
    ("softmax_backward", softmax_backward_no_keepdim, "softmax_backward_no_keepdim"),
    ("layer_norm_backward", layer_norm_backward_grads_swapped, "ln_backward_grads_swapped"),
    ("layer_norm_backward", layer_norm_backward_sums_0_1, "ln_backward_sums_fixed_axes"),
]
