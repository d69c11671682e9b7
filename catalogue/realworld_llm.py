"""Real public implementations of the LLM components (issue 25), held out before the messages were
tuned: each is the published code of a well-known repository, adapted only as far as the contract's
signature needs (names of arguments and attributes, the bool mask turned into the source's own
additive mask, the contract's cache layout ``(B, G, T, d_k)``, float32 casts dropped since the
checks run in float64). Every adaptation is said in the docstring; the logic is the source's.

Held out, before tuning (commit 1 of issue 25): the verdict and the diagnosis each one should get
were decided from the source, then the checks of that commit were run once.

Each line: source -> check; decided (from the source); before tuning (✓ = verdict and message as decided).

 1 meta-llama/llama Attention -> GroupedQueryAttention; fail, nan_fully_masked;
   before: fail, NaN shown, nothing named ✗
 2 transformers LlamaAttention (eager) -> GroupedQueryAttention; fail, rope_half_split + fully_masked_uniform;
   before: fail, rope_half_split only ✗
 3 mistral-src one_file_ref Attention -> GroupedQueryAttention; fail, nan_fully_masked;
   before: fail, NaN shown, nothing named ✗
 4 rasbt/LLMs-from-scratch GroupedQueryAttention -> GroupedQueryAttention; fail, rope_half_split + nan_fully_masked;
   before: fail, rope_half_split only ✗
 5 transformers repeat_kv -> repeat_kv; pass; before: pass ✓
 6 meta-llama/llama RMSNorm -> RMSNorm; pass; before: pass ✓
 7 Gemma RMSNorm (transformers GemmaRMSNorm) -> RMSNorm; fail, scaled by 1 + weight; before: max error only ✗
 8 transformers TopKLogitsWarper -> top_k_filter; pass; before: pass ✓
 9 transformers TopPLogitsWarper -> top_p_filter; pass; before: pass ✓
10 transformers warpers in generate()'s order -> sampling_probs; pass; before: pass ✓
11 gpt-fast logits_to_probs -> sampling_probs; fail, top-p missing; before: "filters in the wrong order" ✗
12 gpt-fast sample (exponential race) -> sample_next_token; fail, the sampling contract; before: "4 elements differ" ✗
13 minGPT generate -> generate; fail, recomputes the prefix with use_cache, draws without the generator;
   before: fail on the sampled cases only, "11 elements differ", nothing about cost ✗
14 happy-llm generate -> generate; fail, returns the new tokens only (shape), recomputes;
   before: wrong shape (2, 6), nothing about cost ✗
15 rasbt generate_text_simple_cached -> generate; pass (an honest cache); before: pass ✓
16 annotated-transformer greedy_decode -> greedy_decode_cached; fail, recomputes, no EOS stop, no padding;
   before: no EOS stop/padding named, nothing about cost ✗
17 llm.c doc/layernorm backward -> layer_norm_backward; fail, dw and db summed over axes (0, 1);
   before: wrong shape (), nothing named ✗
18 deep-learning-from-scratch-3 (DeZero) Softmax.backward -> softmax_backward; pass; before: pass ✓
19 the Udacity / Stack Overflow NumPy softmax -> softmax; fail, sums over axis 0; before: max error only ✗

Held-out rate before tuning: 7/19 got the verdict and the message decided (every verdict was right,
19/19; none of the 12 failures named what was decided). After tuning: 19/19; ``CASES`` (each failing
one names exactly its ids, tests/test_checks.py) and ``RIGHT`` (each passes) hold it.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .reference import load

R = load()


def _additive(mask, fill):
    """The contract's bool mask (True = may attend) as the source's additive mask."""
    return None if mask is None else torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask.bool(), fill)


# ---------------------------------------------------------------- attention (GQA)

def _meta_precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128


def _meta_apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])  # reshape_for_broadcast
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _meta_repeat_kv(x, n_rep):
    """torch.repeat_interleave(x, dim=2, repeats=n_rep) on (bs, slen, n_kv_heads, head_dim)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class LlamaMetaAttention(nn.Module):
    """meta-llama/llama ``model.py`` Attention. Adapted: ``wq``... renamed ``W_q``..., the cache passed
    in and returned as ``(B, G, T, d_k)`` instead of the preallocated ``cache_k[:bsz, start_pos:]``
    buffers, ``start_pos`` = the cache length, the bool mask turned into llama's additive ``-inf``."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.n_local_heads, self.n_local_kv_heads = num_heads, num_kv_heads
        self.n_rep = num_heads // num_kv_heads
        self.head_dim = d_model // num_heads
        self.rope, self.theta = rope, rope_base
        self.W_q = nn.Linear(d_model, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        bsz, seqlen, _ = x.shape
        start_pos = 0 if cache is None else cache[0].size(2)
        xq, xk, xv = self.W_q(x), self.W_k(x), self.W_v(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        if self.rope:
            freqs_cis = _meta_precompute_freqs_cis(self.head_dim, start_pos + seqlen, self.theta)[start_pos:]
            xq, xk = _meta_apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        keys, values = xk.transpose(1, 2), xv.transpose(1, 2)  # (B, G, T, d_k), the contract's cache
        if cache is not None:
            keys, values = torch.cat([cache[0], keys], 2), torch.cat([cache[1], values], 2)
        new_cache = (keys, values)
        keys = _meta_repeat_kv(keys.transpose(1, 2), self.n_rep)  # (bs, cache_len + seqlen, n_local_heads, head_dim)
        values = _meta_repeat_kv(values.transpose(1, 2), self.n_rep)
        xq = xq.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + _additive(mask, float("-inf"))  # (bs, n_local_heads, seqlen, cache_len + seqlen)
        scores = F.softmax(scores, dim=-1).type_as(xq)
        output = torch.matmul(scores, values)  # (bs, n_local_heads, seqlen, head_dim)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), new_cache


def _hf_rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _hf_repeat_kv(hidden_states, n_rep):
    """transformers' repeat_kv: (batch, num_key_value_heads, seqlen, head_dim) -> (batch, num_attention_heads, ...)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def hf_repeat_kv(x, n_rep):
    """huggingface/transformers ``repeat_kv``, unchanged."""
    return _hf_repeat_kv(x, n_rep)


class HFLlamaAttention(nn.Module):
    """huggingface/transformers ``LlamaAttention`` with ``eager_attention_forward`` and
    ``LlamaRotaryEmbedding``. Adapted: ``q_proj``... renamed ``W_q``..., ``DynamicCache`` replaced by the
    contract's ``(k, v)``, the bool mask turned into the additive ``finfo.min`` mask transformers builds."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.head_dim = d_model // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.rope = rope
        self.inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64).double()
                                             / self.head_dim))
        self.W_q = nn.Linear(d_model, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.W_q(x).view(hidden_shape).transpose(1, 2)
        key_states = self.W_k(x).view(hidden_shape).transpose(1, 2)
        value_states = self.W_v(x).view(hidden_shape).transpose(1, 2)
        past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            position_ids = torch.arange(past, past + x.size(1))[None]
            freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].double()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # unsqueeze_dim=1
            query_states = (query_states * cos) + (_hf_rotate_half(query_states) * sin)
            key_states = (key_states * cos) + (_hf_rotate_half(key_states) * sin)
        if cache is not None:
            key_states = torch.cat([cache[0], key_states], dim=-2)
            value_states = torch.cat([cache[1], value_states], dim=-2)
        key_rep = _hf_repeat_kv(key_states, self.num_key_value_groups)
        value_rep = _hf_repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_rep.transpose(2, 3)) * self.scaling
        if mask is not None:
            attn_weights = attn_weights + _additive(mask, torch.finfo(torch.float64).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_rep).transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.W_o(attn_output), (key_states, value_states)


class MistralOneFileAttention(nn.Module):
    """mistralai/mistral-src ``one_file_ref.py`` Attention. Adapted: ``wq``... renamed ``W_q``..., the
    rotating cache replaced by the contract's ``(k, v)``, the mask built the source's way,
    ``torch.log`` of the 0/1 mask (log 0 = -inf)."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.n_heads, self.n_kv_heads = num_heads, num_kv_heads
        self.repeats = num_heads // num_kv_heads
        self.head_dim = d_model // num_heads
        self.scale = self.head_dim ** -0.5
        self.rope, self.theta = rope, rope_base
        self.W_q = nn.Linear(d_model, num_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        bsz, seqlen, _ = x.shape
        start = 0 if cache is None else cache[0].size(2)
        xq, xk, xv = self.W_q(x), self.W_k(x), self.W_v(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        if self.rope:
            freqs_cis = _meta_precompute_freqs_cis(self.head_dim, start + seqlen, self.theta)[start:]
            xq, xk = _meta_apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        key, val = xk, xv
        if cache is not None:
            key = torch.cat([cache[0].transpose(1, 2), xk], dim=1)
            val = torch.cat([cache[1].transpose(1, 2), xv], dim=1)
        new_cache = (key.transpose(1, 2), val.transpose(1, 2))
        key = torch.repeat_interleave(key, repeats=self.repeats, dim=2)
        val = torch.repeat_interleave(val, repeats=self.repeats, dim=2)
        xq, key, val = xq.transpose(1, 2), key.transpose(1, 2), val.transpose(1, 2)
        scores = torch.matmul(xq, key.transpose(2, 3)) * self.scale
        if mask is not None:
            scores += torch.log(mask.double())
        scores = F.softmax(scores, dim=-1).type_as(xq)
        output = torch.matmul(scores, val)  # (bs, n_local_heads, slen, head_dim)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.W_o(output), new_cache


def _rasbt_rope_params(head_dim, theta_base, context_length):
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2, dtype=torch.float64)[: (head_dim // 2)] / head_dim))
    positions = torch.arange(context_length, dtype=torch.float64)
    angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0)
    angles = torch.cat([angles, angles], dim=1)
    return torch.cos(angles), torch.sin(angles)


def _rasbt_apply_rope(x, cos, sin, offset=0):
    batch_size, num_heads, seq_len, head_dim = x.shape
    x1 = x[..., : head_dim // 2]
    x2 = x[..., head_dim // 2:]
    cos = cos[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    sin = sin[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    rotated = torch.cat((-x2, x1), dim=-1)
    x_rotated = (x * cos) + (rotated * sin)
    return x_rotated.to(dtype=x.dtype)


class RasbtGroupedQueryAttention(nn.Module):
    """rasbt/LLMs-from-scratch ``GroupedQueryAttention`` (the KV-cache version). Adapted: ``W_query``...
    renamed ``W_q``..., cos/sin computed inside, ``start_pos`` = the cache length, and the mask's
    meaning flipped (the source's mask is True = blocked: ``masked_fill(~mask, -torch.inf)``)."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.num_heads, self.num_kv_groups = num_heads, num_kv_heads
        self.group_size = num_heads // num_kv_heads
        self.head_dim = d_model // num_heads
        self.d_out = d_model
        self.rope, self.rope_base = rope, rope_base
        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        b, num_tokens, _ = x.shape
        start_pos = 0 if cache is None else cache[0].size(2)
        queries = self.W_q(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys_new = self.W_k(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values_new = self.W_v(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        if self.rope:
            cos, sin = _rasbt_rope_params(self.head_dim, self.rope_base, start_pos + num_tokens)
            queries = _rasbt_apply_rope(queries, cos, sin, offset=start_pos)
            keys_new = _rasbt_apply_rope(keys_new, cos, sin, offset=start_pos)
        if cache is not None:
            prev_k, prev_v = cache
            keys, values = torch.cat([prev_k, keys_new], dim=2), torch.cat([prev_v, values_new], dim=2)
        else:
            keys, values = keys_new, values_new
        next_cache = (keys, values)
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        if mask is not None:
            attn_scores = attn_scores.masked_fill(~mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        context = (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.W_o(context), next_cache


# ---------------------------------------------------------------- RMSNorm

class LlamaMetaRMSNorm(nn.Module):
    """meta-llama/llama ``RMSNorm`` (the float32 cast dropped)."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x)
        return output * self.weight


class GemmaRMSNorm(nn.Module):
    """google-deepmind/gemma (and transformers' GemmaRMSNorm): weight initialised at 0, scaled by 1 + weight."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float() if x.dtype != torch.float64 else x)
        output = output * (1.0 + self.weight)
        return output.type_as(x)


# ---------------------------------------------------------------- filters and samplers

def hf_top_k_filter(logits, k):
    """transformers ``TopKLogitsWarper.__call__`` (min_tokens_to_keep=1, filter_value=-inf)."""
    top_k = min(max(k, 1), logits.size(-1))  # Safety check
    indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
    return logits.masked_fill(indices_to_remove, -float("Inf"))


def hf_top_p_filter(logits, p):
    """transformers ``TopPLogitsWarper.__call__`` (min_tokens_to_keep=1, filter_value=-inf)."""
    sorted_logits, sorted_indices = torch.sort(logits, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    # Remove tokens with cumulative top_p above the threshold (token with 0 are kept)
    sorted_indices_to_remove = cumulative_probs <= (1 - p)
    sorted_indices_to_remove[..., -1:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, -float("Inf"))


def hf_sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """transformers' sampling: TemperatureLogitsWarper, TopK, TopP (generate()'s order), then softmax."""
    scores = logits / temperature
    if top_k is not None:
        scores = hf_top_k_filter(scores, top_k)
    if top_p is not None and top_p < 1.0:
        scores = hf_top_p_filter(scores, top_p)
    return nn.functional.softmax(scores, dim=-1)


def gpt_fast_logits_to_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """pytorch-labs/gpt-fast ``logits_to_probs`` (it has no top-p; ``top_p`` added to the signature only)."""
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    return torch.nn.functional.softmax(logits, dim=-1)


def gpt_fast_sample(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """pytorch-labs/gpt-fast ``sample``: ``multinomial_sample_one_no_sync``, the exponential-race trick.
    Adapted: the contract's sampling_probs (so that only the draw differs), tokens returned as long (B,)."""
    probs = R["sampling_probs"](logits, max(temperature, 1e-5), top_k, top_p)
    q = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / q, dim=-1, keepdim=True).to(dtype=torch.long).squeeze(-1)


# ---------------------------------------------------------------- generation

@torch.no_grad()
def mingpt_generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                    use_cache=True):
    """karpathy/minGPT ``GPT.generate``. Adapted: a function of the model, ``do_sample = temperature > 0``
    (and temperature 1 when greedy), the block-size crop left out (the check's sequences fit)."""
    do_sample = temperature > 0
    temperature = temperature if do_sample else 1.0
    for _ in range(max_new_tokens):
        logits = model(idx)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        if do_sample:
            idx_next = torch.multinomial(probs, num_samples=1)
        else:
            _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


@torch.inference_mode()
def happy_llm_generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                       use_cache=True):
    """datawhalechina/happy-llm ``Transformer.generate``. Adapted: a function of the model (``model(idx)``
    gives the logits), ``stop_id=None``, the max_seq_len crop left out."""
    index = idx.shape[1]
    for _ in range(max_new_tokens):
        logits = model(idx)
        logits = logits[:, -1, :]
        if temperature == 0.0:
            _, idx_next = torch.topk(logits, k=1, dim=-1)
        else:
            logits = logits / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx[:, index:]


@torch.no_grad()
def rasbt_generate_cached(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                          use_cache=True):
    """rasbt/LLMs-from-scratch ``generate_text_simple_cached``. Adapted: ``model(x, use_cache=True)`` is
    ``model.forward_cached(x, caches)``, the arg-max replaced by the contract's sampler."""
    if use_cache:
        logits, caches = model.forward_cached(idx)
        for _ in range(max_new_tokens):
            next_idx = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)[:, None]
            idx = torch.cat([idx, next_idx], dim=1)
            logits, caches = model.forward_cached(next_idx, caches)
    else:
        for _ in range(max_new_tokens):
            logits = model(idx)
            next_idx = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)[:, None]
            idx = torch.cat([idx, next_idx], dim=1)
    return idx


def annotated_greedy_decode(model, src, bos_id, eos_id, max_new_tokens):
    """harvardnlp/annotated-transformer ``greedy_decode`` offered as the cached decoder. Adapted: the
    contract's ``encode``/``decode``/``out_proj`` and masks, ``max_len - 1`` = ``max_new_tokens``, the
    batch kept (``next_word`` a (B,) tensor instead of ``next_word.data[0]``)."""
    src_mask = R["make_pad_mask"](src, model.pad_id)
    memory = model.encode(src)
    ys = torch.zeros(src.size(0), 1).fill_(bos_id).type_as(src.data)
    for _ in range(max_new_tokens):
        out = model.decode(ys, memory, src_mask)
        prob = model.out_proj(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, next_word[:, None].type_as(src.data)], dim=1)
    return ys


# ---------------------------------------------------------------- backward passes and NumPy softmax

def llm_c_layer_norm_backward(x, weight, grad_out, eps=1e-5):
    """karpathy/llm.c ``doc/layernorm/layernorm.py`` ``LayerNorm.backward``. Adapted: mean and rstd
    computed from ``x`` (the source's forward cache), ``dout`` = ``grad_out``."""
    mean = x.sum(-1, keepdim=True) / x.size(-1)
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / x.size(-1)
    rstd = (var + eps) ** -0.5
    dout, w = grad_out, weight
    norm = (x - mean) * rstd
    db = dout.sum((0, 1))
    dw = (dout * norm).sum((0, 1))
    dnorm = dout * w
    dx = dnorm - dnorm.mean(-1, keepdim=True) - norm * (dnorm * norm).mean(-1, keepdim=True)
    dx *= rstd
    return dx, dw, db


def dezero_softmax_backward(y, grad_y, dim=-1):
    """oreilly-japan/deep-learning-from-scratch-3 (DeZero) ``Softmax.backward``: ``self.axis`` = ``dim``."""
    gx = y * grad_y
    sumdx = gx.sum(dim=dim, keepdim=True)
    gx -= y * sumdx
    return gx


def udacity_softmax(x, axis=-1):
    """"Compute softmax values for each sets of scores in x." (the Udacity deep-learning course's answer,
    copied across Stack Overflow and many repositories): ``axis`` added to the signature only."""
    e_x = np.exp(x - np.max(x))
    return e_x / e_x.sum(axis=0)


RIGHT = [
    ("repeat_kv", hf_repeat_kv),
    ("RMSNorm", LlamaMetaRMSNorm),
    ("top_k_filter", hf_top_k_filter),
    ("top_p_filter", hf_top_p_filter),
    ("sampling_probs", hf_sampling_probs),
    ("generate", rasbt_generate_cached),
    ("softmax_backward", dezero_softmax_backward),
]

# After tuning: (check, object, the ids its message must name, all of them and no other, None)
CASES = [
    ("GroupedQueryAttention", LlamaMetaAttention, {"nan_fully_masked"}, None),
    ("GroupedQueryAttention", HFLlamaAttention, {"rope_half_split", "fully_masked_uniform"}, None),
    ("GroupedQueryAttention", MistralOneFileAttention, {"nan_fully_masked"}, None),
    ("GroupedQueryAttention", RasbtGroupedQueryAttention, {"rope_half_split", "nan_fully_masked"}, None),
    ("RMSNorm", GemmaRMSNorm, {"rms_weight_plus_one"}, None),
    ("sampling_probs", gpt_fast_logits_to_probs, {"top_p_missing"}, None),
    ("sample_next_token", gpt_fast_sample, {"sample_draw_not_contract"}, None),
    ("generate", mingpt_generate, {"sample_draw_not_contract", "kv_cache_recomputes"}, None),
    ("generate", happy_llm_generate, {"generate_new_tokens_only", "kv_cache_recomputes"}, None),
    ("greedy_decode_cached", annotated_greedy_decode,
     {"greedy_no_eos_stop", "greedy_no_pad_after_eos", "kv_cache_recomputes", "cross_kv_recomputed"}, None),
    ("layer_norm_backward", llm_c_layer_norm_backward, {"ln_backward_sums_fixed_axes"}, None),
    ("softmax", udacity_softmax, {"softmax_fixed_axis"}, None),
]
