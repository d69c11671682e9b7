"""Real public implementations of the chapter 08–11 components, round 3 (issue 36, item 6): held out
before any check of that issue changed. None of these repositories is in ``realworld.py`` or
``realworld_llm.py``. Each is the published code, adapted only as far as the contract's signature
needs; every adaptation is said in the entry's docstring, the logic is the source's.

``HELD_OUT`` lists, for each entry: the check, the object, the verdict and diagnosis ids decided
from the source (``set()`` = should pass), and the source. ``python -m catalogue.realworld_round3``
runs them through the checks and prints the table and the held-out rate (a verdict and its
diagnosis ids both as decided = right).

Held-out rate before any check of issue 36 changed (commit 270262e's checks): 12/32 as first run,
13/32 once the DeepSeek adaptation was corrected (it had applied the filters before the temperature
and handed the generator to ``exponential_``; neither is in the source); verdicts 25/32. After
issue 36's checks: 24/32, verdicts 28/32; with the schedule check that accepts both warmup
conventions (COURSE_DESIGN §10; the five ``max_lr * step / W`` schedules of CS336, nanoGPT and
torchtune now pass, as decided): 29/32, verdicts 32/32. What still differs from the decision:
- subword-nmt's learner also breaks ties by the larger pair, and its 0.2 encoder also strips the
  marker: both are in the source, the decision named only the glued marker;
- CS336's loss: decided "ignore_index not honoured", written as ce_ignored_in_mean; the check names
  loss_includes_pad, the registry's id for exactly that (plus ce_no_label_smoothing, as decided).
``CASES`` (each names exactly its ids, tests/test_checks.py) and ``RIGHT`` (each passes) hold the
named outcome of every entry.
"""
import math
import re
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

END = "</w>"


# ---------------------------------------------------------------- BPE (chapter 11)

def subword_nmt_toy_learn_bpe(word_freqs, num_merges):
    """rsennrich/subword-nmt bpe_toy.py (Sennrich et al. 2016's listing). Adapted: the vocabulary
    ``'l o w </w>'`` is built from ``word_freqs`` and the merges are returned instead of printed."""
    def get_stats(vocab):
        pairs = defaultdict(int)
        for word, freq in vocab.items():
            symbols = word.split()
            for i in range(len(symbols) - 1):
                pairs[symbols[i], symbols[i + 1]] += freq
        return pairs

    def merge_vocab(pair, v_in):
        v_out = {}
        bigram_pattern = re.escape(" ".join(pair))
        p = re.compile(r"(?<!\S)" + bigram_pattern + r"(?!\S)")
        for word in v_in:
            w_out = p.sub("".join(pair), word)
            v_out[w_out] = v_in[word]
        return v_out

    vocab = {" ".join(list(word) + [END]): freq for word, freq in word_freqs.items()}
    merges = []
    for _ in range(num_merges):
        pairs = get_stats(vocab)
        if not pairs:  # adaptation: the toy's corpus never runs out of pairs; max() of nothing would raise
            break
        best = max(pairs, key=pairs.get)
        if pairs[best] < 2:
            break
        vocab = merge_vocab(best, vocab)
        merges.append(best)
    return merges


def subword_nmt_learn_bpe(word_freqs, num_merges):
    """rsennrich/subword-nmt subword_nmt/learn_bpe.py (version 0.2): ``</w>`` glued to the last
    character (``tuple(x[:-1]) + (x[-1] + '</w>',)``), words sorted by frequency, the most frequent
    pair by ``max(stats, key=lambda x: (stats[x], x))`` (ties: the larger pair), stop below
    ``min_frequency=2``. Adapted: the statistics are recounted every round instead of updated
    incrementally and pruned (the source says pruning "should only affect speed"); merges returned."""
    vocab = dict([(tuple(x[:-1]) + (x[-1] + END,), y) for (x, y) in word_freqs.items()])
    sorted_vocab = sorted(vocab.items(), key=lambda x: x[1], reverse=True)
    merges = []
    for _ in range(num_merges):
        stats = defaultdict(int)
        for word, freq in sorted_vocab:
            prev_char = word[0]
            for char in word[1:]:
                stats[prev_char, char] += freq
                prev_char = char
        if not stats:
            break
        most_frequent = max(stats, key=lambda x: (stats[x], x))
        if stats[most_frequent] < 2:
            break
        first, second = most_frequent
        pattern = re.compile(r"(?<!\S)" + re.escape(first + " " + second) + r"(?!\S)")
        sorted_vocab = [(tuple(pattern.sub(first + second, " ".join(word)).split(" ")), freq)
                        for word, freq in sorted_vocab]
        merges.append(most_frequent)
    return merges


def minbpe_learn_bpe(word_freqs, num_merges):
    """karpathy/minbpe minbpe/basic.py ``BasicTokenizer.train``: ``get_stats``, ``pair = max(stats,
    key=stats.get)``, ``merge`` -- no stop when the best pair occurs once or when no pair is left.
    Adapted: the byte ids of one text become the words' symbols with ``</w>``, counted per word and
    weighted by frequency (minbpe's text is one sequence); ``num_merges`` given, merges returned."""
    words = [(list(word) + [END], freq) for word, freq in word_freqs.items()]

    def get_stats(words):
        counts = {}
        for ids, freq in words:
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + freq
        return counts

    def merge(ids, pair):
        newids, i = [], 0
        while i < len(ids):
            if i < len(ids) - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                newids.append(pair[0] + pair[1])
                i += 2
            else:
                newids.append(ids[i])
                i += 1
        return newids

    merges = []
    for _ in range(num_merges):
        stats = get_stats(words)
        pair = max(stats, key=stats.get)
        words = [(merge(ids, pair), freq) for ids, freq in words]
        merges.append(pair)
    return merges


def minbpe_bpe_encode(word, merges):
    """karpathy/minbpe minbpe/basic.py ``BasicTokenizer.encode``: while two symbols remain, merge
    the pair of lowest merge index present, stop when none is a merge. Adapted: the symbols are the
    word's characters and ``</w>`` (not bytes), ``self.merges`` is ``{pair: rank}``."""
    ranks = {pair: i for i, pair in enumerate(merges)}
    ids = list(word) + [END]
    while len(ids) >= 2:
        stats = {pair: None for pair in zip(ids, ids[1:])}
        pair = min(stats, key=lambda p: ranks.get(p, float("inf")))
        if pair not in ranks:
            break
        newids, i = [], 0
        while i < len(ids):
            if i < len(ids) - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                newids.append(pair[0] + pair[1])
                i += 2
            else:
                newids.append(ids[i])
                i += 1
        ids = newids
    return ids


def _subword_nmt_encode(orig, merges, version):
    """rsennrich/subword-nmt subword_nmt/apply_bpe.py ``encode`` (no glossary, no dropout, no vocabulary
    filter, no cache). Adapted: ``bpe_codes`` is ``{pair: rank}`` built from ``merges``; a list returned."""
    bpe_codes = {pair: i for i, pair in enumerate(merges)}
    if len(orig) == 1:
        return [orig]
    eow = END
    if version == (0, 1):
        word = list(orig) + [END]
    else:  # (0, 2): more consistent handling of word-final segments
        word = list(orig[:-1]) + [orig[-1] + eow]
    while len(word) > 1:
        pairs = [(bpe_codes[pair], i, pair) for (i, pair) in enumerate(zip(word, word[1:])) if pair in bpe_codes]
        if not pairs:
            break
        bigram = min(pairs)[2]
        positions = [i for (rank, i, pair) in pairs if pair == bigram]
        i = 0
        new_word = []
        bigram = "".join(bigram)
        for j in positions:
            if j < i:
                continue
            new_word.extend(word[i:j])
            new_word.append(bigram)
            i = j + 2
        new_word.extend(word[i:])
        word = new_word
    # don't print end-of-word symbols
    if word[-1] == eow:
        word = word[:-1]
    elif word[-1].endswith(eow):
        word[-1] = word[-1][:-4]
    return list(word)


def subword_nmt_encode_v01(word, merges):
    """subword-nmt apply_bpe.py ``encode``, codes version 0.1 (``list(orig) + ['</w>']``); the end
    marker is stripped from the output by design ("don't print end-of-word symbols")."""
    return _subword_nmt_encode(word, merges, (0, 1))


def subword_nmt_encode_v02(word, merges):
    """subword-nmt apply_bpe.py ``encode``, codes version 0.2 (``</w>`` glued to the last character)."""
    return _subword_nmt_encode(word, merges, (0, 2))


# ---------------------------------------------------------------- training pieces (chapter 08)

class CS336AdamW(torch.optim.Optimizer):
    """vyvy3n/cs336-hw1 cs336_basics/training/AdamW.py (a CS336 assignment 1 solution): a
    ``torch.optim.Optimizer`` reading each group's settings; ``step_size = lr * sqrt(1 - beta2^t) /
    (1 - beta1^t)``, ``p -= step_size * m / (sqrt(v) + eps)`` (eps added to the uncorrected sqrt(v), the
    Adam paper's "efficient" form), then ``p -= lr * wd * p`` on the updated p. Adapted: ``betas``
    instead of ``beta1``/``beta2``, the argument checks and the closure left out; ``.data`` kept. (Before
    the contract became an Optimizer, this entry was a plain class with an ``lr`` attribute.)"""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p.data)
                    state["v"] = torch.zeros_like(p.data)
                state["step"] += 1
                step = state["step"]
                state["m"] = beta1 * state["m"] + (1 - beta1) * grad
                state["v"] = beta2 * state["v"] + (1 - beta2) * (grad * grad)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                adjusted_lr = lr * (bias_correction2 ** 0.5) / bias_correction1
                p.data = p.data - adjusted_lr * state["m"] / (torch.sqrt(state["v"]) + eps)
                if weight_decay > 0:
                    p.data = p.data - lr * weight_decay * p.data


class TimmAdamW(torch.optim.Optimizer):
    """huggingface/pytorch-image-models timm/optim/adamw.py ``AdamWLegacy`` (``_single_tensor_adamw``,
    no amsgrad/caution/maximize): a ``torch.optim.Optimizer``; ``p *= 1 - lr * wd``, moments,
    ``denom = sqrt(v) / sqrt(bc2) + eps``, ``p -= lr / bc1 * m / denom``. Adapted: the closure and the
    options left out. (Before the contract became an Optimizer, a plain class with an ``lr`` attribute.)"""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                state = self.state[param]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                param.mul_(1. - group["lr"] * group["weight_decay"])
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = state["step"]
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = group["lr"] / bias_correction1
                denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(group["eps"])
                param.addcdiv_(exp_avg, denom, value=-step_size)


def cs336_gradient_clipping(parameters, max_norm, eps=1e-6):
    """vyvy3n/cs336-hw1 cs336_basics/training/gradient_clipping.py: global norm, scale by
    ``max_norm / (total + eps)`` when above; returns None (CS336's adapter returns nothing).
    Not adapted (the contract's signature already)."""
    gradients = []
    for param in parameters:
        if param.grad is not None:
            gradients.append(param.grad)
    if not gradients:
        return
    total_norm = torch.sqrt(sum(torch.sum(grad * grad) for grad in gradients))
    if total_norm > max_norm:
        clip_coeff = max_norm / (total_norm + eps)
        for param in parameters:
            if param.grad is not None:
                param.grad.data.mul_(clip_coeff)


def cs336_cosine_lr(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """vyvy3n/cs336-hw1 cs336_basics/training/lr_schedules.py ``cosine_learning_rate_schedule``
    (CS336's handout: warmup ``max_lr * t / T_w``). Adapted: argument names and order."""
    iteration, max_learning_rate, min_learning_rate = step, max_lr, min_lr
    warmup_iters, cosine_cycle_iters = warmup_steps, max_steps
    if iteration < warmup_iters:
        return max_learning_rate * iteration / warmup_iters
    elif iteration <= cosine_cycle_iters:
        progress = (iteration - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return min_learning_rate + (max_learning_rate - min_learning_rate) * 0.5 * (1 + math.cos(math.pi * progress))
    else:
        return min_learning_rate


def nanogpt_get_lr(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """karpathy/nanoGPT train.py ``get_lr`` (the stored version: ``learning_rate * it / warmup_iters``).
    Adapted: ``self.args`` fields become arguments (``lr_decay_iters = max_steps``)."""
    it = step
    if it < warmup_steps:
        return max_lr * it / warmup_steps
    if it > max_steps:
        return min_lr
    decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (max_lr - min_lr)


def torchtune_cosine_lr(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """pytorch/torchtune torchtune/modules/lr_schedulers.py ``get_cosine_schedule_with_warmup``'s
    ``lr_lambda`` (num_cycles 0.5) times the optimizer's lr. Adapted: a function of the step (the
    LambdaLR multiplies max_lr); the schedule has no floor, ``min_lr`` is not read."""
    num_warmup_steps, num_training_steps, num_cycles = warmup_steps, max_steps, 0.5

    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return current_step / max(1, num_warmup_steps)
        progress = (current_step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
        cosine_lr_multiple = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
        return max(0.0, cosine_lr_multiple)

    return max_lr * lr_lambda(step)


class CS336AdamWDecayFirst(torch.optim.Optimizer):
    """A CS336 assignment 1 solution (public GitHub, found by its line ``p.data -= lr * weight_decay *
    p.data``): ``alpha_t = lr * sqrt(1 - b2^t) / (1 - b1^t)``, decay ``p -= lr * wd * p`` first, then
    ``p -= alpha_t * m / (sqrt(v) + eps)`` (eps on the uncorrected sqrt(v)). Adapted as ``CS336AdamW``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def step(self):
        for group in self.param_groups:
            lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
            beta_1, beta_2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                    state["t"] = 1
                alpha_t = lr * math.sqrt(1 - beta_2 ** state["t"]) / (1 - beta_1 ** state["t"])
                p.data -= lr * weight_decay * p.data
                state["m"] = beta_1 * state["m"] + (1 - beta_1) * p.grad
                state["v"] = beta_2 * state["v"] + (1 - beta_2) * p.grad ** 2
                p.data -= alpha_t * state["m"] / (torch.sqrt(state["v"]) + eps)
                state["t"] += 1


class CS336AdamWStateGet(torch.optim.Optimizer):
    """A CS336 assignment 1 solution (public GitHub, ``state.get("t", 1)`` style): ``lr_t = lr *
    sqrt(1 - b2^t) / (1 - b1^t)``, ``p -= lr_t * m / (sqrt(v) + eps)``, then ``p -= lr * wd * p``.
    Adapted as ``CS336AdamW``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def step(self):
        for group in self.param_groups:
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                t = state.get("t", 1)
                m = state.get("m", torch.zeros_like(p.data))
                v = state.get("v", torch.zeros_like(p.data))
                g = p.grad.data
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g ** 2
                lr_t = lr * math.sqrt((1 - b2 ** t)) / (1 - b1 ** t)  # noqa: UP034 (the source's parentheses)
                p.data -= lr_t * m / (torch.sqrt(v) + eps)
                p.data -= lr * weight_decay * p.data
                state["t"] = t + 1
                state["m"] = m
                state["v"] = v


def cs336_lr_cosine_schedule(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """A CS336 assignment 1 solution (public GitHub, ``lr_cosine_schedule`` next to the AdamW above):
    warmup ``max_lr * it / warmup_steps``, ``it >= cosine_cycle_iters`` gives min_lr. Adapted:
    argument order."""
    it, cosine_cycle_iters = step, max_steps
    if it < warmup_steps:
        return max_lr * it / warmup_steps
    if it >= cosine_cycle_iters:
        return min_lr
    decay_ratio = (it - warmup_steps) / (cosine_cycle_iters - warmup_steps)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (max_lr - min_lr)


def cs336_get_cosine_lr(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """A CS336 assignment 1 solution (public GitHub, ``get_cosine_lr(t, lr_max, lr_min, warmup_steps,
    cosine_steps)``). Adapted: argument order."""
    t, lr_max, lr_min, cosine_steps = step, max_lr, min_lr, max_steps
    if t < warmup_steps:
        return t / warmup_steps * lr_max
    elif warmup_steps <= t < cosine_steps:
        return lr_min + 0.5 * (1 + math.cos((t - warmup_steps) / (cosine_steps - warmup_steps) * math.pi)) * (
            lr_max - lr_min)
    else:
        return lr_min


def litgpt_sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """Lightning-AI/litgpt litgpt/generate/base.py ``sample`` up to its softmax: top-k by scatter,
    temperature, ``sample_top_p``, softmax. Adapted as ``litgpt_sample_next_token`` (per row)."""
    rows = []
    for row in logits:
        if top_k is not None:
            v, i = torch.topk(row, min(top_k, row.size(-1)))
            row = torch.full_like(row, float("-inf")).scatter_(-1, i, v)
        rows.append(row)
    logits = torch.stack(rows) / temperature
    if top_p is not None and top_p < 1.0:
        logits = litgpt_top_p(logits, top_p)
    return torch.nn.functional.softmax(logits, dim=-1)


# ---------------------------------------------------------------- model parts (chapters 03, 04, 08)

def nanochat_repeat_kv(x, n_rep):
    """karpathy/nanochat nanochat/gpt.py ``repeat_kv`` (expand + reshape). Not adapted."""
    if n_rep == 1:
        return x
    bs, n_kv_heads, slen, head_dim = x.shape
    return (x[:, :, None, :, :].expand(bs, n_kv_heads, n_rep, slen, head_dim)
            .reshape(bs, n_kv_heads * n_rep, slen, head_dim))


def nanochat_apply_rope(x, positions=None, base=10000.0):
    """karpathy/nanochat nanochat/gpt.py ``apply_rotary_emb`` with ``_precompute_rotary_embeddings``:
    halves ``x1, x2``; ``y1 = x1 cos + x2 sin``, ``y2 = -x1 sin + x2 cos``. Adapted: cos/sin built
    here from ``positions`` (bf16 cast dropped), for ``x (..., T, d)`` instead of ``(B, T, H, D)``."""
    T, head_dim = x.shape[-2], x.shape[-1]
    channel_range = torch.arange(0, head_dim, 2, dtype=x.dtype)
    inv_freq = 1.0 / (base ** (channel_range / head_dim))
    t = torch.arange(T, dtype=x.dtype) if positions is None else torch.as_tensor(positions, dtype=x.dtype)
    freqs = t[..., None] * inv_freq  # (..., T, d/2)
    cos, sin = freqs.cos(), freqs.sin()
    d = head_dim // 2
    x1, x2 = x[..., :d], x[..., d:]
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat([y1, y2], -1)


def torchtune_apply_rope(x, positions=None, base=10000.0):
    """pytorch/torchtune torchtune/modules/position_embeddings.py ``RotaryPositionalEmbeddings``:
    ``xshaped = x.reshape(..., -1, 2)``, cache ``[cos, sin]`` stacked, rotation of adjacent pairs.
    Adapted: the cache built for ``positions`` (``input_pos``) and ``x (..., T, d)`` instead of
    ``(b, s, n_h, h_d)``; the float32 cast dropped."""
    dim, seq_len = x.shape[-1], x.shape[-2]
    theta = 1.0 / (base ** (torch.arange(0, dim, 2)[: (dim // 2)].to(x.dtype) / dim))
    seq_idx = torch.arange(seq_len, dtype=x.dtype) if positions is None else torch.as_tensor(positions, dtype=x.dtype)
    idx_theta = seq_idx[..., None] * theta  # (..., T, d/2)
    rope_cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
    xshaped = x.reshape(*x.shape[:-1], -1, 2)
    x_out = torch.stack([xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
                         xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1]], -1)
    return x_out.flatten(-2)


class TorchtuneRMSNorm(nn.Module):
    """pytorch/torchtune torchtune/modules/rms_norm.py. Adapted: ``scale`` named ``weight`` (the
    contract's attribute), the fp32 cast dropped (the checks run in float64)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.normalized_shape = (dim,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x_normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x_normed * self.weight


class TorchtuneSwiGLU(nn.Module):
    """pytorch/torchtune torchtune/modules/feed_forward.py ``FeedForward`` (llama2's): ``w2(silu(w1(x))
    * w3(x))``. Adapted: the projections are built here under the contract's names (torchtune
    receives them; its builders name them gate_proj/down_proj/up_proj), no bias."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.activation = nn.SiLU()

    def forward(self, x):
        h = self.activation(self.gate_proj(x))
        h = h * self.up_proj(x)
        return self.down_proj(h)


# ---------------------------------------------------------------- decoding (chapter 09)

def xtransformers_top_p(logits, p):
    """lucidrains/x-transformers autoregressive_wrapper.py ``top_p`` (current): remove where the
    inclusive cumulative mass ``> thres``, shifted right by one (the crossing token kept). Adapted:
    ``thres = p``; ``None`` / ``p >= 1`` leaves the logits unchanged; any leading shape (flattened)."""
    if p is None or p >= 1:
        return logits
    shape = logits.shape
    logits = logits.reshape(-1, shape[-1])
    sorted_logits, sorted_indices = torch.sort(logits, descending=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cum_probs > p
    sorted_indices_to_remove = F.pad(sorted_indices_to_remove, (1, -1), value=False)
    sorted_logits[sorted_indices_to_remove] = float("-inf")
    return sorted_logits.scatter(1, sorted_indices, sorted_logits).reshape(shape)


def lucidrains_old_top_p(logits, p):
    """lucidrains/compressive-transformer-pytorch (and linear-attention-transformer, reformer-pytorch of
    the same years) ``top_p``: remove where the cumulative mass ``> (1 - thres)``, shifted right.
    Adapted as ``xtransformers_top_p``."""
    if p is None or p >= 1:
        return logits
    shape = logits.shape
    logits = logits.reshape(-1, shape[-1])
    sorted_logits, sorted_indices = torch.sort(logits, descending=True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cum_probs > (1 - p)
    sorted_indices_to_remove[:, 1:] = sorted_indices_to_remove[:, :-1].clone()
    sorted_indices_to_remove[:, 0] = 0
    sorted_logits[sorted_indices_to_remove] = float("-inf")
    return sorted_logits.scatter(1, sorted_indices, sorted_logits).reshape(shape)


def xtransformers_top_k(logits, k):
    """lucidrains/x-transformers autoregressive_wrapper.py ``top_k``: ``torch.topk`` then scatter
    into a ``-inf`` tensor. Adapted: ``k`` given (not ``frac_num_tokens``), ``None`` leaves the
    logits unchanged, scatter on the last axis for any leading shape."""
    if k is None:
        return logits
    k = min(k, logits.shape[-1])
    val, ind = torch.topk(logits, k)
    probs = torch.full_like(logits, float("-inf"))
    probs.scatter_(-1, ind, val)
    return probs


def nanogpt_top_k(logits, k):
    """karpathy/nanoGPT model.py ``generate``'s top-k lines: ``logits[logits < v[:, [-1]]] = -inf``.
    Adapted: a function of ``(logits, k)`` on a copy, ``v[..., [-1]]`` for any leading shape."""
    if k is None:
        return logits
    logits = logits.clone()
    v, _ = torch.topk(logits, min(k, logits.size(-1)))
    logits[logits < v[..., [-1]]] = -float("Inf")
    return logits


def litgpt_top_p(logits, p):
    """Lightning-AI/litgpt litgpt/generate/base.py ``sample_top_p``: ascending sort, remove where the
    cumulative mass ``<= 1 - top_p``, the top token always kept. Adapted: litgpt's function takes one
    row (``sample`` passes ``logits[0, -1]``), so it runs per row; ``None`` / ``p >= 1`` unchanged."""
    if p is None or p >= 1:
        return logits

    def one_row(row):
        sorted_logits, sorted_indices = torch.sort(row, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - p)
        sorted_indices_to_remove[-1:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(0, sorted_indices, sorted_indices_to_remove)
        return row.masked_fill(indices_to_remove, float("-inf"))

    flat = logits.reshape(-1, logits.shape[-1])
    return torch.stack([one_row(row) for row in flat]).reshape(logits.shape)


def litgpt_sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Lightning-AI/litgpt litgpt/generate/base.py ``sample``: top-k by ``torch.topk`` + scatter into
    ``-inf`` ("do not use torch.where as in nanogpt because it will repeat top-k collisions"), then
    temperature, ``sample_top_p``, softmax, ``torch.multinomial(probs, num_samples=1)``; argmax at
    temperature 0 (and top_p 0). Adapted: run per row of ``(B, V)`` for the filters (litgpt's is
    one row), then one ``torch.multinomial`` on the stacked probabilities with the contract's
    ``generator``; ``top_p=None`` read as 1.0."""
    top_p = 1.0 if top_p is None else top_p
    rows = []
    for row in logits:
        if top_k is not None:
            v, i = torch.topk(row, min(top_k, row.size(-1)))
            row = torch.full_like(row, float("-inf")).scatter_(-1, i, v)
        rows.append(row)
    logits = torch.stack(rows)
    if temperature > 0.0 or top_p > 0.0:
        if temperature > 0.0:
            logits = logits / temperature
        if top_p < 1.0:
            logits = litgpt_top_p(logits, top_p)
        probs = torch.nn.functional.softmax(logits, dim=-1)
        if temperature == 0.0:  # adaptation: litgpt samples at temperature 0 when top_p > 0
            return torch.argmax(logits, dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
    return torch.argmax(logits, dim=-1)


def deepseek_v3_sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """deepseek-ai/DeepSeek-V3 inference/generate.py ``sample``: ``logits / max(temperature, 1e-5)``,
    softmax, ``probs.div_(torch.empty_like(probs).exponential_(1)).argmax(-1)`` (the exponential race);
    ``generate`` takes argmax when temperature is 0. Adapted: the argmax branch moved in; DeepSeek
    has no top-k/top-p, so the contract's filters (the reference's ``top_k_filter``/``top_p_filter``,
    written out) are applied to the tempered logits; ``generator`` accepted but not read (DeepSeek's noise
    comes from the global generator). With the generator passed to ``exponential_`` the draw would equal
    ``torch.multinomial(probs, 1, generator=...)`` in this PyTorch (its CPU kernel draws the same way)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[..., [-1]], float("-inf"))
    if top_p is not None and top_p < 1:
        probs = torch.softmax(logits, -1)
        sorted_probs, order = torch.sort(probs, descending=True, stable=True)
        before = torch.cumsum(sorted_probs, -1) - sorted_probs
        drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= top_p)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return probs.div_(torch.empty_like(probs).exponential_(1)).argmax(dim=-1)


# ---------------------------------------------------------------- backward passes and loss (chapter 10)

def cs231n_layernorm_backward_graph(x, weight, grad_out, eps=1e-5):
    """A CS231n assignment 2 solution (public GitHub, layers.py ``layernorm_forward`` / ``layernorm_backward``,
    the step-by-step graph: ``dvar_inv``, ``dvar``, ``dxmu``, ``dmu``). Adapted: NumPy on the tensors'
    values with the forward's cache computed here; any leading shape flattened to ``(N, D)``."""
    shape = x.shape
    xn = x.detach().reshape(-1, shape[-1]).numpy()
    dout = grad_out.detach().reshape(-1, shape[-1]).numpy()
    gamma = weight.detach().numpy()
    mu = np.mean(xn, axis=1, keepdims=True)
    var = np.var(xn, axis=1, keepdims=True)
    var_inv = 1 / np.sqrt(var + eps)
    x_mu = xn - mu
    x_norm = x_mu * var_inv
    N, D = dout.shape
    dgamma = np.sum(dout * x_norm, axis=0)
    dxnorm = dout * gamma
    dbeta = np.sum(dout, axis=0)
    dxmu = dxnorm * var_inv
    dvar_inv = np.sum(dxnorm * x_mu, axis=1, keepdims=True)
    dvar = dvar_inv * -0.5 * var_inv ** 3
    dx = dxmu
    dxmu += dvar * 2 / D * x_mu
    dmu = -1 * np.sum(dxmu, axis=1, keepdims=True)
    dx += 1 / D * dmu
    return (torch.from_numpy(dx).reshape(shape), torch.from_numpy(dgamma), torch.from_numpy(dbeta))


def cs231n_layernorm_backward_transposed(x, weight, grad_out, eps=1e-5):
    """A CS231n assignment 2 solution (public GitHub): LayerNorm as batch norm on ``x.T``; backward
    ``dx = 1/m * istd * (m * dxn - sum(dxn) - xn * sum(dxn * xn))`` on the transposed arrays.
    Adapted as ``cs231n_layernorm_backward_graph``."""
    shape = x.shape
    xa = x.detach().reshape(-1, shape[-1]).numpy().T
    dout = grad_out.detach().reshape(-1, shape[-1]).numpy()
    g = weight.detach().numpy()
    x_mean = np.mean(xa, axis=0)
    x_var = np.var(xa, axis=0)
    istd = 1 / np.sqrt(x_var + eps)
    xn_T = ((xa - x_mean) * istd).T
    dg = np.sum(xn_T * dout, axis=0)
    db = np.sum(dout, axis=0)
    dxn_T = dout * g
    xn = xn_T.T
    dxn = dxn_T.T
    m = xn.shape[0]
    dx = 1 / m * istd * (m * dxn - np.sum(dxn, axis=0) - xn * np.sum(dxn * xn, axis=0))
    dx = dx.T
    return (torch.from_numpy(np.ascontiguousarray(dx)).reshape(shape), torch.from_numpy(dg), torch.from_numpy(db))


def cs336_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):
    """vyvy3n/cs336-hw1 cs336_basics/training/cross_entropy.py (CS336's ``run_cross_entropy``):
    max subtracted, ``log_softmax``, ``gather``, mean. Adapted: einops' ``rearrange``/``reduce``
    written with ``reshape``/``amax``/``mean``; the contract's ``ignore_index`` and
    ``label_smoothing`` accepted but not read (CS336's loss has neither); targets clamped at 0 so that a
    padding target (-100) does not crash ``gather`` (CS336's data has none)."""
    logits_flat = logits.reshape(-1, logits.shape[-1])
    targets_flat = target.reshape(-1)
    logits_max = logits_flat.amax(-1, keepdim=True)
    logits_stable = logits_flat - logits_max
    log_softmax = torch.log_softmax(logits_stable, dim=-1)
    target_log_probs = log_softmax.gather(dim=-1, index=targets_flat.clamp_min(0).unsqueeze(-1))  # (N, 1)
    return (-target_log_probs.squeeze(-1)).mean()


# ---------------------------------------------------------------- the held-out table

# (check, object, decided diagnosis ids (set() = pass), source, what the source does)
HELD_OUT = [
    ("learn_bpe", subword_nmt_toy_learn_bpe, set(), "rsennrich/subword-nmt bpe_toy.py", "the paper's algorithm"),
    ("learn_bpe", subword_nmt_learn_bpe, {"bpe_end_marker_glued"}, "rsennrich/subword-nmt learn_bpe.py 0.2",
     "</w> glued to the last character"),
    ("learn_bpe", minbpe_learn_bpe, {"bpe_no_min_count_stop"}, "karpathy/minbpe basic.py train",
     "no stop below count 2 (and none when no pair is left)"),
    ("bpe_encode", minbpe_bpe_encode, set(), "karpathy/minbpe basic.py encode", "lowest rank first"),
    ("bpe_encode", subword_nmt_encode_v01, {"bpe_end_marker_stripped"}, "rsennrich/subword-nmt apply_bpe.py 0.1",
     "strips </w> from its output by design"),
    ("bpe_encode", subword_nmt_encode_v02, {"bpe_end_marker_glued"}, "rsennrich/subword-nmt apply_bpe.py 0.2",
     "</w> glued to the last character, then stripped"),
    ("AdamW", CS336AdamW, {"adamw_eps_uncorrected_v", "adamw_decay_after_update"}, "vyvy3n/cs336-hw1 AdamW.py",
     "eps on the uncorrected sqrt(v); decay after the update"),
    ("AdamW", TimmAdamW, set(), "huggingface/pytorch-image-models timm/optim/adamw.py", "torch.optim.AdamW's math"),
    ("clip_grad_norm", cs336_gradient_clipping, {"clip_returns_none"}, "vyvy3n/cs336-hw1 gradient_clipping.py",
     "returns None"),
    ("warmup_cosine_lr", cs336_cosine_lr, set(), "vyvy3n/cs336-hw1 lr_schedules.py",
     "warmup max_lr * t / W (CS336's convention, accepted by COURSE_DESIGN §10)"),
    ("warmup_cosine_lr", nanogpt_get_lr, set(), "karpathy/nanoGPT train.py get_lr",
     "warmup max_lr * it / W (accepted convention)"),
    ("warmup_cosine_lr", torchtune_cosine_lr, {"lr_cosine_ignores_min_lr"}, "pytorch/torchtune lr_schedulers.py",
     "decays to 0: no min_lr (warmup step / W accepted)"),
    ("repeat_kv", nanochat_repeat_kv, set(), "karpathy/nanochat gpt.py repeat_kv", "expand + reshape"),
    ("apply_rope", nanochat_apply_rope, {"rope_half_split", "rope_rotation_inverted"},
     "karpathy/nanochat gpt.py apply_rotary_emb", "halves, rotated by -angle"),
    ("apply_rope", torchtune_apply_rope, set(), "pytorch/torchtune position_embeddings.py", "adjacent pairs"),
    ("RMSNorm", TorchtuneRMSNorm, set(), "pytorch/torchtune rms_norm.py", "x * rsqrt(mean(x^2) + eps) * scale"),
    ("SwiGLU", TorchtuneSwiGLU, set(), "pytorch/torchtune feed_forward.py", "w2(silu(w1 x) * w3 x)"),
    ("top_p_filter", xtransformers_top_p, {"top_p_strict_tie"}, "lucidrains/x-transformers top_p",
     "strict >: at a mass exactly p the next token is kept too"),
    ("top_p_filter", lucidrains_old_top_p, {"top_p_one_minus_p"}, "lucidrains/compressive-transformer-pytorch top_p",
     "nucleus of mass 1 - p"),
    ("top_p_filter", litgpt_top_p, set(), "Lightning-AI/litgpt generate/base.py sample_top_p",
     "ascending, <= 1 - p"),
    ("top_k_filter", xtransformers_top_k, {"top_k_ties_dropped"}, "lucidrains/x-transformers top_k",
     "topk + scatter drops ties"),
    ("top_k_filter", nanogpt_top_k, set(), "karpathy/nanoGPT model.py generate", "logits < v[:, [-1]]"),
    ("sample_next_token", litgpt_sample_next_token, {"top_k_ties_dropped"}, "Lightning-AI/litgpt sample",
     "top-k by scatter (ties dropped)"),
    ("sample_next_token", deepseek_v3_sample_next_token, {"sample_draw_not_contract"},
     "deepseek-ai/DeepSeek-V3 generate.py sample", "exponential race"),
    ("layer_norm_backward", cs231n_layernorm_backward_graph, set(), "a CS231n assignment 2 solution",
     "graph, step by step"),
    ("layer_norm_backward", cs231n_layernorm_backward_transposed, set(), "a CS231n assignment 2 solution",
     "batch norm on x.T"),
    ("cross_entropy", cs336_cross_entropy, {"ce_ignored_in_mean", "ce_no_label_smoothing"},
     "vyvy3n/cs336-hw1 cross_entropy.py", "no ignore_index, no label smoothing"),
    ("AdamW", CS336AdamWDecayFirst, {"adamw_eps_uncorrected_v"}, "a CS336 assignment 1 solution (decay first)",
     "eps on the uncorrected sqrt(v)"),
    ("AdamW", CS336AdamWStateGet, {"adamw_eps_uncorrected_v", "adamw_decay_after_update"},
     "a CS336 assignment 1 solution (state.get)", "eps on the uncorrected sqrt(v); decay after the update"),
    ("warmup_cosine_lr", cs336_lr_cosine_schedule, set(), "a CS336 assignment 1 solution (lr_cosine_schedule)",
     "warmup it / W (accepted convention)"),
    ("warmup_cosine_lr", cs336_get_cosine_lr, set(), "a CS336 assignment 1 solution (get_cosine_lr)",
     "warmup t / W (accepted convention)"),
    ("sampling_probs", litgpt_sampling_probs, {"top_k_ties_dropped"}, "Lightning-AI/litgpt sample",
     "top-k by scatter (ties dropped)"),
]


# what the checks name now, where it differs from the decision above (see the docstring)
NAMED = {subword_nmt_learn_bpe: {"bpe_end_marker_glued", "bpe_ties_by_largest_pair"},
         subword_nmt_encode_v02: {"bpe_end_marker_glued", "bpe_end_marker_stripped"},
         cs336_cross_entropy: {"ce_no_label_smoothing", "loss_includes_pad"}}
CASES = [(check, obj, NAMED.get(obj, decided), None) for check, obj, decided, *_ in HELD_OUT if decided]
RIGHT = [(check, obj) for check, obj, decided, *_ in HELD_OUT if not decided]


def run(entries=HELD_OUT):
    """Run every entry through its check; return rows (check, name, decided, passed, ids, right)."""
    from tutor.checks import run_check
    rows = []
    for check, obj, decided, source, _ in entries:
        try:
            result = run_check(check, obj)
            passed, ids = result.passed, set(result.diagnoses or ())
        except Exception as error:  # a check that crashes is a wrong verdict, recorded as such
            passed, ids = False, {f"CRASH {type(error).__name__}"}
        right = passed if not decided else (not passed and ids == decided)
        rows.append((check, obj.__name__, source, decided, passed, ids, right))
    return rows


def main(entries=HELD_OUT):
    """Print each entry's decided and named outcome, then the held-out rate."""
    rows = run(entries)
    for check, name, _source, decided, passed, ids, right in rows:
        got = "pass" if passed else "fail " + (", ".join(sorted(ids)) or "(nothing named)")
        want = "pass" if not decided else "fail " + ", ".join(sorted(decided))
        print(f"{'✓' if right else '✗'} {check:20s} {name:36s} decided: {want:55s} got: {got}")
    print(f"held-out rate: {sum(r[-1] for r in rows)}/{len(rows)}; verdicts right: "
          f"{sum(r[4] == (not r[3]) for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
