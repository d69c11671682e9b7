"""Wrong implementations of chapter 13 (efficiency by hand), one classic mistake each."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .reference import load

R = load()


# ---------------------------------------------------------------- online_softmax

def online_softmax_no_rescale(x):
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    s = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for j in range(x.shape[-1]):
        m = torch.maximum(m, x[..., j])
        s = s + torch.exp(x[..., j] - m)  # bug: the old terms are not rescaled to the new max
    return torch.exp(x - m[..., None]) / s[..., None]


def online_softmax_old_max(x):
    m, s = x[..., 0].clone(), torch.ones(x.shape[:-1], dtype=x.dtype)
    for j in range(1, x.shape[-1]):
        m_new = torch.maximum(m, x[..., j])
        s = s * torch.exp(m - m_new) + torch.exp(x[..., j] - m)  # bug: the new term against the old max
        m = m_new
    return torch.exp(x - m[..., None]) / s[..., None]


# ---------------------------------------------------------------- tiled_attention

def _tiled(q, k, v, block_size, causal, rescale_acc=True, rescale_l=True, scale=True, mask_diagonal=True):
    T_q, T_k = q.shape[-2], k.shape[-2]
    out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    for i in range(0, T_q, block_size):
        qi = q[..., i:i + block_size, :]
        m = torch.full(qi.shape[:-1], -math.inf, dtype=q.dtype)
        row_sum = torch.zeros(qi.shape[:-1], dtype=q.dtype)
        acc = torch.zeros(qi.shape[:-1] + v.shape[-1:], dtype=q.dtype)
        for j in range(0, T_k, block_size):
            if causal and j > i + qi.shape[-2] - 1:
                break
            s = qi @ k[..., j:j + block_size, :].transpose(-1, -2)
            if scale:
                s = s / math.sqrt(q.shape[-1])
            if causal and mask_diagonal:
                pos_q = torch.arange(i, i + qi.shape[-2])[:, None]
                pos_k = torch.arange(j, min(j + block_size, T_k))[None, :]
                s = s.masked_fill(pos_k > pos_q, -math.inf)
            m_new = torch.maximum(m, s.max(-1).values)
            p = torch.exp(s - m_new[..., None])
            alpha = torch.exp(m - m_new)
            row_sum = (row_sum * alpha if rescale_l else row_sum) + p.sum(-1)
            acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ v[..., j:j + block_size, :]
            m = m_new
        out[..., i:i + block_size, :] = acc / row_sum[..., None]
    return out


def tiled_attention_no_rescale(q, k, v, block_size=64, causal=False):
    return _tiled(q, k, v, block_size, causal, rescale_acc=False, rescale_l=False)  # bug


def tiled_attention_acc_not_rescaled(q, k, v, block_size=64, causal=False):
    return _tiled(q, k, v, block_size, causal, rescale_acc=False)  # bug: the row sum is rescaled, acc is not


def tiled_attention_unscaled(q, k, v, block_size=64, causal=False):
    return _tiled(q, k, v, block_size, causal, scale=False)  # bug: no 1 / sqrt(d)


def tiled_attention_diagonal_unmasked(q, k, v, block_size=64, causal=False):
    return _tiled(q, k, v, block_size, causal, mask_diagonal=False)  # bug: only whole blocks skipped


def tiled_attention_causal_ignored(q, k, v, block_size=64, causal=False):
    return _tiled(q, k, v, block_size, False)  # bug: causal never used


def tiled_attention_whole_scores(q, k, v, block_size=64, causal=False):
    """Right numbers, no tiling: the whole score matrix, then the rows of the output in blocks."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # bug: (..., T_q, T_k) at once
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -math.inf)
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.cat([w @ v for w in weights.split(block_size, dim=-2)], dim=-2)


# ---------------------------------------------------------------- TopKRouter, MoELayer

class TopKRouterSoftmaxAfterTopK(nn.Module):
    def __init__(self, d_model, num_experts, top_k=2, normalize=True):
        super().__init__()
        self.top_k, self.normalize = top_k, normalize
        self.gate = nn.Linear(d_model, num_experts, bias=False)

    def forward(self, x):
        logits = self.gate(x)
        top, indices = logits.topk(self.top_k, dim=-1)
        return torch.softmax(top, dim=-1), indices, logits  # bug: right only when normalize=True


class TopKRouterNotRenormalised(TopKRouterSoftmaxAfterTopK):
    def forward(self, x):
        logits = self.gate(x)
        weights, indices = torch.softmax(logits, dim=-1).topk(self.top_k, dim=-1)
        return weights, indices, logits  # bug: normalize ignored


class TopKRouterSoftmaxOverTokens(TopKRouterSoftmaxAfterTopK):
    def forward(self, x):
        logits = self.gate(x)
        probs = torch.softmax(logits, dim=0)  # bug: over the tokens
        weights, indices = probs.topk(self.top_k, dim=-1)
        if self.normalize:
            weights = weights / weights.sum(-1, keepdim=True)
        return weights, indices, logits


class MoELayerUnweighted(nn.Module):
    def __init__(self, d_model, d_ff, num_experts, top_k=2, normalize=True):
        super().__init__()
        self.router = R["TopKRouter"](d_model, num_experts, top_k, normalize)
        self.experts = nn.ModuleList([R["SwiGLU"](d_model, d_ff) for _ in range(num_experts)])

    def combine(self, tokens, weights, indices, e, expert):
        rows, slots = torch.where(indices == e)
        return rows, expert(tokens[rows])  # bug: the router weight is never applied

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        weights, indices, logits = self.router(tokens)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, y = self.combine(tokens, weights, indices, e, expert)
            out = out.index_add(0, rows, y)
        return out.reshape(x.shape), logits, indices


class MoELayerFirstSlotWeight(MoELayerUnweighted):
    def combine(self, tokens, weights, indices, e, expert):
        rows = torch.where(indices == e)[0]
        return rows, expert(tokens[rows]) * weights[rows, :1]  # bug: always slot 0's weight


class MoELayerSoftmaxAfterTopK(MoELayerUnweighted):
    def __init__(self, d_model, d_ff, num_experts, top_k=2, normalize=True):
        super().__init__(d_model, d_ff, num_experts, top_k, normalize)
        self.router = TopKRouterSoftmaxAfterTopK(d_model, num_experts, top_k, normalize)  # bug: in the router

    def combine(self, tokens, weights, indices, e, expert):
        rows, slots = torch.where(indices == e)
        return rows, expert(tokens[rows]) * weights[rows, slots][:, None]


class MoELayerNotRenormalised(MoELayerSoftmaxAfterTopK):
    def __init__(self, d_model, d_ff, num_experts, top_k=2, normalize=True):
        super().__init__(d_model, d_ff, num_experts, top_k, normalize)
        self.router = TopKRouterNotRenormalised(d_model, num_experts, top_k, normalize)  # bug: in the router


# ---------------------------------------------------------------- load_balancing_loss

def _aux(router_logits, expert_index, num_experts, dim=-1, f_probs=False, times_n=True, divide=True):
    probs = torch.softmax(router_logits, dim=dim)
    counts = torch.bincount(expert_index.flatten(), minlength=num_experts).float()
    f = probs.mean(0) if f_probs else counts / (router_logits.shape[0] if divide else 1)
    return (num_experts if times_n else 1) * torch.sum(f * probs.mean(0))


def aux_loss_softmax_over_tokens(router_logits, expert_index, num_experts):
    return _aux(router_logits, expert_index, num_experts, dim=0)  # bug


def aux_loss_f_from_probabilities(router_logits, expert_index, num_experts):
    return _aux(router_logits, expert_index, num_experts, f_probs=True)  # bug


def aux_loss_without_n(router_logits, expert_index, num_experts):
    return _aux(router_logits, expert_index, num_experts, times_n=False)  # bug


def aux_loss_counts(router_logits, expert_index, num_experts):
    return _aux(router_logits, expert_index, num_experts, divide=False)  # bug


def aux_loss_probs_after_topk(router_logits, expert_index, num_experts):
    top, _ = router_logits.topk(expert_index.shape[-1], dim=-1)
    probs = torch.softmax(top, dim=-1).mean(-1)  # bug: softmax over the k chosen, averaged over the slots
    routed = F.one_hot(expert_index, num_experts).float().mean(-2)  # (T, N)
    return num_experts ** 2 * (routed * probs[:, None]).mean()


# ---------------------------------------------------------------- quantize_int8

def quantize_int8_per_tensor(w):
    scale = w.abs().max() / 127  # bug: one scale for the tensor
    q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)
    return q, scale.expand(w.shape[0], 1)


def quantize_int8_per_column(w):
    scale = w.abs().amax(dim=0, keepdim=True) / 127  # bug: per input channel
    return torch.round(w / scale).clamp(-127, 127).to(torch.int8), scale


def quantize_int8_by_128(w):
    scale = w.abs().amax(dim=1, keepdim=True) / 128  # bug: 128
    return torch.round(w / scale).clamp(-128, 127).to(torch.int8), scale


def quantize_int8_truncated(w):
    scale = w.abs().amax(dim=1, keepdim=True) / 127
    return (w / scale).to(torch.int8), scale  # bug: truncation, no rounding


class MLAValuesFromKeys(nn.Module):
    def __init__(self, d_model, num_heads, d_latent):
        super().__init__()
        self.h = num_heads
        self.W_q, self.W_o = nn.Linear(d_model, d_model, bias=False), nn.Linear(d_model, d_model, bias=False)
        self.W_dkv = nn.Linear(d_model, d_latent, bias=False)
        self.W_uk, self.W_uv = nn.Linear(d_latent, d_model, bias=False), nn.Linear(d_latent, d_model, bias=False)

    def keys_values(self, c):
        return self.W_uk(c), self.W_uk(c)  # bug: the values use the keys' up-projection

    def forward(self, x, mask=None, cache=None):
        B, T, D = x.shape
        c = self.W_dkv(x) if cache is None else torch.cat([cache, self.W_dkv(x)], 1)
        k, v = self.keys_values(c)
        split = lambda t: t.view(B, t.shape[1], self.h, D // self.h).transpose(1, 2)  # noqa: E731
        out, _ = R["scaled_dot_product_attention"](split(self.W_q(x)), split(k), split(v), mask)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), c


class MLACachesKeysAndValues(MLAValuesFromKeys):
    def keys_values(self, c):
        return self.W_uk(c), self.W_uv(c)

    def forward(self, x, mask=None, cache=None):
        c = self.W_dkv(x)
        out, _ = super().forward(x, mask, None if cache is None else cache)
        return out, (self.W_uk(c), self.W_uv(c))  # bug: the up-projected K and V cached, not the latent


CASES = [
    ("online_softmax", online_softmax_no_rescale, "online_no_rescale"),
    ("online_softmax", online_softmax_old_max, "online_max_updated_after_sum"),
    ("tiled_attention", tiled_attention_no_rescale, "tiled_no_rescale"),
    ("tiled_attention", tiled_attention_acc_not_rescaled, "tiled_acc_not_rescaled"),
    ("tiled_attention", tiled_attention_unscaled, "no_scale"),
    ("tiled_attention", tiled_attention_diagonal_unmasked, "tiled_causal_diagonal_unmasked"),
    ("tiled_attention", tiled_attention_causal_ignored, "tiled_causal_ignored"),
    ("tiled_attention", tiled_attention_whole_scores, "tiled_materialises_scores"),
    ("TopKRouter", TopKRouterSoftmaxAfterTopK, "router_softmax_after_topk"),
    ("TopKRouter", TopKRouterNotRenormalised, "router_not_renormalised"),
    ("TopKRouter", TopKRouterSoftmaxOverTokens, "router_softmax_wrong_axis"),
    ("MoELayer", MoELayerUnweighted, "moe_weights_not_applied"),
    ("MoELayer", MoELayerFirstSlotWeight, "moe_weight_wrong_slot"),
    ("MoELayer", MoELayerSoftmaxAfterTopK, "router_softmax_after_topk"),
    ("MoELayer", MoELayerNotRenormalised, "router_not_renormalised"),
    ("load_balancing_loss", aux_loss_softmax_over_tokens, "aux_softmax_wrong_axis"),
    ("load_balancing_loss", aux_loss_f_from_probabilities, "aux_f_from_probs"),
    ("load_balancing_loss", aux_loss_without_n, "aux_no_num_experts"),
    ("load_balancing_loss", aux_loss_counts, "aux_counts_not_fraction"),
    ("load_balancing_loss", aux_loss_probs_after_topk, "aux_probs_after_topk"),
    ("quantize_int8", quantize_int8_per_tensor, "int8_per_tensor_scale"),
    ("quantize_int8", quantize_int8_per_column, "int8_scale_per_input_channel"),
    ("quantize_int8", quantize_int8_by_128, "int8_divides_by_128"),
    ("quantize_int8", quantize_int8_truncated, "int8_no_round"),
    ("MultiHeadLatentAttention", MLAValuesFromKeys, "mla_values_from_key_projection"),
    ("MultiHeadLatentAttention", MLACachesKeysAndValues, "mla_caches_keys_and_values"),
]
