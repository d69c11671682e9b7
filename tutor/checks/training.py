"""Checks of chapter 08's training pieces (``solutions/training.py``): the warmup + cosine learning-rate
schedule, gradient clipping by global norm and AdamW's update.

Every case runs in float64. The references are themselves proven against PyTorch
(``SequentialLR(LinearLR, CosineAnnealingLR)``, ``torch.nn.utils.clip_grad_norm_``,
``torch.optim.AdamW``) in tests/test_reference_llm.py.
"""
import math

import torch

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes, say
from ..engine.running import randn
from ..engine.specs import Bug, Case, Failure, FunctionCheck, wrong

MISTAKES = define_mistakes({
    "lr_warmup_off_by_one": (
        "预热多了一步：第 warmup 步还在预热（step <= warmup），学习率升到 max_lr * (warmup + 1) / warmup，"
        "超过了峰值；预热只占 step < warmup 的那 warmup 步，之后从 max_lr 开始余弦衰减",
        "warmup one step too long: step warmup still warms up (step <= warmup) and reaches max_lr * (warmup + 1) "
        "/ warmup, above the peak; the warmup is the steps with step < warmup, then the cosine starts at max_lr",
    ),
    "lr_cosine_ignores_min_lr": (
        "余弦衰减到了 0，没有停在 min_lr：应为 min_lr + (max_lr - min_lr) * (1 + cos) / 2",
        "the cosine decays to 0 instead of min_lr: use min_lr + (max_lr - min_lr) * (1 + cos) / 2",
    ),
    "lr_cosine_from_step_zero": (
        "余弦的进度从第 0 步算起（step / max_steps）：应从预热结束算起，progress = (step - "
        "warmup) / (max_steps - warmup)，预热刚结束时学习率是 max_lr",
        "the cosine's progress counts from step 0 (step / max_steps): count it from the end of the warmup, "
        "(step - warmup) / (max_steps - warmup), so the decay starts at max_lr",
    ),
    "clip_per_parameter": (
        "每个参数各自按自己的范数裁剪：应把所有梯度当作一个向量算全局范数，再让所有梯度乘同一个系数（否则更新的方向变了）",
        "each parameter clipped by its own norm: take the global norm of all gradients as one vector and "
        "scale every gradient by the same factor (else the update changes direction)",
    ),
    "clip_always_rescales": (
        "范数小于 max_norm 时也缩放了（把梯度放大到 max_norm）：只有总范数超过 max_norm 时才裁剪",
        "gradients rescaled even when their norm is below max_norm (scaled up to max_norm): clip only when "
        "the total norm exceeds max_norm",
    ),
    "clip_returns_clipped_norm": (
        "返回的是裁剪之后的范数：应返回裁剪之前的总范数（训练日志要看的是它）",
        "returns the norm after clipping: return the total norm before clipping (what a training log needs to"
        " show)",
    ),
    "clip_generator_consumed": (
        "parameters 是生成器（model.parameters()），只能遍历一次：算范数时已经遍历完，缩放时一个梯度"
        "都没拿到；先 list(parameters)",
        "parameters is a generator (model.parameters()) and can be gone through once: the norm used it up, "
        "the scaling saw no gradient; take list(parameters) first",
    ),
    "clip_no_sqrt": (
        "总范数少了开方：sum(g ** 2) 是范数的平方",
        "the total norm lacks its square root: sum(g ** 2) is the squared norm",
    ),
    "adamw_l2_in_gradient": (
        "权重衰减加进了梯度（g + weight_decay * p，即 Adam 的 L2 正则）：AdamW 的衰减是解"
        "耦的，直接 p -= lr * weight_decay * p，不进 m 和 v（否则梯度大的参数几乎不衰减）",
        "weight decay added to the gradient (g + weight_decay * p: Adam with L2): AdamW's decay is "
        "decoupled, p -= lr * weight_decay * p, never entering m and v (else parameters with large "
        "gradients barely decay)",
    ),
    "adamw_no_bias_correction": (
        "没有偏差修正：m、v 从 0 开始，前几步偏小；应除以 1 - beta1 ** t 和 1 - beta2 ** t（"
        "t 从 1 数）",
        "no bias correction: m and v start at 0 and are too small early on; divide by 1 - beta1 ** t and 1 - "
        "beta2 ** t (t counted from 1)",
    ),
    "adamw_decay_without_lr": (
        "权重衰减没有乘学习率（p -= weight_decay * p）：PyTorch 的 AdamW 是 p -= lr "
        "* weight_decay * p，学习率调度也作用在衰减上",
        "weight decay not multiplied by the learning rate (p -= weight_decay * p): PyTorch's AdamW uses p -= "
        "lr * weight_decay * p, so the schedule scales the decay too",
    ),
    "clip_returns_none": (
        "没有返回范数（返回了 None）：契约要 clip_grad_norm 返回裁剪之前的总范数（float），训练日志要看它",
        "no norm returned (None): the contract's clip_grad_norm returns the total norm before clipping (a float), "
        "which a training log shows",
    ),
    "adamw_eps_uncorrected_v": (
        "eps 加在了未修正的 sqrt(v) 上（Adam 论文的“高效”写法：步长 lr * sqrt(1 - beta2^t) / (1 - beta1^t)，"
        "分母 sqrt(v) + eps）：契约和 torch.optim.AdamW 是 sqrt(v_hat) + eps，v_hat = v / (1 - beta2^t)；"
        "前几步或梯度很小时两者差很多",
        "eps added to the uncorrected sqrt(v) (the Adam paper's \"efficient\" form: step lr * sqrt(1 - beta2^t) / "
        "(1 - beta1^t), denominator sqrt(v) + eps): the contract and torch.optim.AdamW use sqrt(v_hat) + eps "
        "with v_hat = v / (1 - beta2^t); they differ a lot early on or when gradients are small",
    ),
    "adamw_decay_after_update": (
        "权重衰减放在了 Adam 更新之后（先 p -= lr * m_hat / (sqrt(v_hat) + eps)，再 p -= lr * wd * p）："
        "契约和 torch.optim.AdamW 先衰减 p *= 1 - lr * wd，再用衰减后的 p 做 Adam 更新",
        "weight decay applied after the Adam update (p -= lr * m_hat / (sqrt(v_hat) + eps), then p -= lr * wd "
        "* p): the contract and torch.optim.AdamW decay first, p *= 1 - lr * wd, then apply the Adam update",
    ),
    "adamw_grad_none_crash": (
        "遇到 .grad 为 None 的参数就出错了：没有梯度的参数（冻结的、这一步没用到的）要跳过，"
        "if p.grad is None: continue",
        "crashes on a parameter whose .grad is None: skip parameters without a gradient (frozen, or unused "
        "this step), if p.grad is None: continue",
    ),
    "adamw_not_an_optimizer": (
        "AdamW 不是 torch.optim.Optimizer 的子类：学习率调度器（LambdaLR 等）不接受它，参数组也无从说起；"
        "契约和 PyTorch、CS336 一样写 class AdamW(torch.optim.Optimizer)，在 __init__ 里 "
        "super().__init__(params, defaults)，step() 遍历 self.param_groups",
        "AdamW is not a torch.optim.Optimizer subclass: learning-rate schedulers (LambdaLR, ...) refuse it and it "
        "has no param groups; the contract, as PyTorch and CS336, is class AdamW(torch.optim.Optimizer) with "
        "super().__init__(params, defaults) in __init__ and step() going through self.param_groups",
    ),
    "adamw_lr_ignored": (
        "学习率没有从参数组里读（group[\"lr\"]）：step() 一直用构造时的 lr，调度器（LambdaLR）或训练循环"
        "每步设的学习率、参数组自己的 lr 都被忽略了；每一步都在 for group in self.param_groups 里读 group[\"lr\"]",
        "lr ignored, not read from the group (group[\"lr\"]): step() keeps the lr given at construction, so the "
        "lr a scheduler (LambdaLR) or the training loop sets each step, and a group's own lr, are lost; read "
        "group[\"lr\"] inside for group in self.param_groups at every step",
    ),
    "adamw_group_decay_ignored": (
        "weight_decay 没有从参数组里读：每个参数组都用了构造时的 weight_decay（例如 self.defaults），"
        "参数组 {\"weight_decay\": 0.0} 里不该衰减的参数也被衰减了；用 group[\"weight_decay\"]",
        "weight_decay not read from the group: every param group used the constructor's weight_decay (e.g. "
        "self.defaults), so a group with {\"weight_decay\": 0.0} was decayed too; use group[\"weight_decay\"]",
    ),
    "adamw_eps_inside_sqrt": (
        "eps 放进了开方里（sqrt(v_hat + eps)）：应为 sqrt(v_hat) + eps；梯度很小时两者差很"
        "多",
        "eps inside the square root (sqrt(v_hat + eps)): use sqrt(v_hat) + eps; they differ a lot when "
        "gradients are small",
    ),
    "adamw_shared_step": (
        "步数 t 是整个优化器共用的一个计数（每次 step() 加 1）：偏差修正用每个参数自己的步数（和 m、v 一起存在 "
        "self.state[p] 里），某一步没有梯度而被跳过的参数，这一步不计数",
        "the step count t is one counter for the whole optimizer (one per step() call): bias correction uses each "
        "parameter's own count (kept in self.state[p] beside m and v); a parameter skipped for having no gradient "
        "does not count that step",
    ),
})


# ---------------------------------------------------------------- warmup_cosine_lr

def _lr_values(fn, case):
    values = [fn(s, case["max_lr"], case["warmup_steps"], case["max_steps"], case["min_lr"])
              for s in range(case["max_steps"])]
    return torch.tensor([float(v) for v in values], dtype=torch.float64)  # (max_steps,)


def _lr_call(fn, case, _):
    """The learner's schedule, every step. Two warmup conventions are right: ``max_lr * (step + 1) / W``
    (the reference, PyTorch's ``LinearLR(start_factor=1/W)``) and ``max_lr * step / W`` (Hugging Face's
    ``get_cosine_schedule_with_warmup``, the CS336 handout, litgpt, timm, torchtune); a warmup written the
    second way is compared as the first, so the rest of the schedule is still checked step by step."""
    values = _lr_values(fn, case)
    warmup = min(case["warmup_steps"], case["max_steps"])
    steps = torch.arange(warmup, dtype=torch.float64)  # (W,)
    if warmup and torch.allclose(values[:warmup], case["max_lr"] * steps / case["warmup_steps"], rtol=1e-9, atol=0.0):
        values = values.clone()
        values[:warmup] = case["max_lr"] * (steps + 1) / case["warmup_steps"]
    return values


def lr_variants(ref, case):
    max_lr, warmup, total, min_lr = (case[k] for k in ("max_lr", "warmup_steps", "max_steps", "min_lr"))

    def run(low=min_lr, from_zero=False, one_step_long=False):
        def lr(step, *_):
            if step < warmup or (one_step_long and step == warmup):
                return max_lr * (step + 1) / warmup
            progress = step / total if from_zero else (step - warmup) / max(1, total - warmup)
            return low + (max_lr - low) * 0.5 * (1 + math.cos(math.pi * progress))
        return {"lrs": _lr_values(lr, case)}

    return [wrong("lr_warmup_off_by_one", lambda: run(one_step_long=True)),
            wrong("lr_cosine_ignores_min_lr", lambda: run(low=0.0)),
            wrong("lr_cosine_from_step_zero", lambda: run(from_zero=True))]


def _lr_cases():
    keys = ("max_lr", "warmup_steps", "max_steps", "min_lr")
    return [Case(", ".join(f"{k}={v}" for k, v in zip(keys, values)) + "，每一步 / every step", {},
                 dict(zip(keys, values)))
            for values in ((1e-3, 10, 50, 1e-4), (5e-3, 20, 600, 5e-4), (1.0, 1, 5, 0.0), (3e-4, 4, 12, 0.0))]


# ---------------------------------------------------------------- clip_grad_norm

def _clip_call(f, case, _):
    params = [torch.zeros(g.shape if g is not None else (2,), dtype=torch.float64, requires_grad=True)
              for g in case["grads"]]
    for p, g in zip(params, case["grads"]):
        p.grad = None if g is None else g.clone()
    norm = f(iter(params) if case["generator"] else params, case["max_norm"])
    return torch.cat([p.grad.flatten() for p in params if p.grad is not None]), norm  # (total numel,), norm


def clip_variants(ref, case):
    grads = [g for g in case["grads"] if g is not None]
    max_norm = case["max_norm"]
    total = math.sqrt(sum(float((g ** 2).sum()) for g in grads))

    def scaled(factors):
        return torch.cat([(g * s).flatten() for g, s in zip(grads, factors)])  # (total numel,)

    def clip(norm):
        return [min(1.0, max_norm / (norm + 1e-6))] * len(grads)

    per_parameter = [min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]
    found = [wrong("clip_per_parameter", lambda: {"grads": scaled(per_parameter)}),
             wrong("clip_always_rescales", lambda: {"grads": scaled([max_norm / (total + 1e-6)] * len(grads))}),
             wrong("clip_returns_clipped_norm", lambda: {"norm": total * clip(total)[0]}),
             wrong("clip_no_sqrt", lambda: {"grads": scaled(clip(total ** 2)), "norm": total ** 2})]
    if case["generator"]:
        found.append(wrong("clip_generator_consumed", lambda: {"grads": scaled([1.0] * len(grads)), "norm": total}))
    return found


def _clip_cases():
    g = torch.Generator().manual_seed(48)
    return [Case("3 个参数、总范数约 5 > max_norm=1 / 3 tensors, total norm ~5 > max_norm=1",
                 {}, {"grads": [randn(g, 4, 3), randn(g, 5), randn(g, 2, 2, 2)], "max_norm": 1.0,
                      "generator": False}),
            Case("一个参数的梯度远大于其他 / one gradient much larger than the others, max_norm=1",
                 {}, {"grads": [randn(g, 3, 3, scale=2.0), randn(g, 4, scale=0.05)], "max_norm": 1.0,
                      "generator": False}),
            Case("总范数小于 max_norm=10：不变 / total norm below max_norm=10: unchanged",
                 {}, {"grads": [randn(g, 3, 2), randn(g, 6)], "max_norm": 10.0, "generator": False}),
            Case("参数是生成器（model.parameters()），其中一个没有梯度 / a generator of parameters, one without .grad",
                 {}, {"grads": [randn(g, 2, 5), None, randn(g, 7, scale=3.0)], "max_norm": 0.5,
                      "generator": True})]


# ---------------------------------------------------------------- AdamW

ADAMW_DEFAULTS = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
ADAMW_BUGS = [Bug("adamw_l2_in_gradient", dict(l2=True)), Bug("adamw_no_bias_correction", dict(corrected=False)),
              Bug("adamw_decay_without_lr", dict(decay_lr=False)), Bug("adamw_eps_inside_sqrt", dict(eps="inside")),
              Bug("adamw_eps_uncorrected_v", dict(eps="uncorrected")),
              Bug("adamw_decay_after_update", dict(decay_after=True)),
              Bug("adamw_lr_ignored", dict(lr_from_group=False)),
              Bug("adamw_group_decay_ignored", dict(decay_from_group=False)),
              Bug("adamw_shared_step", dict(shared_step=True))]


def _adamw_groups(case, params):
    """What the case hands the constructor: the tensors, or param-group dicts of them."""
    if case["groups"] is None:
        return params
    return [{**group, "params": [params[i] for i in group["params"]]} for group in case["groups"]]


def _adamw_call(cls, case, _):
    """The learner's optimizer driven as a training loop drives a ``torch.optim.Optimizer``: ``.grad`` set,
    ``step()``; the learning rate set on every group before each step (``lrs``) or by a ``LambdaLR``
    (``factors``), never on the optimizer object."""
    params = [p.clone().requires_grad_(True) for p in case["params"]]
    optimizer = cls(_adamw_groups(case, params), **case["kwargs"])
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise Failure(say("not_a_subclass", call=f"{getattr(cls, '__name__', cls)}(params, ...)",
                          base="torch.optim.Optimizer",
                          got=", ".join(b.__name__ for b in type(optimizer).__mro__[1:])), "adamw_not_an_optimizer")
    factors = case["factors"]
    scheduler = None if factors is None else \
        torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: factors[min(k, len(factors) - 1)])
    snapshots = []
    for k, grads in enumerate(case["grads"]):
        if case["lrs"] is not None:
            for group in optimizer.param_groups:
                group["lr"] = case["lrs"][k]
        for p, grad in zip(params, grads):
            p.grad = None if grad is None else grad.clone()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        snapshots.append(torch.cat([p.detach().flatten() for p in params]).clone())  # (total numel,)
    return snapshots[0], snapshots[-1]


def _adamw_settings(case):
    """Per parameter: its group's settings (the constructor's where the group leaves one out)."""
    settings = {**ADAMW_DEFAULTS, **case["kwargs"]}
    own = [settings] * len(case["params"])
    for group in case["groups"] or ():
        for i in group["params"]:
            own[i] = {**settings, **{k: v for k, v in group.items() if k != "params"}}
    return settings, own


def adamw_variants(ref, case):
    settings, own = _adamw_settings(case)

    def run(l2=False, corrected=True, decay_lr=True, eps="outside", decay_after=False, lr_from_group=True,
            decay_from_group=True, shared_step=False):
        params = [p.clone() for p in case["params"]]
        m = [torch.zeros_like(p) for p in params]
        v = [torch.zeros_like(p) for p in params]
        steps = [0] * len(params)
        snapshots = []
        for k, grads in enumerate(case["grads"]):
            for i, grad in enumerate(grads):
                if grad is None:
                    continue
                group = own[i]
                beta1, beta2 = group["betas"]
                lr, decay = group["lr"] if lr_from_group else settings["lr"], group["weight_decay"]
                if lr_from_group and case["lrs"] is not None:
                    lr = case["lrs"][k]
                elif lr_from_group and case["factors"] is not None:
                    lr = group["lr"] * case["factors"][k]
                decay = decay if decay_from_group else settings["weight_decay"]
                steps[i] += 1
                t, p = k + 1 if shared_step else steps[i], params[i]
                factor = 1 - (lr * decay if decay_lr else decay)
                if l2:
                    grad = grad + decay * p
                elif not decay_after:
                    p = p * factor
                m[i] = beta1 * m[i] + (1 - beta1) * grad
                v[i] = beta2 * v[i] + (1 - beta2) * grad * grad
                m_hat = m[i] / (1 - beta1 ** t) if corrected else m[i]
                v_hat = v[i] / (1 - beta2 ** t) if corrected else v[i]
                if eps == "inside":
                    denominator = (v_hat + group["eps"]).sqrt()
                elif eps == "uncorrected":  # lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)
                    denominator = (v[i].sqrt() + group["eps"]) / math.sqrt(1 - beta2 ** t)
                else:
                    denominator = v_hat.sqrt() + group["eps"]
                params[i] = p - lr * m_hat / denominator
                if decay_after and not l2:
                    params[i] = params[i] * factor
            snapshots.append(torch.cat([p.flatten() for p in params]))  # (total numel,)
        return {"params after step 1": snapshots[0], "params after the last step": snapshots[-1]}

    return combine(ADAMW_BUGS, run)


def _adamw_cases():
    g = torch.Generator().manual_seed(49)

    def case(label, shapes, steps, kwargs, lrs=None, grad_scale=1.0, groups=None, factors=None):
        params = [randn(g, *shape) for shape in shapes]
        grads = [[randn(g, *shape, scale=grad_scale) for shape in shapes] for _ in range(steps)]
        return Case(label, {}, {"params": params, "grads": grads, "kwargs": kwargs, "lrs": lrs, "groups": groups,
                                "factors": factors})

    return [case("默认超参、3 个参数、5 步 / defaults, 3 tensors, 5 steps", [(4, 3), (3,), (2, 2, 2)], 5, {}),
            case("betas=(0.9, 0.95)、weight_decay=0.1、每步前设 group[\"lr\"] / group[\"lr\"] set before every step",
                 [(5, 4), (4,)], 6, dict(lr=0.01, betas=(0.9, 0.95), weight_decay=0.1),
                 lrs=[0.01, 0.02, 0.015, 0.01, 0.005, 0.001]),
            case("weight_decay=0、一步 / one step", [(3, 3)], 1, dict(lr=0.1, weight_decay=0.0)),
            case("很小的梯度（约 1e-4）、eps=1e-6 / tiny gradients (~1e-4), eps=1e-6", [(6,), (2, 3)], 3,
                 dict(lr=0.05, eps=1e-6, weight_decay=0.5), grad_scale=1e-4),
            without_grad(case("一个参数在第 2 步没有梯度（.grad 为 None，这一步跳过它）/ a parameter whose .grad is "
                              "None at step 2 (skip it there)", [(3, 2), (4,), (2,)], 3,
                              dict(lr=0.02, weight_decay=0.1)), 1, step=1),
            case("两个参数组（各自的 lr、weight_decay）、LambdaLR 调度 / two param groups (their own lr and "
                 "weight_decay), a LambdaLR schedule", [(4, 3), (3,), (5,)], 4,
                 dict(lr=0.01, betas=(0.9, 0.95), weight_decay=0.1),
                 groups=[{"params": [0, 1]}, {"params": [2], "lr": 0.03, "weight_decay": 0.0}],
                 factors=[0.5, 1.0, 0.8, 0.3])]


def without_grad(case, index, step):
    """``case`` with parameter ``index`` given no gradient (``.grad = None``) at ``step`` (counted from 0): its own
    step count falls one behind the optimizer's."""
    case.extra["grads"] = [[None if (i, k) == (index, step) else g for i, g in enumerate(grads)]
                           for k, grads in enumerate(case["grads"])]
    return case


def _adamw_error(case, error):
    """A crash on the case with a parameter whose ``.grad`` is None is ``adamw_grad_none_crash``."""
    if any(g is None for grads in case["grads"] for g in grads) and "NoneType" in str(error):
        return "adamw_grad_none_crash"
    return None


def _clip_rule(case, expected, got):
    return "clip_returns_none" if got.get("norm", 0) is None else None


# ---------------------------------------------------------------- the checks

FunctionCheck("warmup_cosine_lr", cases=_lr_cases, outputs=("lrs",), variants=lr_variants,
              call=_lr_call,
              mistakes=("lr_warmup_off_by_one", "lr_cosine_ignores_min_lr", "lr_cosine_from_step_zero"))

FunctionCheck("clip_grad_norm", cases=_clip_cases, outputs=("grads", "norm"), variants=clip_variants,
              call=_clip_call, rule=_clip_rule,
              mistakes=("clip_per_parameter", "clip_always_rescales", "clip_returns_clipped_norm",
                        "clip_generator_consumed", "clip_no_sqrt", "clip_returns_none"))

FunctionCheck("AdamW", cases=_adamw_cases, outputs=("params after step 1", "params after the last step"),
              variants=adamw_variants, call=_adamw_call, on_error=_adamw_error,
              mistakes=("adamw_l2_in_gradient", "adamw_no_bias_correction", "adamw_decay_without_lr",
                        "adamw_eps_inside_sqrt", "adamw_eps_uncorrected_v", "adamw_decay_after_update",
                        "adamw_grad_none_crash", "adamw_lr_ignored", "adamw_group_decay_ignored",
                        "adamw_shared_step", "adamw_not_an_optimizer"))
