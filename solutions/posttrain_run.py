"""Chapter 12's runs: GRPO, DPO and LoRA on chapter 08's poem GPT, with the reward "is the poem in regular form".

Provided code (read-only in the lesson); it calls the chapter's graded pieces in ``solutions.posttrain``.
A sample is the text the model writes after a prompt, up to its first newline (the end of a poem in the
corpus); a sample that never writes a newline within ``max_new_tokens`` is "" (unfinished: no reward).
"""
import copy
import sys
import time
from collections import Counter

import torch
import torch.nn as nn

from .decoding import generate
from .gpt_data import is_regular_poem
from .posttrain import LoRALinear, completion_logprobs, completion_mask, dpo_loss, grpo_loss
from .training import AdamW, clip_grad_norm

SHAPES = ((5, 4), (7, 4), (5, 8), (7, 8))  # five/seven characters a line x a quatrain/eight lines


def poem_shape(poem):
    """``(characters per line, lines)`` of a regular poem of 4 or 8 lines, one of ``SHAPES``; else None.

    中文：格律诗的体裁：(每句字数, 句数)，五言/七言 × 绝句/律诗；不合格律或句数不是 4、8 时为 None。"""
    if not is_regular_poem(poem):
        return None
    lines = poem.rstrip("\n").replace("，", "。").split("。")[:-1]  # the text of each line, marks dropped
    shape = (len(lines[0]), len(lines))
    return shape if shape in SHAPES else None


def poem_reward(poem):
    """The rule reward: 1.0 for a poem in regular form (``is_regular_poem``), else 0.0."""
    return float(is_regular_poem(poem))


def sample_stats(poems):
    """``form`` (% regular), ``dup`` (% of samples that repeat an earlier one) and ``top_shape`` (% of the samples
    in the most common of ``SHAPES``) of a list of poems."""
    if not poems:
        raise ValueError("poems 不能为空 / poems must not be empty")
    n = len(poems)
    shapes = Counter(shape for shape in map(poem_shape, poems) if shape is not None)
    return dict(form=100 * sum(map(is_regular_poem, poems)) / n, dup=100 * (n - len(set(poems))) / n,
                top_shape=100 * max(shapes.values(), default=0) / n)


def decode_poems(tokenizer, ids, prompt_len):
    """The poem each row of ``ids (B, T)`` writes after its first ``prompt_len`` tokens: up to the first newline,
    "" when there is none."""
    texts = [tokenizer.decode(row[prompt_len:]) for row in ids]
    return [text.split("\n")[0] if "\n" in text else "" for text in texts]


@torch.no_grad()
def sample_group(model, tokenizer, prompt, n, max_new_tokens, generator, temperature=1.0, top_p=None):
    """``n`` continuations of ``prompt`` in one batch with the KV cache: ``(ids (n, P + max_new_tokens), poems)``.

    ``generator`` is a ``torch.Generator`` on the model's device; the model is left in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    start = tokenizer.encode(prompt).to(device).repeat(n, 1)  # (n, P)
    ids = generate(model, start, max_new_tokens, temperature=temperature, top_p=top_p, generator=generator)
    return ids, decode_poems(tokenizer, ids, start.size(1))  # ids: (n, P + max_new_tokens)


def frozen_copy(model):
    """A copy of ``model`` that never trains: the reference of GRPO's KL penalty."""
    ref = copy.deepcopy(model).eval()
    ref.requires_grad_(False)
    return ref


def grpo_train(model, tokenizer, prompt, *, steps, max_new_tokens, n_groups=8, group_size=8, lr=2e-4, beta=0.1,
               clip_eps=0.2, temperature=1.0, seed=0, reward=None, progress=False):
    """GRPO on ``model`` (its parameters that require grad: all, or LoRA's adapters) with ``reward(poem) -> float``
    (``poem_reward`` when None).

    Each step samples ``n_groups * group_size`` poems after ``prompt`` (groups of ``group_size`` consecutive
    rows share their advantage's mean and std), scores them, and takes one AdamW step (betas 0.9/0.95, no weight
    decay, gradients clipped at norm 1) on ``grpo_loss`` against a frozen copy of the model taken before the first
    step. One update per batch, so the old policy is the current one (ratio 1; the clip matters with more
    updates per batch). Returns a dict of per-step lists ``reward`` (mean), ``kl`` (the k3 estimate, mean over
    the written tokens), ``form`` (% regular), ``shapes`` (% of each of ``SHAPES``), and ``steps``, ``seconds``.
    With ``progress``, one line a step on stderr.
    """
    reward = reward or poem_reward
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    ref = frozen_copy(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    end_id = tokenizer.encode("\n")[0].item()
    prompt_len = len(prompt)
    history = dict(reward=[], kl=[], form=[], shapes={shape: [] for shape in SHAPES}, steps=steps, seconds=0.0)
    start = time.perf_counter()
    for step in range(steps):
        ids, poems = sample_group(model, tokenizer, prompt, n_groups * group_size, max_new_tokens, generator,
                                  temperature)  # ids: (B, T)
        rewards = torch.tensor([reward(poem) for poem in poems], device=device)  # (B,)
        mask = completion_mask(ids, prompt_len, end_id)  # (B, T)
        model.train()
        logprobs = completion_logprobs(model, ids, mask)  # (B, T-1)
        with torch.no_grad():
            ref_logprobs = completion_logprobs(ref, ids, mask)  # (B, T-1)
        loss = grpo_loss(logprobs, logprobs.detach(), ref_logprobs, rewards, mask[:, 1:], group_size,
                         clip_eps=clip_eps, beta=beta)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(params, 1.0)
        optimizer.step()
        with torch.no_grad():
            log_ratio = ref_logprobs - logprobs  # (B, T-1)
            written = mask[:, 1:]
            history["kl"].append((torch.exp(log_ratio) - log_ratio - 1)[written].mean().item())
        stats = Counter(map(poem_shape, poems))
        history["reward"].append(rewards.mean().item())
        history["form"].append(100 * sum(map(is_regular_poem, poems)) / len(poems))
        for shape in SHAPES:
            history["shapes"][shape].append(100 * stats[shape] / len(poems))
        if progress:
            print(f"grpo step {step + 1}/{steps}: reward {history['reward'][-1]:.3f} kl {history['kl'][-1]:.4f}",
                  file=sys.stderr, flush=True)
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


def preference_pairs(model, tokenizer, prompt, n_pairs, max_new_tokens, generator, temperature=1.0, batch=64,
                     max_batches=50):
    """``(chosen, rejected)``, each ``LongTensor (n_pairs, P + max_new_tokens)``: the model's own samples of
    ``prompt``, a regular poem over an irregular one. Samples ``batch`` at a time until it has ``n_pairs`` of
    each; a bilingual ``RuntimeError`` after ``max_batches`` batches without enough of either."""
    regular, irregular = [], []
    for _ in range(max_batches):
        ids, poems = sample_group(model, tokenizer, prompt, batch, max_new_tokens, generator, temperature)
        for row, poem in zip(ids, poems):
            (regular if is_regular_poem(poem) else irregular).append(row)
        if len(regular) >= n_pairs and len(irregular) >= n_pairs:
            return torch.stack(regular[:n_pairs]), torch.stack(irregular[:n_pairs])
    raise RuntimeError(
        f"凑不齐 {n_pairs} 对：{max_batches * batch} 个样本中合格律的 {len(regular)} 个、不合的 {len(irregular)} 个 / "
        f"{len(regular)} regular and {len(irregular)} irregular poems in {max_batches * batch} samples: not {n_pairs} "
        f"pairs")


def sequence_logprobs(model, ids, prompt_len, end_id):
    """Summed log-probability of each row's continuation (prompt and padding excluded): ``(B,)``."""
    return completion_logprobs(model, ids, completion_mask(ids, prompt_len, end_id)).sum(dim=1)


def dpo_train(model, chosen, rejected, prompt_len, end_id, *, steps, lr=2e-4, beta=0.1, batch_size=16, seed=0):
    """DPO on ``model`` from preference pairs ``chosen``/``rejected`` (``(N, T)`` each, as ``preference_pairs``).

    The reference is the model before the first step: its summed log-probabilities are computed once. Each
    step draws ``batch_size`` pairs (a ``torch.Generator`` seeded with ``seed``) and takes one AdamW step (as
    ``grpo_train``) on ``dpo_loss``. Returns ``loss`` and ``accuracy`` (share of the batch's pairs whose implicit
    reward ranks the chosen one first) per step, ``steps`` and ``seconds``."""
    with torch.no_grad():
        model.eval()
        ref_chosen = sequence_logprobs(model, chosen, prompt_len, end_id)  # (N,)
        ref_rejected = sequence_logprobs(model, rejected, prompt_len, end_id)  # (N,)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    history = dict(loss=[], accuracy=[], steps=steps, seconds=0.0)
    start = time.perf_counter()
    model.train()
    for _ in range(steps):
        pick = torch.randperm(chosen.size(0), generator=generator)[:batch_size].to(chosen.device)  # (b,)
        policy_chosen = sequence_logprobs(model, chosen[pick], prompt_len, end_id)  # (b,)
        policy_rejected = sequence_logprobs(model, rejected[pick], prompt_len, end_id)  # (b,)
        loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen[pick], ref_rejected[pick], beta)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(params, 1.0)
        optimizer.step()
        margin = (policy_chosen - ref_chosen[pick]) - (policy_rejected - ref_rejected[pick])  # (b,)
        history["loss"].append(loss.item())
        history["accuracy"].append((margin > 0).float().mean().item())
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


def add_lora(model, r=4, alpha=8):
    """Freeze ``model`` and wrap every ``nn.Linear`` of its blocks (attention's ``W_q``, ``W_k``, ``W_v``, ``W_o``
    and SwiGLU's three projections; not the embedding or ``lm_head``) in a ``LoRALinear(linear, r, alpha)``, in
    place. Returns the number of parameters left to train: ``r * (in_features + out_features)`` summed over the
    wrapped layers."""
    model.requires_grad_(False)
    targets = [(parent, name, child) for parent in model.blocks.modules()
               for name, child in parent.named_children() if isinstance(child, nn.Linear)]
    for parent, name, child in targets:
        setattr(parent, name, LoRALinear(child, r=r, alpha=alpha))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
