"""Chapter 12: post-training by hand -- the log-probabilities of a sampled continuation, the PPO and
GRPO losses, the DPO loss and a LoRA linear layer.

Shapes: ``B`` rows (sequences), ``T`` tokens each; ``ids[b, :prompt_len]`` is the prompt, the rest the
sampled continuation. A log-probability tensor has ``T - 1`` columns: column ``t`` scores token
``t + 1`` given the tokens before it, so its mask is the completion mask's ``[:, 1:]``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def completion_mask(ids, prompt_len, end_id):
    """Which tokens of each row the policy wrote: ``completion_mask(ids, prompt_len, end_id) -> bool (B, T)``.

    True from column ``prompt_len`` up to **and including** the first ``end_id`` at or after it; False on
    the prompt (columns ``< prompt_len``) and on everything after that first ``end_id`` (the padding a
    batch of unequal continuations carries). A row without ``end_id`` after the prompt is True to its end.

    中文：补全（continuation）掩码：从第 ``prompt_len`` 列起、直到并**包括**其后第一个 ``end_id`` 为 True；
    提示（prompt）部分和第一个 ``end_id`` 之后的填充（padding）为 False；没有 ``end_id`` 的行一直为 True。
    """
    if ids.dim() != 2:
        raise ValueError(f"ids 应为 2 维 (B, T) / ids must be 2-D (B, T); got {tuple(ids.shape)}")
    if not 0 <= prompt_len <= ids.size(1):
        raise ValueError(f"prompt_len 应在 0 到 T={ids.size(1)} 之间 / prompt_len must lie in 0..T={ids.size(1)}; "
                         f"got {prompt_len}")
    ### BEGIN SOLUTION
    positions = torch.arange(ids.size(1), device=ids.device)[None, :]  # (1, T)
    written = positions >= prompt_len  # (1, T): after the prompt
    ends = ((ids == end_id) & written).long()  # (B, T): end tokens the policy wrote
    ended_before = (ends.cumsum(dim=1) - ends) > 0  # (B, T): an end token strictly before this column
    return written & ~ended_before
    ### END SOLUTION


def completion_logprobs(model, ids, mask):
    """Log-probability of each written token under ``model``: ``completion_logprobs(model, ids, mask) -> (B, T-1)``.

    ``model(ids)`` gives logits ``(B, T, V)``; the logits at column ``t`` predict token ``t + 1``, so
    ``out[b, t] = log p(ids[b, t+1] | ids[b, :t+1])`` (``log_softmax`` over the vocabulary), and ``0`` where
    ``mask[b, t+1]`` is False (prompt and padding). Gradients flow into the model.

    中文：模型对每个生成 token 的对数概率：第 ``t`` 列的 logits 预测第 ``t + 1`` 个 token（错开一位），
    在词表维上取 ``log_softmax`` 再取出真实 token 的那一项；``mask[:, 1:]`` 为 False 处置 0。
    """
    if ids.shape != mask.shape:
        raise ValueError(f"ids 与 mask 形状应相同 / ids and mask must have the same shape; "
                         f"got {tuple(ids.shape)} and {tuple(mask.shape)}")
    ### BEGIN SOLUTION
    logits = model(ids)  # (B, T, V)
    logp = F.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V): column t predicts token t + 1
    taken = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1, 1) -> (B, T-1)
    return torch.where(mask[:, 1:], taken, torch.zeros_like(taken))
    ### END SOLUTION


def ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    """The PPO clipped objective, negated: ``ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2)``.

    ``ratio = exp(logprobs - old_logprobs)`` per token; ``surrogate = min(ratio * A, clamp(ratio, 1 - eps,
    1 + eps) * A)`` with ``A`` the advantages, ``(B,)`` (one per sequence, broadcast to its tokens) or
    ``(B, T-1)``. Each sequence's loss is the mean of ``-surrogate`` over its masked tokens; the loss is the
    mean over sequences (a scalar). ``old_logprobs`` carry no gradient (the policy that sampled).

    中文：PPO 裁剪目标取负：比率 ``ratio = exp(logp - logp_old)``，替代目标取未裁剪与裁剪（两侧都裁）两项的
    **较小者**；先在每条序列的掩码 token 上取平均，再在序列间取平均。
    """
    ### BEGIN SOLUTION
    if advantages.dim() == 1:
        advantages = advantages[:, None]  # (B,) -> (B, 1): one advantage for all of a row's tokens
    ratio = torch.exp(logprobs - old_logprobs.detach())  # (B, T-1)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    surrogate = torch.minimum(ratio * advantages, clipped * advantages)  # (B, T-1)
    weights = mask.to(surrogate.dtype)
    per_sequence = (surrogate * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)  # (B,)
    return -per_sequence.mean()
    ### END SOLUTION


def grpo_loss(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    """The GRPO loss (DeepSeekMath): ``grpo_loss(logprobs, old_logprobs, ref_logprobs, rewards, mask,
    group_size, clip_eps=0.2, beta=0.1) -> scalar``.

    ``rewards (B,)``: rows come in consecutive groups of ``group_size`` samples of one prompt. Each row's
    advantage is ``(r - group mean) / (group std + 1e-4)`` (std unbiased, torch's default), broadcast to its
    tokens; the clipped surrogate is ``ppo_clip_loss``'s. The KL penalty to the frozen reference uses the k3
    estimator per token, ``exp(ref - logp) - (ref - logp) - 1`` (never negative, unbiased for KL(policy ||
    ref)). Per-token loss ``-(surrogate - beta * kl)``; mean over each sequence's masked tokens, then over
    sequences: ``ppo_clip_loss(...) + beta * (the same mean of kl)``. ``ref_logprobs`` carry no gradient.

    中文：GRPO 损失：优势（advantage）在**每组内**标准化（减组均值、除以组标准差 + 1e-4）；裁剪比率同 PPO；
    对参考模型（reference model，冻结）的 KL 惩罚用 k3 估计量 ``exp(ref - logp) - (ref - logp) - 1``。
    """
    if rewards.numel() % group_size != 0:
        raise ValueError(f"行数 {rewards.numel()} 不是 group_size={group_size} 的整数倍 / "
                         f"{rewards.numel()} rows are not a whole number of groups of {group_size}")
    ### BEGIN SOLUTION
    groups = rewards.view(-1, group_size)  # (B,) -> (n_groups, group_size)
    advantages = (groups - groups.mean(dim=1, keepdim=True)) / (groups.std(dim=1, keepdim=True) + 1e-4)
    advantages = advantages.view(-1)  # (n_groups, group_size) -> (B,)
    log_ratio_ref = ref_logprobs.detach() - logprobs  # (B, T-1)
    kl = torch.exp(log_ratio_ref) - log_ratio_ref - 1  # k3: >= 0 per token
    weights = mask.to(kl.dtype)
    kl_per_sequence = (kl * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)  # (B,)
    return ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps) + beta * kl_per_sequence.mean()
    ### END SOLUTION


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """The DPO loss (Rafailov et al., 2023): ``dpo_loss(policy_chosen, policy_rejected, ref_chosen,
    ref_rejected, beta=0.1) -> scalar``.

    Each argument is ``(B,)``: a sequence's summed log-probability under the policy or the frozen
    reference. The loss is the mean of ``-logsigmoid(beta * ((pc - rc) - (pr - rr)))``: the Bradley--Terry
    likelihood that the chosen answer beats the rejected one, with ``beta * log(policy / ref)`` as the
    implicit reward.

    中文：DPO 损失：隐式奖励是 ``beta * (策略对数概率 - 参考对数概率)``，按 Bradley–Terry 模型要求
    “被选中的”胜过“被拒绝的”：``-logsigmoid(beta * (选中的差 - 拒绝的差))`` 的批均值。
    """
    ### BEGIN SOLUTION
    chosen = policy_chosen - ref_chosen.detach()  # (B,) log(policy / ref) of the chosen answers
    rejected = policy_rejected - ref_rejected.detach()  # (B,)
    return -F.logsigmoid(beta * (chosen - rejected)).mean()
    ### END SOLUTION


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update (Hu et al., 2021).

    ``LoRALinear(base, r=4, alpha=8)``: ``base`` is frozen (``requires_grad`` False); ``A (r, in_features)``
    small random (Kaiming-uniform), ``B (out_features, r)`` zeros, ``scaling = alpha / r``.
    ``forward(x) = base(x) + scaling * (x @ A.T) @ B.T`` -- equal to ``base(x)`` at initialisation
    (``B = 0``). ``merge()`` adds ``scaling * B @ A`` into ``base.weight`` (forward is then ``base(x)``
    alone); ``unmerge()`` takes it out again; outputs are the same before and after either.
    Trainable parameters: ``r * (in_features + out_features)``.

    中文：LoRA 线性层：底座冻结，只训练低秩的 ``A``（随机小值）和 ``B``（全零，所以初始时输出不变）；
    缩放 ``alpha / r``；``merge()`` 把 ``scaling * B @ A`` 并入底座权重，``unmerge()`` 再减回去。
    """

    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base 应为 nn.Linear / base must be an nn.Linear; got {type(base).__name__}")
        if r < 1:
            raise ValueError(f"秩 r 至少为 1 / the rank r must be at least 1; got {r}")
        self.base = base
        self.r, self.alpha = r, alpha
        self.merged = False
        ### BEGIN SOLUTION
        base.requires_grad_(False)
        self.scaling = alpha / r
        weight = base.weight
        self.A = nn.Parameter(torch.empty(r, base.in_features, dtype=weight.dtype, device=weight.device))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r, dtype=weight.dtype, device=weight.device))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        out = self.base(x)  # (..., out_features)
        if self.merged:
            return out
        return out + self.scaling * (x @ self.A.T) @ self.B.T  # (..., in) @ (in, r) @ (r, out) -> (..., out)
        ### END SOLUTION

    def merge(self):
        ### BEGIN SOLUTION
        if not self.merged:
            with torch.no_grad():
                self.base.weight += self.scaling * self.B @ self.A  # (out, r) @ (r, in) -> (out, in)
            self.merged = True
        ### END SOLUTION

    def unmerge(self):
        ### BEGIN SOLUTION
        if self.merged:
            with torch.no_grad():
                self.base.weight -= self.scaling * self.B @ self.A  # (out, r) @ (r, in) -> (out, in)
            self.merged = False
        ### END SOLUTION
