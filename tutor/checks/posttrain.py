"""Checks of chapter 12, post-training by hand (``solutions/posttrain.py``): the completion mask, the
log-probabilities of a continuation, the PPO and GRPO losses, the DPO loss and the LoRA linear layer.

Every case runs in float64. A loss's check also compares the gradients it sends into the policy's
log-probabilities. The reference model's log-probabilities come in without gradients, as a training loop computes
them (under no_grad): a loss may detach them or not, both are right. The references are proven against
brute-force loops and PyTorch in tests/test_reference_posttrain.py.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, FunctionCheck, wrong

MISTAKES = define_mistakes({
    # completion_mask
    "mask_end_excluded": (
        "结束符本身被掩掉了：第一个 end_id 也是策略写出的 token（它决定了何时停下），要算进补全里",
        "the end token itself is masked out: the first end_id is a token the policy wrote (it decided to stop), "
        "so it belongs to the completion"),
    "mask_padding_kept": (
        "第一个 end_id 之后的填充没有掩掉：那些 token 不是策略写的，不能进损失",
        "the padding after the first end_id is not masked: the policy did not write those tokens, they must not "
        "enter the loss"),
    "mask_prompt_kept": (
        "提示（prompt）没有掩掉：前 prompt_len 列是给定的，不是策略写的，应为 False",
        "the prompt is not masked: its first prompt_len columns were given, not written by the policy; they must "
        "be False"),
    "mask_end_searched_in_prompt": (
        "在提示里也找了 end_id：提示里的结束符不会结束补全，只找第 prompt_len 列及之后的第一个 end_id",
        "end_id is searched in the prompt too: an end token inside the prompt does not end the completion; look "
        "for the first end_id at column prompt_len or after"),
    "mask_prompt_off_by_one": (
        "补全的起点差了一列：第 prompt_len 列是补全的第一个 token（列号从 0 开始），用 >= prompt_len",
        "the completion starts one column off: column prompt_len is its first token (columns count from 0); use "
        ">= prompt_len"),
    "completion_mask_not_bool": (
        "掩码的位置都对，但它是整数 0/1 张量（TRL 等库的写法）：契约要布尔张量（torch.bool）——~mask、x[mask]、"
        "torch.where 都要布尔；比较（==、>=）的结果本来就是布尔，去掉 .long()/.int()",
        "every position of the mask is right, but it is an integer 0/1 tensor (as TRL and others write it): the "
        "contract's mask is a bool tensor (torch.bool), which ~mask, x[mask] and torch.where need; comparisons "
        "(==, >=) already give bools, so drop the .long()/.int()"),
    # completion_logprobs
    "logprobs_not_shifted": (
        "logits 与 token 没有错开一位：第 t 列的 logits 预测的是第 t + 1 个 token，"
        "要用 logits[:, :-1] 配 ids[:, 1:]",
        "logits and tokens are not shifted: the logits at column t predict token t + 1; pair logits[:, :-1] with "
        "ids[:, 1:]"),
    "logprobs_mask_off_by_one": (
        "掩码错了一位：输出第 t 列是第 t + 1 个 token 的对数概率，要用 mask[:, 1:]，不是 mask[:, :-1]",
        "the mask is one column off: output column t scores token t + 1, so use mask[:, 1:], not mask[:, :-1]"),
    "logprobs_not_masked": (
        "没有用掩码：提示和填充位置的对数概率应为 0，否则它们会进损失",
        "the mask is not applied: the log-probabilities of the prompt and the padding must be 0, or they enter "
        "the loss"),
    "logprobs_wrong_dim": (
        "log_softmax 沿错了维度：概率要在词表维（最后一维，dim=-1）上归一化，不是时间维",
        "log_softmax over the wrong dimension: normalise over the vocabulary (the last dim, dim=-1), not over time"),
    "logprobs_detached": (
        "对数概率没有梯度（no_grad 或 detach）：策略的对数概率要把梯度传回模型，否则 GRPO 什么也学不到",
        "the log-probabilities carry no gradient (no_grad or detach): the policy's log-probabilities must send "
        "gradients back into the model, or GRPO learns nothing"),
    # ppo_clip_loss and grpo_loss
    "clip_one_side": (
        "比率只在一侧裁剪：要 clamp(ratio, 1 - eps, 1 + eps) 两侧都裁；优势为正时上界起作用，为负时下界起作用",
        "the ratio is clipped on one side only: clamp(ratio, 1 - eps, 1 + eps) on both; the upper bound acts when "
        "the advantage is positive, the lower one when it is negative"),
    "clip_max_not_min": (
        "两项取了较大者：PPO 取未裁剪与裁剪两项的较小者（min），得到目标的悲观下界",
        "the larger of the two terms is taken: PPO takes the smaller (min) of the unclipped and the clipped term, "
        "a pessimistic bound on the objective"),
    "policy_loss_not_negated": (
        "返回的是目标本身，没有取负：优化器做的是最小化，损失是 -surrogate",
        "the objective itself is returned, not negated: optimisers minimise, the loss is -surrogate"),
    "ratio_inverted": (
        "比率倒过来了：ratio = exp(logprobs - old_logprobs)，新策略比旧策略",
        "the ratio is inverted: ratio = exp(logprobs - old_logprobs), new policy over old"),
    "loss_token_mean": (
        "所有掩码 token 一起平均（DAPO 的 token 级平均）：本课的约定是先在每条序列内平均，再在序列间平均",
        "every masked token averaged together (DAPO's token-level mean): this course's convention averages "
        "within each sequence first, then over sequences"),
    "loss_sequence_sum": (
        "每条序列内求和而不是求平均（例如 masked_normalize 除以常数 1，或 Dr. GRPO 除以固定长度）：本课的约定是"
        "先在每条序列的掩码 token 上取平均，长序列不因为更长而占更大的权重",
        "each sequence's tokens summed, not averaged (e.g. masked_normalize by the constant 1, or Dr. GRPO's fixed "
        "length): this course's convention averages over each sequence's masked tokens, so a longer sequence "
        "weighs no more than a shorter one"),
    "ratio_old_ignored": (
        "比率没有用 old_logprobs，而是 exp(logprobs - logprobs.detach())（恒为 1，TRL 0.14 的写法）：只有每批只更新"
        "一步、old_logprobs 恰好等于 logprobs 时才对；一般要 ratio = exp(logprobs - old_logprobs)，裁剪才起作用",
        "the ratio ignores old_logprobs: exp(logprobs - logprobs.detach()) (always 1, TRL 0.14's form) is right "
        "only with one update per batch, when old_logprobs equal logprobs; in general ratio = exp(logprobs - "
        "old_logprobs), and only then does the clip act"),
    "loss_mask_ignored": (
        "平均时没用掩码：提示和填充的位置也算进了平均，只对掩码为 True 的 token 求平均",
        "the mean ignores the mask: prompt and padding positions count too; average over the tokens whose mask is "
        "True"),
    "advantages_whole_batch": (
        "优势在整个批次上标准化：GRPO 在每组（同一提示的 group_size 个样本）内减组均值、除以组标准差",
        "advantages normalised over the whole batch: GRPO subtracts each group's mean and divides by its std (the "
        "group_size samples of one prompt)"),
    "advantages_not_scaled": (
        "优势只减了组均值，没有除以组标准差 + 1e-4（Dr. GRPO 去掉了这一步；本课按 DeepSeekMath 的 GRPO 保留它）",
        "advantages only centred, not divided by the group std + 1e-4 (Dr. GRPO drops this step; this course "
        "keeps DeepSeekMath's GRPO)"),
    "advantages_biased_std": (
        "组标准差用了有偏估计（除以 n）：约定是 torch 的默认无偏估计 std（除以 n - 1）",
        "the group std is the biased one (divided by n): the contract uses torch's default unbiased std (divided "
        "by n - 1)"),
    "advantages_no_eps": (
        "标准差没加 1e-4：一组奖励全相同时标准差为 0，优势变成 0 / 0 = NaN",
        "the std lacks its + 1e-4: when a group's rewards are all equal its std is 0 and the advantage is 0 / 0 = "
        "NaN"),
    "kl_sign_flipped": (
        "KL 惩罚的符号反了：损失是 -(surrogate - beta * kl)，KL 越大损失越大",
        "the KL penalty has the wrong sign: the loss is -(surrogate - beta * kl), a larger KL must cost more"),
    "kl_missing": (
        "没有 KL 惩罚项：GRPO 的损失要加上 beta * k3（对冻结参考模型的 KL），否则策略可以离参考模型任意远",
        "the KL penalty is missing: GRPO's loss adds beta * k3 (the KL to the frozen reference model), or nothing "
        "keeps the policy near the reference"),
    "kl_k1_estimator": (
        "KL 用了 k1 估计量 logp - ref：单个 token 上可以为负，方差大；用 k3：exp(ref - logp) - (ref - logp) - 1",
        "the KL uses the k1 estimator logp - ref: it can be negative per token and has a high variance; use k3: "
        "exp(ref - logp) - (ref - logp) - 1"),
    "kl_k2_estimator": (
        "KL 用了 k2 估计量 (logp - ref)^2 / 2：约定是 k3：exp(ref - logp) - (ref - logp) - 1",
        "the KL uses the k2 estimator (logp - ref)^2 / 2: the contract uses k3: exp(ref - logp) - (ref - logp) - 1"),
    "kl_k3_reversed": (
        "k3 的两个对数概率放反了：exp(ref - logp) - (ref - logp) - 1 估计的是 KL(策略 || 参考)，"
        "反过来估计的是另一个方向",
        "k3 with the two log-probabilities swapped: exp(ref - logp) - (ref - logp) - 1 estimates KL(policy || "
        "ref), the swapped form the other direction"),
    # dpo_loss
    "dpo_beta_outside": (
        "beta 放在了 logsigmoid 外面：应为 -logsigmoid(beta * margin)，beta 调的是隐式奖励的尺度",
        "beta sits outside the log-sigmoid: use -logsigmoid(beta * margin); beta scales the implicit reward"),
    "dpo_no_beta": (
        "漏了 beta：-logsigmoid(beta * ((pc - rc) - (pr - rr)))",
        "beta is missing: -logsigmoid(beta * ((pc - rc) - (pr - rr)))"),
    "dpo_reference_dropped": (
        "丢了参考模型的项：隐式奖励是 beta * (策略对数概率 - 参考对数概率)，不减参考就没有了约束",
        "the reference terms are dropped: the implicit reward is beta * (policy log-prob - reference log-prob); "
        "without the reference nothing holds the policy back"),
    "dpo_chosen_rejected_swapped": (
        "选中与拒绝放反了：margin = (pc - rc) - (pr - rr)，要让选中的回答胜出",
        "chosen and rejected are swapped: margin = (pc - rc) - (pr - rr), the chosen answer must win"),
    "dpo_sum_not_mean": (
        "批内求和而不是平均：损失是各对的平均值",
        "summed over the batch, not averaged: the loss is the mean over the pairs"),
    # LoRALinear
    "lora_no_scaling": (
        "LoRA 的更新没有乘 scaling = alpha / r",
        "the LoRA update is not multiplied by scaling = alpha / r"),
    "lora_scaling_inverted": (
        "缩放写反了：scaling = alpha / r，不是 r / alpha",
        "the scaling is inverted: scaling = alpha / r, not r / alpha"),
    "lora_b_not_zero": (
        "初始化时输出就变了：B 要初始化为全零，这样训练开始时 LoRA 层与底座完全相同",
        "the output changes at initialisation: B must start at zero, so that a fresh LoRA layer equals its base"),
    "lora_both_zero": (
        "A 和 B 都初始化为 0：两者的梯度都是 0，什么也学不到；A 取小随机值（Kaiming 均匀分布），B 取 0",
        "A and B both start at zero: both their gradients are zero and nothing is learned; start A small and "
        "random (Kaiming uniform), B at zero"),
    "lora_base_not_frozen": (
        "底座没有冻结：base 的参数要 requires_grad = False，只训练 A 和 B",
        "the base is not frozen: set requires_grad = False on the base's parameters; train A and B only"),
    "lora_merge_no_scaling": (
        "merge 时没有乘 scaling：并入底座的是 scaling * B @ A",
        "merge() leaves out the scaling: what goes into the base is scaling * B @ A"),
    "lora_merge_not_marked": (
        "merge 之后 forward 又加了一次 LoRA 项：合并后要记下已合并，forward 只算 base(x)",
        "after merge() the forward adds the LoRA term again: record that it is merged, then forward is base(x) "
        "alone"),
    "lora_unmerge_not_restoring": (
        "unmerge 没有把底座权重还原：要减去 merge 加进去的 scaling * B @ A",
        "unmerge() does not restore the base weight: subtract the scaling * B @ A that merge() added"),
})


# ---------------------------------------------------------------- completion_mask

def completion_mask_variants(ref, case):
    ids, prompt_len, end_id = case["ids"], case["prompt_len"], case["end_id"]
    positions = torch.arange(ids.size(1))[None, :]  # (1, T)

    def run(start=">=", search="completion", end="kept", padding="masked"):
        written = {">=": positions >= prompt_len, ">": positions > prompt_len, "none": positions >= 0}[start]
        ends = ((ids == end_id) & (written if search == "completion" else True)).long()  # (B, T)
        before = ends.cumsum(1) - ends if end == "kept" else ends.cumsum(1)
        mask = written & (before == 0) if padding == "masked" else written.expand_as(ids)
        return {"mask": mask}

    return combine([Bug("mask_end_excluded", dict(end="dropped")), Bug("mask_padding_kept", dict(padding="kept")),
                    Bug("mask_prompt_kept", dict(start="none")), Bug("mask_prompt_off_by_one", dict(start=">")),
                    Bug("mask_end_searched_in_prompt", dict(search="everywhere"))], run)


def _mask_rule(case, expected, got):
    """An integer 0/1 mask with every position right is ``completion_mask_not_bool``."""
    mask = got.get("mask")
    if isinstance(mask, torch.Tensor) and mask.dtype != torch.bool and mask.shape == expected["mask"].shape \
            and not mask.dtype.is_floating_point and torch.equal(mask != 0, expected["mask"]) and mask.abs().max() <= 1:
        return "completion_mask_not_bool"
    return None


def _completion_mask_cases():
    end = 0
    ids = torch.tensor([[5, 6, 7, 3, 4, 0, 2, 0, 1],   # ends inside the completion, padding after it
                        [5, 0, 7, 3, 4, 2, 1, 3, 4],   # an end token in the prompt only: True to the end
                        [5, 6, 7, 0, 4, 0, 2, 0, 1],   # ends at the completion's first column
                        [5, 6, 7, 3, 4, 2, 1, 3, 0]])  # ends at the last column
    g = torch.Generator().manual_seed(60)
    random_ids = torch.randint(0, 4, (6, 12), generator=g)
    return [Case("4 行、prompt_len=3、end_id=0 / 4 rows, prompt_len=3, end_id=0", {"ids": ids},
                 {"prompt_len": 3, "end_id": end}),
            Case("随机 / random ids, prompt_len=5, end_id=1", {"ids": random_ids}, {"prompt_len": 5, "end_id": 1}),
            Case("无提示 / no prompt, prompt_len=0, end_id=2", {"ids": random_ids}, {"prompt_len": 0, "end_id": 2})]


# ---------------------------------------------------------------- completion_logprobs

class TinyLM(nn.Module):
    """A small causal language model for the checks: embeddings, a running sum over time, a projection."""

    def __init__(self, vocab_size, d, generator):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d)
        self.proj = nn.Linear(d, vocab_size)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))

    def forward(self, ids):
        h = torch.tanh(self.embed(ids).cumsum(dim=1))  # (B, T, d): token t sees tokens 0..t
        return self.proj(h)  # (B, T, d) -> (B, T, V)


def _model(case):
    return TinyLM(case["vocab_size"], 6, torch.Generator().manual_seed(case["model_seed"])).double()


def _weights(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _logprobs_call(f, case, _):
    model = _model(case)
    out = f(model, case["ids"].clone(), case["mask"].clone())
    grad = torch.zeros_like(model.embed.weight)
    if isinstance(out, torch.Tensor) and out.requires_grad:
        (out * _weights(out.shape, 1)).sum().backward()
        grad = model.embed.weight.grad if model.embed.weight.grad is not None else grad
    return out, grad


def completion_logprobs_variants(ref, case):
    ids, mask = case["ids"], case["mask"]

    @torch.enable_grad()  # the variants run under no_grad; their gradients are outputs
    def run(shift="both", columns="1:", masked=True, dim=-1, graph=True):
        model = _model(case)
        logits = model(ids)  # (B, T, V)
        if shift == "both":
            logp = F.log_softmax(logits[:, :-1], dim=dim)  # (B, T-1, V)
            targets = ids[:, 1:]
        elif shift == "logits":  # logits not shifted, targets shifted
            logp, targets = F.log_softmax(logits[:, 1:], dim=dim), ids[:, 1:]
        else:  # targets not shifted
            logp, targets = F.log_softmax(logits[:, :-1], dim=dim), ids[:, :-1]
        out = logp.gather(-1, targets[..., None]).squeeze(-1)  # (B, T-1)
        keep = mask[:, 1:] if columns == "1:" else mask[:, :-1]
        if masked:
            out = torch.where(keep, out, torch.zeros_like(out))
        if not graph:
            return {"logprobs": out.detach(), "grad embed": torch.zeros_like(model.embed.weight)}
        (out * _weights(out.shape, 1)).sum().backward()
        return {"logprobs": out.detach(), "grad embed": model.embed.weight.grad}

    return combine([Bug("logprobs_not_shifted", dict(shift="logits")),
                    Bug("logprobs_not_shifted", dict(shift="targets")),
                    Bug("logprobs_mask_off_by_one", dict(columns=":-1")),
                    Bug("logprobs_not_masked", dict(masked=False)),
                    Bug("logprobs_wrong_dim", dict(dim=1)),
                    Bug("logprobs_detached", dict(graph=False))], run)


def _completion_logprobs_cases():
    ids = torch.tensor([[3, 4, 5, 6, 1, 0, 2, 2],
                        [3, 4, 7, 7, 6, 5, 4, 1],
                        [3, 4, 1, 2, 2, 2, 2, 2]])
    mask = torch.tensor([[False, False, True, True, True, False, False, False],
                         [False, False, True, True, True, True, True, True],
                         [False, False, True, False, False, False, False, False]])
    g = torch.Generator().manual_seed(61)
    random_ids = torch.randint(0, 11, (4, 10), generator=g)
    return [Case("3 行、提示 2 个 token、词表 8 / 3 rows, a 2-token prompt, vocabulary 8",
                 {"ids": ids, "mask": mask}, {"vocab_size": 8, "model_seed": 62}),
            Case("随机 / random ids, vocabulary 11, a 4-token prompt",
                 {"ids": random_ids, "mask": torch.arange(10)[None, :].expand(4, 10) >= 4},
                 {"vocab_size": 11, "model_seed": 63})]


# ---------------------------------------------------------------- ppo_clip_loss and grpo_loss

def _leaves(case, names):
    return {n: case[n].detach().clone().requires_grad_(True) for n in names}


def _loss_and_grads(loss, leaves):
    """The loss, then the gradient of the loss in each leaf (zeros where none reaches it)."""
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
    return (loss, *[leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves.values()])


def _surrogate_loss(logp, old, advantages, mask, eps, clip="both", pick="min", ratio="new/old", sign=-1,
                    mean="sequence"):
    """The clipped surrogate with one switch per known mistake; the loss sign, then the averaging."""
    adv = advantages[:, None] if advantages.dim() == 1 else advantages  # (B,) -> (B, 1)
    r = {"new/old": lambda: torch.exp(logp - old), "old/new": lambda: torch.exp(old - logp),
         "self": lambda: torch.exp(logp - logp.detach())}[ratio]()  # "self": 1, with logp's gradient
    low, high = (1 - eps if clip in ("both", "lower") else None), (1 + eps if clip in ("both", "upper") else None)
    clipped = torch.clamp(r, low, high)
    surrogate = (torch.minimum if pick == "min" else torch.maximum)(r * adv, clipped * adv)  # (B, T-1)
    return sign * _average(surrogate, mask, mean)


def _average(per_token, mask, mean):
    w = mask.to(per_token.dtype)
    if mean == "token":
        return (per_token * w).sum() / w.sum()
    if mean == "all":
        return per_token.mean()
    if mean == "sum":
        return (per_token * w).sum(1).mean()
    return ((per_token * w).sum(1) / w.sum(1).clamp(min=1)).mean()


PPO_BUGS = [Bug("clip_one_side", dict(clip="upper")), Bug("clip_one_side", dict(clip="lower")),
            Bug("clip_max_not_min", dict(pick="max")), Bug("ratio_inverted", dict(ratio="old/new")),
            Bug("policy_loss_not_negated", dict(sign=1)), Bug("loss_token_mean", dict(mean="token")),
            Bug("loss_mask_ignored", dict(mean="all")), Bug("loss_sequence_sum", dict(mean="sum")),
            Bug("ratio_old_ignored", dict(ratio="self"))]


def ppo_clip_loss_variants(ref, case):
    @torch.enable_grad()
    def run(**switches):
        leaves = _leaves(case, ("logprobs",))
        loss = _surrogate_loss(leaves["logprobs"], case["old_logprobs"], case["advantages"], case["mask"],
                               case["clip_eps"], **switches)
        return dict(zip(("loss", "grad logprobs"), _loss_and_grads(loss, leaves)))

    return combine(PPO_BUGS, run)


def _ppo_call(f, case, _):
    leaves = _leaves(case, ("logprobs",))
    return _loss_and_grads(f(leaves["logprobs"], case["old_logprobs"].clone(), case["advantages"].clone(),
                             case["mask"].clone(), case["clip_eps"]), leaves)


def _logprob_inputs(g, B, T1):
    """Policy, old-policy and reference log-probabilities far enough apart that both clip bounds act."""
    logp = -3 * torch.rand(B, T1, generator=g, dtype=torch.float64)
    old = logp + 0.5 * randn(g, B, T1)
    ref = logp + 0.5 * randn(g, B, T1)
    mask = torch.arange(T1)[None, :].expand(B, T1) >= 1  # a one-token prompt
    lengths = torch.randint(2, T1 + 1, (B,), generator=g)
    mask = mask & (torch.arange(T1)[None, :] < lengths[:, None])  # padding after each row's end
    return {"logprobs": logp, "old_logprobs": old, "ref_logprobs": ref, "mask": mask}


def _ppo_cases():
    g = torch.Generator().manual_seed(64)
    row = _logprob_inputs(g, 5, 7)
    token = _logprob_inputs(g, 4, 6)
    return [Case("每行一个优势 / one advantage per row (B,), eps=0.2",
                 {**row, "advantages": torch.tensor([1.5, -0.7, 0.3, -2.0, 0.9], dtype=torch.float64)},
                 {"clip_eps": 0.2}),
            Case("每个 token 一个优势 / one advantage per token (B, T-1), eps=0.1",
                 {**token, "advantages": randn(g, 4, 6)}, {"clip_eps": 0.1})]


GRPO_LEAVES = ("logprobs",)


@torch.enable_grad()
def grpo_run(case, scope="group", scale="std", unbiased=True, eps=1e-4, kl="k3",
             kl_sign=1, **surrogate):
    """GRPO with one switch per known mistake: the loss and its gradient in the policy's log-probabilities."""
    leaves = _leaves(case, GRPO_LEAVES)
    logp, ref = leaves["logprobs"], case["ref_logprobs"]
    rewards, G = case["rewards"], case["group_size"]
    grouped = rewards.view(-1, G) if scope == "group" else rewards.view(1, -1)  # (n_groups, G) or (1, B)
    centred = grouped - grouped.mean(1, keepdim=True)
    adv = centred / (grouped.std(1, keepdim=True, unbiased=unbiased) + eps) if scale == "std" else centred
    adv = adv.reshape(-1)  # (n_groups, G) -> (B,)
    d = ref - logp  # (B, T-1): log(ref / policy)
    kl_token = {"k3": torch.exp(d) - d - 1, "k1": -d, "k2": d ** 2 / 2, "k3_reversed": torch.exp(-d) + d - 1,
                "none": torch.zeros_like(d)}[kl]
    policy = _surrogate_loss(logp, case["old_logprobs"], adv, case["mask"], case["clip_eps"], **surrogate)
    mean = surrogate.get("mean", "sequence")
    loss = policy + kl_sign * case["beta"] * _average(kl_token, case["mask"], mean)
    return dict(zip(("loss", "grad logprobs"), _loss_and_grads(loss, leaves)))


GRPO_BUGS = [Bug("advantages_whole_batch", dict(scope="batch")),
             Bug("advantages_not_scaled", dict(scale="none")),
             Bug("advantages_biased_std", dict(unbiased=False)),
             Bug("advantages_no_eps", dict(eps=0.0)),
             Bug("kl_sign_flipped", dict(kl_sign=-1)),
             Bug("kl_missing", dict(kl="none")),
             Bug("kl_k1_estimator", dict(kl="k1")), Bug("kl_k2_estimator", dict(kl="k2")),
             Bug("kl_k3_reversed", dict(kl="k3_reversed")),
             *PPO_BUGS]


def grpo_loss_variants(ref, case):
    return combine(GRPO_BUGS, lambda **switches: grpo_run(case, **switches))


def _grpo_call(f, case, _):
    leaves = _leaves(case, GRPO_LEAVES)
    loss = f(leaves["logprobs"], case["old_logprobs"].clone(), case["ref_logprobs"].clone(), case["rewards"].clone(),
             case["mask"].clone(), case["group_size"], case["clip_eps"], case["beta"])
    return _loss_and_grads(loss, leaves)


def _grpo_cases():
    # every unequal group's std is at least 35, so that the epsilon added to it (1e-4 here; 1e-6, 1e-8 and
    # 1e-9 are in use too) moves the advantages by under 3e-6, below the tolerance; one group of equal rewards
    # needs the epsilon (0 / 0 otherwise)
    g = torch.Generator().manual_seed(65)
    return [Case("3 组 x 2 个样本 / 3 groups of 2 samples, eps=0.2, beta=0.1",
                 {**_logprob_inputs(g, 6, 7),
                  "rewards": torch.tensor([100.0, 0.0, 30.0, 90.0, 60.0, 10.0], dtype=torch.float64)},
                 {"group_size": 2, "clip_eps": 0.2, "beta": 0.1}),
            Case("2 组 x 4 个样本，其中一组奖励全相同 / 2 groups of 4, one with equal rewards, eps=0.1, beta=0.5",
                 {**_logprob_inputs(g, 8, 6),
                  "rewards": torch.tensor([0.0, 100.0, 100.0, 20.0, 70.0, 70.0, 70.0, 70.0], dtype=torch.float64)},
                 {"group_size": 4, "clip_eps": 0.1, "beta": 0.5}),
            Case("3 组 x 3 个样本 / 3 groups of 3, eps=0.3, beta=0.04",
                 {**_logprob_inputs(g, 9, 5),
                  "rewards": torch.tensor([10.0, 80.0, 35.0, 0.0, 0.0, 100.0, 60.0, 20.0, 90.0],
                                          dtype=torch.float64)},
                 {"group_size": 3, "clip_eps": 0.3, "beta": 0.04})]


# ---------------------------------------------------------------- dpo_loss

DPO_INPUTS = ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
DPO_LEAVES = DPO_INPUTS[:2]  # gradients flow into the policy's log-probabilities only


def dpo_loss_variants(ref, case):
    @torch.enable_grad()
    def run(beta="inside", reference=True, order="chosen", reduce="mean"):
        leaves = _leaves(case, DPO_LEAVES)
        pc, pr = leaves.values()
        rc, rr = case["ref_chosen"], case["ref_rejected"]
        chosen, rejected = (pc - rc, pr - rr) if reference else (pc, pr)
        margin = chosen - rejected if order == "chosen" else rejected - chosen
        b = case["beta"]
        per_pair = {"inside": -F.logsigmoid(b * margin), "outside": -b * F.logsigmoid(margin),
                    "none": -F.logsigmoid(margin)}[beta]
        loss = per_pair.mean() if reduce == "mean" else per_pair.sum()
        return dict(zip(("loss", *[f"grad {n}" for n in DPO_LEAVES]), _loss_and_grads(loss, leaves)))

    return combine([Bug("dpo_beta_outside", dict(beta="outside")), Bug("dpo_no_beta", dict(beta="none")),
                    Bug("dpo_reference_dropped", dict(reference=False)),
                    Bug("dpo_chosen_rejected_swapped", dict(order="rejected")),
                    Bug("dpo_sum_not_mean", dict(reduce="sum"))], run)


def _dpo_call(f, case, _):
    leaves = _leaves(case, DPO_LEAVES)
    return _loss_and_grads(f(*leaves.values(), case["ref_chosen"].clone(), case["ref_rejected"].clone(), case["beta"]),
                           leaves)


def _dpo_cases():
    g = torch.Generator().manual_seed(66)

    def pairs(B, spread):
        return {n: -20 + spread * randn(g, B) for n in DPO_INPUTS}

    return [Case("4 对、beta=0.1 / 4 pairs, beta=0.1", pairs(4, 5.0), {"beta": 0.1}),
            Case("6 对、beta=0.5 / 6 pairs, beta=0.5", pairs(6, 2.0), {"beta": 0.5})]


# ---------------------------------------------------------------- LoRALinear

LORA_OUTPUTS = ("output", "grad A", "grad B", "change at init", "A or B nonzero at init", "base frozen",
                "trainable parameters", "merged weight", "merged output", "unmerged weight", "output after unmerge")


def _lora_base(case):
    base = nn.Linear(case["W"].size(1), case["W"].size(0)).double()
    with torch.no_grad():
        base.weight.copy_(case["W"])
        base.bias.copy_(case["b"])
    return base


def _lora_call(cls, case, _):
    base, x = _lora_base(case), case["x"]
    torch.manual_seed(0)
    layer = cls(base, case["r"], case["alpha"])
    with torch.no_grad():
        change = layer(x) - F.linear(x, case["W"], case["b"])  # B = 0: no change at init
    nonzero = torch.tensor(bool(layer.A.detach().abs().sum() + layer.B.detach().abs().sum() > 0))
    frozen = torch.tensor([not p.requires_grad for p in base.parameters()])
    trainable = torch.tensor(sum(p.numel() for p in layer.parameters() if p.requires_grad))
    with torch.no_grad():
        layer.A.copy_(case["A"])
        layer.B.copy_(case["B"])
    out = layer(x)
    (out * _weights(out.shape, 2)).sum().backward()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in (layer.A, layer.B)]
    with torch.no_grad():
        layer.merge()
        merged_weight, merged_out = base.weight.detach().clone(), layer(x)
        layer.unmerge()
        unmerged_weight, after = base.weight.detach().clone(), layer(x)
    return (out.detach(), *grads, change, nonzero, frozen, trainable, merged_weight, merged_out, unmerged_weight,
            after)


def lora_variants(ref, case):
    W, b, A, B, x, r, alpha = (case[k] for k in ("W", "b", "A", "B", "x", "r", "alpha"))
    s = alpha / r

    @torch.enable_grad()
    def lora(scale):
        leaves = {"A": A.clone().requires_grad_(True), "B": B.clone().requires_grad_(True)}
        out = F.linear(x, W, b) + scale * (x @ leaves["A"].T) @ leaves["B"].T  # (..., in) @ (in, r) @ (r, out)
        (out * _weights(out.shape, 2)).sum().backward()
        return {"output": out.detach(), "grad A": leaves["A"].grad, "grad B": leaves["B"].grad}

    def full(forward_scale=s, merge_scale=s, marked=True, restores=True, **init):
        """Every output of a layer with these bugs (the init outputs as the contract's unless given)."""
        lora_x = (x @ A.T) @ B.T  # (..., in) @ (in, r) @ (r, out) -> (..., out)
        weight = W + merge_scale * B @ A  # (out, r) @ (r, in) -> (out, in)
        merged_out = F.linear(x, weight, b) + (0 if marked else forward_scale * lora_x)
        forward = lora(forward_scale)
        return {**forward, "change at init": torch.zeros_like(forward["output"]),
                "A or B nonzero at init": torch.tensor(True), "base frozen": torch.tensor([True, True]),
                "trainable parameters": torch.tensor(r * sum(W.shape)), "merged weight": weight,
                "merged output": merged_out, "unmerged weight": W if restores else weight,
                "output after unmerge": forward["output"] if restores else
                F.linear(x, weight, b) + forward_scale * lora_x, **init}

    return [wrong("lora_no_scaling", lambda: full(1.0, 1.0)),
            wrong("lora_scaling_inverted", lambda: full(r / alpha, r / alpha)),
            wrong("lora_merge_no_scaling", lambda: full(merge_scale=1.0)),
            wrong("lora_merge_not_marked", lambda: full(marked=False)),
            wrong("lora_unmerge_not_restoring", lambda: full(restores=False)),
            wrong("lora_both_zero", lambda: full(**{"A or B nonzero at init": torch.tensor(False)})),
            wrong("lora_base_not_frozen", lambda: full(**{"base frozen": torch.tensor([False, False]),
                                                        "trainable parameters": torch.tensor(
                                                            r * sum(W.shape) + W.numel() + b.numel())})),
            wrong("lora_base_not_frozen", lambda: full(**{"base frozen": torch.tensor([True, False]),  # bias trains
                                                        "trainable parameters": torch.tensor(
                                                            r * sum(W.shape) + b.numel())}))]


def _lora_rule(case, expected, got):
    change = got.get("change at init")
    if isinstance(change, torch.Tensor) and change.shape == expected["change at init"].shape and \
            change.abs().max() > 1e-9:
        return "lora_b_not_zero"
    return None


def _lora_cases():
    g = torch.Generator().manual_seed(67)

    def case(label, d_in, d_out, r, alpha, lead):
        return Case(label, {"x": randn(g, *lead, d_in)},
                    {"W": randn(g, d_out, d_in, scale=0.5), "b": randn(g, d_out), "A": randn(g, r, d_in, scale=0.5),
                     "B": randn(g, d_out, r, scale=0.5), "r": r, "alpha": alpha})

    return [case("in=6, out=4, r=2, alpha=8, x (3, 6)", 6, 4, 2, 8, (3,)),
            case("默认 / defaults r=4, alpha=8, x (2, 5, 7)", 7, 5, 4, 8, (2, 5)),
            case("in=5, out=9, r=3, alpha=1, x (4, 5)", 5, 9, 3, 1, (4,))]


# ---------------------------------------------------------------- the checks

FunctionCheck("completion_mask", cases=_completion_mask_cases, outputs=("mask",),
              variants=completion_mask_variants,
              call=lambda f, case, _: f(case["ids"].clone(), case["prompt_len"], case["end_id"]), rule=_mask_rule,
              mistakes=("mask_end_excluded", "mask_padding_kept", "mask_prompt_kept", "mask_prompt_off_by_one",
                        "mask_end_searched_in_prompt", "completion_mask_not_bool"))

FunctionCheck("completion_logprobs", cases=_completion_logprobs_cases, outputs=("logprobs", "grad embed"),
              variants=completion_logprobs_variants, call=_logprobs_call,
              mistakes=("logprobs_not_shifted", "logprobs_mask_off_by_one", "logprobs_not_masked",
                        "logprobs_wrong_dim", "logprobs_detached"))

FunctionCheck("ppo_clip_loss", cases=_ppo_cases, outputs=("loss", "grad logprobs"),
              variants=ppo_clip_loss_variants, call=_ppo_call,
              mistakes=("clip_one_side", "clip_max_not_min", "ratio_inverted", "policy_loss_not_negated",
                        "loss_token_mean", "loss_mask_ignored", "loss_sequence_sum", "ratio_old_ignored"))

FunctionCheck("grpo_loss", cases=_grpo_cases, outputs=("loss", "grad logprobs"),
              variants=grpo_loss_variants, call=_grpo_call,
              mistakes=("advantages_whole_batch", "advantages_not_scaled",
                        "advantages_biased_std", "advantages_no_eps", "kl_sign_flipped", "kl_missing",
                        "kl_k1_estimator", "kl_k2_estimator", "kl_k3_reversed", "clip_one_side",
                        "clip_max_not_min", "loss_token_mean", "loss_sequence_sum", "ratio_old_ignored"))

FunctionCheck("dpo_loss", cases=_dpo_cases, outputs=("loss", *[f"grad {n}" for n in DPO_LEAVES]),
              variants=dpo_loss_variants, call=_dpo_call,
              mistakes=("dpo_beta_outside", "dpo_no_beta", "dpo_reference_dropped", "dpo_chosen_rejected_swapped",
                        "dpo_sum_not_mean"))

FunctionCheck("LoRALinear", cases=_lora_cases, outputs=LORA_OUTPUTS, variants=lora_variants, call=_lora_call,
              rule=_lora_rule,
              mistakes=("lora_no_scaling", "lora_scaling_inverted", "lora_b_not_zero", "lora_both_zero",
                        "lora_base_not_frozen", "lora_merge_no_scaling", "lora_merge_not_marked",
                        "lora_unmerge_not_restoring"))
