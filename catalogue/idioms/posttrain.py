"""Idioms of the exercises checked in tutor/checks/posttrain.py (12 post-training by hand)."""
from . import idiom

# ---------------------------------------------------------------- 12_posttrain

idiom("completion_mask_first_end_argmax", "12_posttrain", "completion_mask",
      "the first end column found with argmax over a bool tensor, torch.where for rows without one, a range "
      "compared against two bounds", r'''
def completion_mask(ids, prompt_len, end_id):
    B, T = ids.shape
    cols = torch.arange(T, device=ids.device).expand(B, T)                        # (B, T)
    is_end = (ids == end_id) & (cols >= prompt_len)                               # (B, T)
    first_end = torch.where(is_end.any(dim=1), is_end.int().argmax(dim=1), T - 1)  # (B,): argmax = first max
    return (cols >= prompt_len) & (cols <= first_end[:, None])
''')


idiom("completion_logprobs_cross_entropy_none", "12_posttrain", "completion_logprobs",
      "the negated F.cross_entropy(reduction='none') with the vocabulary moved to dim 1, masked_fill", r'''
def completion_logprobs(model, ids, mask):
    logits = model(ids)[:, :-1]                                                   # (B, T-1, V): predicts ids[:, 1:]
    nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, V, T-1) -> (B, T-1)
    return (-nll).masked_fill(~mask[:, 1:], 0.0)
''')


idiom("ppo_clip_loss_pg_losses_max", "12_posttrain", "ppo_clip_loss",
      "TRL's form: the two losses -A * ratio and -A * clamp(ratio), their torch.max, a masked mean per row "
      "through a helper", r'''
def masked_mean(values, mask, dim):
    mask = mask.to(values.dtype)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1.0)


def ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    if advantages.ndim == 1:
        advantages = advantages.unsqueeze(1)                                      # (B,) -> (B, 1)
    ratio = (logprobs - old_logprobs.detach()).exp()
    pg_losses = -advantages * ratio
    pg_losses_clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    per_token = torch.max(pg_losses, pg_losses_clipped)                          # = -min(surrogates)
    return masked_mean(per_token, mask, dim=1).mean()
''')


idiom("grpo_loss_repeat_interleave_per_token", "12_posttrain", "grpo_loss",
      "TRL's GRPO layout: group means and stds repeated with repeat_interleave, per-token KL and loss, "
      "the surrogate written out without calling ppo_clip_loss", r'''
def grpo_loss(logprobs, old_logprobs, ref_logprobs, rewards, mask, group_size, clip_eps=0.2, beta=0.1):
    grouped = rewards.view(-1, group_size)                                        # (n_groups, G)
    mean = grouped.mean(dim=1).repeat_interleave(group_size)                      # (B,)
    std = grouped.std(dim=1).repeat_interleave(group_size)                        # (B,), unbiased
    advantages = ((rewards - mean) / (std + 1e-4)).unsqueeze(1)                   # (B, 1)
    ref = ref_logprobs.detach()
    per_token_kl = torch.exp(ref - logprobs) - (ref - logprobs) - 1
    ratio = torch.exp(logprobs - old_logprobs.detach())
    surrogate = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    per_token_loss = -(surrogate - beta * per_token_kl)
    m = mask.float()
    return ((per_token_loss * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)).mean()
''')


idiom("dpo_loss_logratios_softplus", "12_posttrain", "dpo_loss",
      "the log-ratio form pi_logratios - ref_logratios, -logsigmoid(z) written as softplus(-z), "
      "the reference under torch.no_grad", r'''
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    pi_logratios = policy_chosen - policy_rejected
    with torch.no_grad():
        ref_logratios = ref_chosen - ref_rejected
    return F.softplus(-beta * (pi_logratios - ref_logratios)).mean()            # -log sigmoid(z) = softplus(-z)
''')


idiom("lora_linear_loralib_style", "12_posttrain", "LoRALinear",
      "loralib's layout: parameters from weight.new_zeros, kaiming_uniform_ on A, F.linear with the merged "
      "weight's delta, merge/unmerge through one delta method and .data", r'''
class LoRALinear(nn.Module):
    def __init__(self, base, r=4, alpha=8):
        super().__init__()
        self.base, self.r, self.alpha = base, r, alpha
        for p in base.parameters():
            p.requires_grad = False
        self.A = nn.Parameter(base.weight.new_zeros((r, base.in_features)))
        self.B = nn.Parameter(base.weight.new_zeros((base.out_features, r)))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.scaling = alpha / r
        self.merged = False

    def delta_weight(self):
        return (self.B @ self.A) * self.scaling                                   # (out, r) @ (r, in)

    def forward(self, x):
        if self.merged:
            return self.base(x)
        return F.linear(x, self.base.weight + self.delta_weight(), self.base.bias)

    def merge(self):
        if not self.merged:
            self.base.weight.data += self.delta_weight().detach()
            self.merged = True

    def unmerge(self):
        if self.merged:
            self.base.weight.data -= self.delta_weight().detach()
            self.merged = False
''')
