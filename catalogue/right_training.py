"""Right alternatives for chapter 08's training pieces: other formulas, loops, PyTorch-style layouts."""
import math

import torch


def lr_piecewise_sin(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """The warmup as a fraction of steps done; the cosine half-wave written with cos**2."""
    done = step + 1
    if done <= warmup_steps:
        return max_lr * done / warmup_steps
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * math.cos(math.pi * progress / 2) ** 2


def lr_warmup_step_over_w(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """The other warmup convention: lr 0 at step 0, max_lr at step warmup_steps (Hugging Face's
    get_cosine_schedule_with_warmup, the CS336 handout, litgpt, timm, torchtune)."""
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def lr_factor_times_max(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """A multiplier in [min_lr / max_lr, 1], as LambdaLR would take, times max_lr."""
    floor = min_lr / max_lr
    if step < warmup_steps:
        factor = (step + 1) / warmup_steps
    else:
        t = (step - warmup_steps) / (max_steps - warmup_steps)
        factor = floor + (1 - floor) * (1 + math.cos(math.pi * t)) / 2
    return max_lr * factor


def clip_flat_vector(parameters, max_norm):
    """One long vector of every gradient; the scale clamped at 1 and applied to all, as PyTorch does."""
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    total = torch.cat([g.reshape(-1) for g in grads]).norm()
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    return total


def clip_python_sum(parameters, max_norm):
    """Squares summed in Python floats; grads replaced (not scaled in place) through p.grad."""
    params = [p for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in params))
    if total > max_norm:
        for p in params:
            p.grad = p.grad * (max_norm / (total + 1e-6))
    return total


class AdamWDictState(torch.optim.Optimizer):
    """PyTorch's layout for the update (denominator first, lerp_, addcdiv_); the state made the first time a
    parameter has a gradient, ``self.state[p].setdefault``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def step(self):
        with torch.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    s = self.state[p]
                    s.setdefault("step", 0)
                    s.setdefault("m", torch.zeros_like(p))
                    s.setdefault("v", torch.zeros_like(p))
                    s["step"] += 1
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    s["m"].lerp_(p.grad, 1 - beta1)
                    s["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    bias1, bias2 = 1 - beta1 ** s["step"], 1 - beta2 ** s["step"]
                    denom = (s["v"].sqrt() / math.sqrt(bias2)).add_(group["eps"])
                    p.addcdiv_(s["m"], denom, value=-group["lr"] / bias1)


class AdamWOutOfPlace(torch.optim.Optimizer):
    """State built for every parameter in ``__init__``, moments rebuilt as new tensors each step; the parameter
    updated through .data."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"steps": 0, "moments": (torch.zeros_like(p), torch.zeros_like(p))}

    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.detach()
                state = self.state[p]
                m, v = state["moments"]
                m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g ** 2
                state["steps"] += 1
                state["moments"] = (m, v)
                t = state["steps"]
                update = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + group["eps"])
                p.data = p.data - group["lr"] * group["weight_decay"] * p.data - group["lr"] * update


CASES = [
    ("warmup_cosine_lr", lr_piecewise_sin),
    ("warmup_cosine_lr", lr_factor_times_max),
    ("warmup_cosine_lr", lr_warmup_step_over_w),
    ("clip_grad_norm", clip_flat_vector),
    ("clip_grad_norm", clip_python_sum),
    ("AdamW", AdamWDictState),
    ("AdamW", AdamWOutOfPlace),
]
