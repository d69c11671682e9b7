"""Wrong implementations of chapter 08's training pieces, one classic mistake each."""
import math

import torch


def lr_warmup_one_step_long(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    if step <= warmup_steps:  # bug: step warmup_steps still warms up, above max_lr
        return max_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def lr_to_zero(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return max_lr * 0.5 * (1 + math.cos(math.pi * progress))  # bug: min_lr forgotten


def lr_cosine_whole_run(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    return min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * step / max_steps))  # bug: progress from 0


def clip_each(parameters, max_norm):
    total = 0.0
    for p in parameters:
        if p.grad is None:
            continue
        norm = p.grad.norm()
        total += float(norm) ** 2
        if norm > max_norm:
            p.grad.mul_(max_norm / (norm + 1e-6))  # bug: each parameter by its own norm
    return math.sqrt(total)


def clip_to_unit_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    for g in grads:
        g.mul_(max_norm / (total + 1e-6))  # bug: scales up small gradients too
    return total


def clip_norm_after(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))
    return torch.sqrt(sum((g ** 2).sum() for g in grads))  # bug: the norm after clipping


def clip_twice_through_generator(parameters, max_norm):
    total = math.sqrt(sum(float((p.grad ** 2).sum()) for p in parameters if p.grad is not None))
    if total > max_norm:
        for p in parameters:  # bug: a generator is already exhausted here
            if p.grad is not None:
                p.grad.mul_(max_norm / (total + 1e-6))
    return total


def clip_squared(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = sum((g ** 2).sum() for g in grads)  # bug: no square root
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))
    return total


class _AdamW(torch.optim.Optimizer):
    """AdamW with switches for one classic mistake at a time."""
    l2 = False
    corrected = True
    decay_lr = True
    eps_inside = False
    eps_uncorrected = False
    decay_after = False
    skip_none = True
    decay_from_group = True
    shared_step = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self._t = 0  # step() calls so far

    def _lr(self, group):
        return group["lr"]

    @torch.no_grad()
    def step(self):
        self._t += 1
        for group in self.param_groups:
            lr, (b1, b2), eps = self._lr(group), group["betas"], group["eps"]
            weight_decay = group["weight_decay"] if self.decay_from_group else self.defaults["weight_decay"]
            for p in group["params"]:
                if p.grad is None and self.skip_none:
                    continue
                state = self.state[p]
                if not state:
                    state.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["t"] += 1
                t, m, v, g = self._t if self.shared_step else state["t"], state["m"], state["v"], p.grad
                decay = 1 - (lr * weight_decay if self.decay_lr else weight_decay)
                if self.l2:
                    g = g + weight_decay * p
                elif not self.decay_after:
                    p.mul_(decay)
                m.mul_(b1).add_((1 - b1) * g)
                v.mul_(b2).add_((1 - b2) * g * g)
                m_hat = m / (1 - b1 ** t) if self.corrected else m
                v_hat = v / (1 - b2 ** t) if self.corrected else v
                if self.eps_uncorrected:
                    step = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                    p.sub_(step * m / (v.sqrt() + eps))
                else:
                    p.sub_(lr * m_hat / ((v_hat + eps).sqrt() if self.eps_inside else v_hat.sqrt() + eps))
                if self.decay_after:
                    p.mul_(decay)


class AdamL2(_AdamW):
    l2 = True  # bug: Adam with L2 regularisation


class AdamWNoBiasCorrection(_AdamW):
    corrected = False  # bug


class AdamWDecayWithoutLr(_AdamW):
    decay_lr = False  # bug: p -= weight_decay * p


class AdamWEpsInsideSqrt(_AdamW):
    eps_inside = True  # bug: sqrt(v_hat + eps)


class AdamWEpsOnUncorrectedV(_AdamW):
    eps_uncorrected = True  # bug: lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)


class AdamWDecayAfterUpdate(_AdamW):
    decay_after = True  # bug: p -= lr * wd * p on the updated p


class AdamWNoneGradCrash(_AdamW):
    skip_none = False  # bug: g = p.grad is None for a frozen parameter, m.mul_(b1).add_(None) raises


class AdamWLrFromInit(_AdamW):
    """The lr kept as an attribute at construction, as a plain optimizer class keeps it."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
        self.lr = lr

    def _lr(self, group):
        return self.lr  # bug: a scheduler sets group["lr"], never self.lr


class AdamWDecayFromDefaults(_AdamW):
    decay_from_group = False  # bug: self.defaults["weight_decay"] for every group


class AdamWSharedStep(_AdamW):
    shared_step = True  # bug: t counts step() calls, also those that skipped a parameter with no gradient


class AdamWPlainClass:
    """The update right, but a plain class with an lr attribute: no param groups, no scheduler takes it."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):  # bug: not an Optimizer
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.t = 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            p.mul_(1 - self.lr * self.weight_decay)
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.sub_(self.lr * (m / (1 - b1 ** self.t)) / ((v / (1 - b2 ** self.t)).sqrt() + self.eps))

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def clip_returns_nothing(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))  # bug: the norm is never returned


CASES = [
    ("warmup_cosine_lr", lr_warmup_one_step_long, "lr_warmup_off_by_one"),
    ("warmup_cosine_lr", lr_to_zero, "lr_cosine_ignores_min_lr"),
    ("warmup_cosine_lr", lr_cosine_whole_run, "lr_cosine_from_step_zero"),
    ("clip_grad_norm", clip_each, "clip_per_parameter"),
    ("clip_grad_norm", clip_to_unit_norm, "clip_always_rescales"),
    ("clip_grad_norm", clip_norm_after, "clip_returns_clipped_norm"),
    ("clip_grad_norm", clip_twice_through_generator, "clip_generator_consumed"),
    ("clip_grad_norm", clip_squared, "clip_no_sqrt"),
    ("AdamW", AdamL2, "adamw_l2_in_gradient"),
    ("AdamW", AdamWNoBiasCorrection, "adamw_no_bias_correction"),
    ("AdamW", AdamWDecayWithoutLr, "adamw_decay_without_lr"),
    ("AdamW", AdamWEpsInsideSqrt, "adamw_eps_inside_sqrt"),
    ("AdamW", AdamWEpsOnUncorrectedV, "adamw_eps_uncorrected_v"),
    ("AdamW", AdamWDecayAfterUpdate, "adamw_decay_after_update"),
    ("AdamW", AdamWNoneGradCrash, "adamw_grad_none_crash"),
    ("AdamW", AdamWLrFromInit, "adamw_lr_ignored"),
    ("AdamW", AdamWSharedStep, "adamw_shared_step"),
    ("AdamW", AdamWDecayFromDefaults, "adamw_group_decay_ignored"),
    ("AdamW", AdamWPlainClass, "adamw_not_an_optimizer"),
    ("clip_grad_norm", clip_returns_nothing, "clip_returns_none"),
]
