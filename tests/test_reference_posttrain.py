"""Chapter 12's references (solutions/posttrain.py) against PyTorch or a brute-force version: LoRA against a
dense linear with ``W + scaling * B @ A``, DPO against its formula written out and ``-F.logsigmoid``, GRPO
against a per-row Python loop, the log-probabilities against a per-position ``log_softmax`` loop."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions import (
    GPT,
    LoRALinear,
    completion_logprobs,
    completion_mask,
    dpo_loss,
    grpo_loss,
    ppo_clip_loss,
)


def _mask_by_loop(ids, prompt_len, end_id):
    out = torch.zeros(ids.shape, dtype=torch.bool)
    for b in range(ids.size(0)):
        for t in range(prompt_len, ids.size(1)):
            out[b, t] = True
            if ids[b, t] == end_id:
                break
    return out


def test_completion_mask_equals_a_loop():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5, (8, 11), generator=g)
    ids[0, 3:] = 1  # no end token after the prompt
    ids[1, 2] = 0  # an end token inside the prompt does not end the continuation
    for prompt_len in (0, 3, 11):
        got = completion_mask(ids, prompt_len, end_id=0)
        assert got.dtype == torch.bool
        assert torch.equal(got, _mask_by_loop(ids, prompt_len, 0))
    assert completion_mask(ids, 3, end_id=0)[0, 3:].all()  # a row without an end is True to its end


def test_completion_mask_refuses_a_prompt_longer_than_the_rows():
    with pytest.raises(ValueError, match="prompt_len"):
        completion_mask(torch.zeros(2, 4, dtype=torch.long), 5, 0)


def test_completion_logprobs_equals_a_per_position_loop():
    torch.manual_seed(1)
    model = GPT(vocab_size=13, d_model=16, num_heads=2, num_kv_heads=1, d_ff=24, num_layers=1, max_len=32)
    ids = torch.randint(0, 13, (3, 9))
    mask = completion_mask(ids, 3, end_id=0)
    got = completion_logprobs(model, ids, mask)
    assert got.shape == (3, 8)
    for b in range(3):
        for t in range(8):
            logits = model(ids[b:b + 1, :t + 1])[0, -1]  # the prefix alone: (V,)
            want = F.log_softmax(logits, dim=-1)[ids[b, t + 1]] if mask[b, t + 1] else torch.tensor(0.0)
            assert torch.allclose(got[b, t], want, atol=1e-5), (b, t)
    got.sum().backward()  # gradients flow into the model
    assert model.tok_embed.weight.grad is not None and model.tok_embed.weight.grad.abs().sum() > 0


def _grpo_by_loop(logp, old, ref, rewards, mask, group_size, eps, beta):
    """GRPO written as its definition reads, one row and one token at a time, in Python floats."""
    B, T1 = logp.shape
    total = 0.0
    for b in range(B):
        g0 = b // group_size * group_size
        group = [float(r) for r in rewards[g0:g0 + group_size]]
        mean = sum(group) / group_size
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (group_size - 1))
        adv = (float(rewards[b]) - mean) / (std + 1e-4)
        terms = []
        for t in range(T1):
            if not mask[b, t]:
                continue
            ratio = math.exp(float(logp[b, t] - old[b, t]))
            surrogate = min(ratio * adv, min(max(ratio, 1 - eps), 1 + eps) * adv)
            d = float(ref[b, t] - logp[b, t])
            kl = math.exp(d) - d - 1
            terms.append(-(surrogate - beta * kl))
        total += sum(terms) / max(len(terms), 1)
    return total / B


def _logprob_batch(seed, B=6, T1=7):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T1, generator=g, dtype=torch.float64) * 3
    old = logp + 0.4 * torch.randn(B, T1, generator=g, dtype=torch.float64)  # ratios well outside 1 +- eps
    ref = logp + 0.5 * torch.randn(B, T1, generator=g, dtype=torch.float64)
    mask = torch.rand(B, T1, generator=g) > 0.3
    mask[:, 0] = True
    return logp, old, ref, mask


@pytest.mark.parametrize("group_size", [2, 3, 6])
def test_grpo_loss_equals_a_per_row_loop(group_size):
    logp, old, ref, mask = _logprob_batch(group_size)
    rewards = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 0.25], dtype=torch.float64)
    for eps, beta in ((0.2, 0.1), (0.1, 0.0), (0.3, 0.5)):
        got = grpo_loss(logp, old, ref, rewards, mask, group_size, clip_eps=eps, beta=beta)
        want = _grpo_by_loop(logp, old, ref, rewards, mask, group_size, eps, beta)
        assert got.dim() == 0
        assert abs(float(got) - want) < 1e-9


def test_grpo_loss_gradient_reaches_the_policy_only():
    logp, old, ref, mask = _logprob_batch(7)
    logp, old, ref = (x.clone().requires_grad_(True) for x in (logp, old, ref))
    grpo_loss(logp, old, ref, torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.5], dtype=torch.float64), mask, 3).backward()
    assert logp.grad.abs().sum() > 0
    assert old.grad is None and ref.grad is None


def test_ppo_clip_loss_takes_token_advantages_and_equals_grpo_without_kl():
    logp, old, _, mask = _logprob_batch(8)
    adv = torch.randn(6, dtype=torch.float64)
    by_row = ppo_clip_loss(logp, old, adv, mask)
    assert torch.allclose(by_row, ppo_clip_loss(logp, old, adv[:, None].expand_as(logp), mask))
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 0.5], dtype=torch.float64)
    group = rewards.view(3, 2)
    norm = ((group - group.mean(1, keepdim=True)) / (group.std(1, keepdim=True) + 1e-4)).view(-1)
    assert torch.allclose(grpo_loss(logp, old, logp, rewards, mask, 2, beta=0.3), ppo_clip_loss(logp, old, norm, mask))


def test_dpo_loss_equals_its_formula_and_logsigmoid():
    pc, pr, rc, rr = torch.tensor([[-3.0, -7.5], [-6.0, -6.0], [-4.0, -7.0], [-5.0, -6.5]])
    beta = 0.5
    margins = [beta * ((pc[i] - rc[i]) - (pr[i] - rr[i])) for i in range(2)]  # 0.5 * (1 + 1), 0.5 * (-0.5 - 0.5)
    assert [float(m) for m in margins] == [1.0, -0.5]
    want = sum(math.log(1 + math.exp(-float(m))) for m in margins) / 2  # -log sigmoid(m) = log(1 + e^-m)
    assert abs(float(dpo_loss(pc, pr, rc, rr, beta=beta)) - want) < 1e-6
    assert torch.allclose(dpo_loss(pc, pr, rc, rr, beta), -F.logsigmoid(torch.stack(margins)).mean())
    policy = torch.stack([pc, pr]).requires_grad_(True)
    refs = torch.stack([rc, rr]).requires_grad_(True)
    dpo_loss(policy[0], policy[1], refs[0], refs[1]).backward()
    assert refs.grad is None and policy.grad.abs().sum() > 0  # the reference is frozen


def test_lora_equals_a_dense_linear_and_merges_exactly():
    torch.manual_seed(2)
    base = nn.Linear(10, 6)
    lora = LoRALinear(base, r=3, alpha=12)
    assert lora.scaling == 4.0 and lora.A.shape == (3, 10) and lora.B.shape == (6, 3)
    assert not base.weight.requires_grad and not base.bias.requires_grad
    assert [n for n, p in lora.named_parameters() if p.requires_grad] == ["A", "B"]
    x = torch.randn(4, 5, 10)
    assert torch.equal(lora(x), base(x))  # B = 0: no change at init
    with torch.no_grad():
        lora.B.normal_()
    dense = F.linear(x, base.weight + lora.scaling * lora.B @ lora.A, base.bias)
    before = lora(x)
    assert torch.allclose(before, dense, atol=1e-5)
    weight = base.weight.clone()
    lora.merge()
    assert torch.allclose(base.weight, weight + lora.scaling * lora.B @ lora.A)
    assert torch.allclose(lora(x), before, atol=1e-6)
    lora.unmerge()
    assert torch.allclose(base.weight, weight, atol=1e-6)
    assert torch.allclose(lora(x), before, atol=1e-6)


def test_lora_refuses_bad_input():
    with pytest.raises(TypeError, match="nn.Linear"):
        LoRALinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(2, 2), r=0)
