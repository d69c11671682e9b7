"""Wrong implementations of chapter 12's post-training pieces, one classic mistake each."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- completion_mask


def mask_end_excluded(ids, prompt_len, end_id):
    B, T = ids.shape
    out = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        for t in range(prompt_len, T):
            if ids[b, t] == end_id:
                break  # bug: stops before the end token
            out[b, t] = True
    return out


def mask_padding_kept(ids, prompt_len, end_id):
    out = torch.zeros_like(ids, dtype=torch.bool)
    out[:, prompt_len:] = True  # bug: the padding after the end stays True
    return out


def mask_prompt_kept(ids, prompt_len, end_id):
    is_end = (ids == end_id).long()
    return (is_end.cumsum(1) - is_end) == 0  # bug: the prompt is never masked


def mask_end_searched_in_prompt(ids, prompt_len, end_id):
    pos = torch.arange(ids.size(1))[None, :]
    is_end = (ids == end_id).long()  # bug: end tokens in the prompt count too
    return (pos >= prompt_len) & ((is_end.cumsum(1) - is_end) == 0)


def mask_prompt_off_by_one(ids, prompt_len, end_id):
    pos = torch.arange(ids.size(1))[None, :]
    after = pos > prompt_len  # bug: column prompt_len is the completion's first token
    is_end = ((ids == end_id) & after).long()
    return after & ((is_end.cumsum(1) - is_end) == 0)


def mask_as_integers(ids, prompt_len, end_id):
    is_end = (ids == end_id).long()
    is_end[:, :prompt_len] = 0
    after_end = (is_end.cumsum(1) - is_end) > 0
    mask = torch.ones_like(ids)
    mask[:, :prompt_len] = 0
    return mask.masked_fill(after_end, 0)  # bug: a long 0/1 tensor, not a bool one


# ---------------------------------------------------------------- completion_logprobs


def logprobs_logits_not_shifted(model, ids, mask):
    logp = F.log_softmax(model(ids), dim=-1)[:, 1:]  # bug: logits of column t + 1 score token t + 1
    out = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return out * mask[:, 1:]


def logprobs_mask_off_by_one(model, ids, mask):
    logp = F.log_softmax(model(ids)[:, :-1], dim=-1)
    out = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return out * mask[:, :-1]  # bug: the mask of the context token, not of the scored one


def logprobs_not_masked(model, ids, mask):
    logp = F.log_softmax(model(ids)[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # bug: the prompt and the padding stay


def logprobs_wrong_dim(model, ids, mask):
    logp = F.log_softmax(model(ids)[:, :-1], dim=1)  # bug: normalised over time
    out = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return out * mask[:, 1:]


def logprobs_detached(model, ids, mask):
    with torch.no_grad():  # bug: no gradient reaches the model
        logp = F.log_softmax(model(ids)[:, :-1], dim=-1)
    out = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return out * mask[:, 1:]


# ---------------------------------------------------------------- ppo_clip_loss


def _per_sequence_mean(x, mask):
    m = mask.float()
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()


def ppo_clip_upper_only(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, max=1 + clip_eps)  # bug: no lower bound
    return -_per_sequence_mean(torch.min(ratio * A, clipped * A), mask)


def ppo_max_not_min(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    return -_per_sequence_mean(torch.max(ratio * A, clipped * A), mask)  # bug: max


def ppo_ratio_inverted(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(old_logprobs - logprobs)  # bug: old over new
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    return -_per_sequence_mean(torch.min(ratio * A, clipped * A), mask)


def ppo_not_negated(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    return _per_sequence_mean(torch.min(ratio * A, clipped * A), mask)  # bug: the objective, not the loss


def ppo_token_mean(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    return -surrogate[mask].mean()  # bug: every masked token together


def ppo_mask_ignored(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    return -surrogate.mean()  # bug: prompt and padding averaged in


def ppo_sequence_sum(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    return -(surrogate * mask).sum(-1).mean()  # bug: each sequence's sum, not its mean


def ppo_ratio_to_itself(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    A = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - logprobs.detach())  # bug: old_logprobs never read
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    return -_per_sequence_mean(surrogate, mask)


# ---------------------------------------------------------------- grpo_loss


def _grpo(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_eps, beta, kl):
    ratio = torch.exp(logprobs - old_logprobs)
    A = advantages.unsqueeze(-1)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    return _per_sequence_mean(-(surrogate - beta * kl), mask)


def _k3(logprobs, ref_logprobs):
    d = ref_logprobs.detach() - logprobs
    return torch.exp(d) - d - 1


def grpo_whole_batch_advantages(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2,
                                beta=0.1):
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-4)  # bug: one mean and std for the whole batch
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, _k3(logprobs, ref_logprobs))


def grpo_not_scaled(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    g = rewards.view(-1, group_size)
    adv = (g - g.mean(1, keepdim=True)).flatten()  # bug: centred only
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, _k3(logprobs, ref_logprobs))


def grpo_biased_std(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    g = rewards.view(-1, group_size)
    adv = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True, unbiased=False) + 1e-4)).flatten()  # bug
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, _k3(logprobs, ref_logprobs))


def grpo_no_eps(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    g = rewards.view(-1, group_size)
    adv = ((g - g.mean(1, keepdim=True)) / g.std(1, keepdim=True)).flatten()  # bug: 0 / 0 for equal rewards
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, _k3(logprobs, ref_logprobs))


def _group_advantages(rewards, group_size):
    g = rewards.view(-1, group_size)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)).flatten()


def grpo_kl_sign_flipped(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, -beta,  # bug: KL rewarded
                 _k3(logprobs, ref_logprobs))


def grpo_kl_k1(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    kl = logprobs - ref_logprobs.detach()  # bug: k1, negative on some tokens
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, kl)


def grpo_kl_k2(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    kl = 0.5 * (logprobs - ref_logprobs.detach()) ** 2  # bug: k2
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, kl)


def grpo_kl_k3_reversed(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    d = logprobs - ref_logprobs.detach()  # bug: log(policy / ref) where k3 takes log(ref / policy)
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta, torch.exp(d) - d - 1)


def grpo_clip_lower_only(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    A = _group_advantages(rewards, group_size).unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, min=1 - clip_eps) * A)  # bug: no upper bound
    return _per_sequence_mean(-(surrogate - beta * _k3(logprobs, ref_logprobs)), mask)


def grpo_max_not_min(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    A = _group_advantages(rewards, group_size).unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.max(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)  # bug: max
    return _per_sequence_mean(-(surrogate - beta * _k3(logprobs, ref_logprobs)), mask)


def grpo_token_mean(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    A = _group_advantages(rewards, group_size).unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    per_token = -(surrogate - beta * _k3(logprobs, ref_logprobs))
    return per_token[mask].mean()  # bug: DAPO's token-level mean


def grpo_no_kl(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    return _grpo(logprobs, old_logprobs, ref_logprobs, adv, mask, clip_eps, beta,
                 torch.zeros_like(logprobs))  # bug: no KL penalty


def grpo_sequence_sum(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    A = _group_advantages(rewards, group_size).unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.min(ratio * A, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
    per_token = -(surrogate - beta * _k3(logprobs, ref_logprobs))
    return (per_token * mask).sum(-1).mean()  # bug: each sequence's sum, not its mean


def grpo_ratio_to_itself(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    adv = _group_advantages(rewards, group_size)
    return _grpo(logprobs, logprobs.detach(), ref_logprobs, adv, mask, clip_eps, beta,  # bug: old_logprobs unread
                 _k3(logprobs, ref_logprobs))


# ---------------------------------------------------------------- dpo_loss


def dpo_beta_outside(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    margin = (policy_chosen - ref_chosen.detach()) - (policy_rejected - ref_rejected.detach())
    return -(beta * F.logsigmoid(margin)).mean()  # bug: beta outside the log-sigmoid


def dpo_no_beta(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    margin = (policy_chosen - ref_chosen.detach()) - (policy_rejected - ref_rejected.detach())
    return -F.logsigmoid(margin).mean()  # bug: beta forgotten


def dpo_reference_dropped(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    return -F.logsigmoid(beta * (policy_chosen - policy_rejected)).mean()  # bug: no reference


def dpo_swapped(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    margin = (policy_rejected - ref_rejected.detach()) - (policy_chosen - ref_chosen.detach())  # bug: swapped
    return -F.logsigmoid(beta * margin).mean()


def dpo_sum(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    margin = (policy_chosen - ref_chosen.detach()) - (policy_rejected - ref_rejected.detach())
    return -F.logsigmoid(beta * margin).sum()  # bug: summed over the pairs


# ---------------------------------------------------------------- LoRALinear


class _LoRA(nn.Module):
    """A right LoRA layer whose pieces the wrong ones below change one at a time."""

    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad = False
        self.scaling = alpha / r
        self.A = nn.Parameter(torch.empty(r, base.in_features))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        self.merged = False

    def delta(self):
        return self.scaling * self.B @ self.A  # (out, r) @ (r, in)

    def forward(self, x):
        out = self.base(x)
        return out if self.merged else out + self.scaling * (x @ self.A.T) @ self.B.T

    def merge(self):
        if not self.merged:
            self.base.weight.data += self.delta()
            self.merged = True

    def unmerge(self):
        if self.merged:
            self.base.weight.data -= self.delta()
            self.merged = False


class LoRANoScaling(_LoRA):
    def __init__(self, base, r=4, alpha=8):
        super().__init__(base, r, alpha)
        self.scaling = 1.0  # bug: alpha / r forgotten


class LoRAScalingInverted(_LoRA):
    def __init__(self, base, r=4, alpha=8):
        super().__init__(base, r, alpha)
        self.scaling = r / alpha  # bug: inverted


class LoRABRandom(_LoRA):
    def __init__(self, base, r=4, alpha=8):
        super().__init__(base, r, alpha)
        nn.init.normal_(self.B, std=0.02)  # bug: the output changes at init


class LoRABothZero(_LoRA):
    def __init__(self, base, r=4, alpha=8):
        super().__init__(base, r, alpha)
        nn.init.zeros_(self.A)  # bug: A and B both zero, no gradient reaches either


class LoRABaseTrainable(_LoRA):
    def __init__(self, base, r=4, alpha=8):
        super().__init__(base, r, alpha)
        self.base.requires_grad_(True)  # bug: the base trains too


class LoRAMergeNoScaling(_LoRA):
    def merge(self):
        if not self.merged:
            self.base.weight.data += self.B @ self.A  # bug: no scaling
            self.merged = True

    def unmerge(self):
        if self.merged:
            self.base.weight.data -= self.B @ self.A
            self.merged = False


class LoRAMergeNotMarked(_LoRA):
    def merge(self):
        self.base.weight.data += self.delta()  # bug: forward still adds the LoRA term

    def unmerge(self):
        self.base.weight.data -= self.delta()


class LoRAUnmergeNoop(_LoRA):
    def unmerge(self):
        self.merged = False  # bug: the base weight keeps the update


CASES = [
    ("completion_mask", mask_end_excluded, "mask_end_excluded"),
    ("completion_mask", mask_padding_kept, "mask_padding_kept"),
    ("completion_mask", mask_prompt_kept, "mask_prompt_kept"),
    ("completion_mask", mask_end_searched_in_prompt, "mask_end_searched_in_prompt"),
    ("completion_mask", mask_prompt_off_by_one, "mask_prompt_off_by_one"),
    ("completion_mask", mask_as_integers, "completion_mask_not_bool"),
    ("completion_logprobs", logprobs_logits_not_shifted, "logprobs_not_shifted"),
    ("completion_logprobs", logprobs_mask_off_by_one, "logprobs_mask_off_by_one"),
    ("completion_logprobs", logprobs_not_masked, "logprobs_not_masked"),
    ("completion_logprobs", logprobs_wrong_dim, "logprobs_wrong_dim"),
    ("completion_logprobs", logprobs_detached, "logprobs_detached"),
    ("ppo_clip_loss", ppo_clip_upper_only, "clip_one_side"),
    ("ppo_clip_loss", ppo_max_not_min, "clip_max_not_min"),
    ("ppo_clip_loss", ppo_ratio_inverted, "ratio_inverted"),
    ("ppo_clip_loss", ppo_not_negated, "policy_loss_not_negated"),
    ("ppo_clip_loss", ppo_token_mean, "loss_token_mean"),
    ("ppo_clip_loss", ppo_mask_ignored, "loss_mask_ignored"),
    ("ppo_clip_loss", ppo_sequence_sum, "loss_sequence_sum"),
    ("ppo_clip_loss", ppo_ratio_to_itself, "ratio_old_ignored"),
    ("grpo_loss", grpo_whole_batch_advantages, "advantages_whole_batch"),
    ("grpo_loss", grpo_not_scaled, "advantages_not_scaled"),
    ("grpo_loss", grpo_biased_std, "advantages_biased_std"),
    ("grpo_loss", grpo_no_eps, "advantages_no_eps"),
    ("grpo_loss", grpo_kl_sign_flipped, "kl_sign_flipped"),
    ("grpo_loss", grpo_kl_k1, "kl_k1_estimator"),
    ("grpo_loss", grpo_kl_k2, "kl_k2_estimator"),
    ("grpo_loss", grpo_kl_k3_reversed, "kl_k3_reversed"),
    ("grpo_loss", grpo_clip_lower_only, "clip_one_side"),
    ("grpo_loss", grpo_max_not_min, "clip_max_not_min"),
    ("grpo_loss", grpo_token_mean, "loss_token_mean"),
    ("grpo_loss", grpo_no_kl, "kl_missing"),
    ("grpo_loss", grpo_sequence_sum, "loss_sequence_sum"),
    ("grpo_loss", grpo_ratio_to_itself, "ratio_old_ignored"),
    ("dpo_loss", dpo_beta_outside, "dpo_beta_outside"),
    ("dpo_loss", dpo_no_beta, "dpo_no_beta"),
    ("dpo_loss", dpo_reference_dropped, "dpo_reference_dropped"),
    ("dpo_loss", dpo_swapped, "dpo_chosen_rejected_swapped"),
    ("dpo_loss", dpo_sum, "dpo_sum_not_mean"),
    ("LoRALinear", LoRANoScaling, "lora_no_scaling"),
    ("LoRALinear", LoRAScalingInverted, "lora_scaling_inverted"),
    ("LoRALinear", LoRABRandom, "lora_b_not_zero"),
    ("LoRALinear", LoRABothZero, "lora_both_zero"),
    ("LoRALinear", LoRABaseTrainable, "lora_base_not_frozen"),
    ("LoRALinear", LoRAMergeNoScaling, "lora_merge_no_scaling"),
    ("LoRALinear", LoRAMergeNotMarked, "lora_merge_not_marked"),
    ("LoRALinear", LoRAUnmergeNoop, "lora_unmerge_not_restoring"),
]
