"""Idioms of the exercises checked in tutor/checks/training.py (08 training pieces)."""
from . import idiom

# ---------------------------------------------------------------- 08_gpt

idiom("warmup_cosine_lr_typed_clip_foreach_norms", "08_gpt", "warmup_cosine_lr",
      "type hints, an early return for the warmup, progress clamped with min(); clipping under @torch.no_grad() "
      "with torch.linalg.vector_norm over stacked norms, torch.clamp of the factor, a generator listed once", r"""
def warmup_cosine_lr(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> float:
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps                 # step 0 already learns
    decay_steps = max(1, max_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)      # 0 -> 1 over the decay
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))           # 1 -> 0
    return min_lr + cosine * (max_lr - min_lr)


@torch.no_grad()
def clip_grad_norm(parameters, max_norm):
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g) for g in grads])   # (P,)
    total = torch.linalg.vector_norm(norms)                            # the global L2 norm
    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(factor)
    return total.item()
""")


idiom("adamw_optimizer_lerp_addcdiv", "08_gpt", "AdamW",
      "a torch.optim.Optimizer subclass as CS336 writes one: a closure accepted and its loss returned, defaults "
      "as a dict, state made when self.state[p] is empty, Tensor.lerp_ for the first moment, addcmul_/addcdiv_, "
      "the step size folded into a float (PyTorch's own layout)", r"""
from typing import Callable, Optional


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                p.mul_(1.0 - lr * wd)                                          # decoupled decay first
                state["exp_avg"].lerp_(p.grad, 1.0 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                denom = (state["exp_avg_sq"] / (1.0 - beta2 ** t)).sqrt_().add_(eps)
                p.addcdiv_(state["exp_avg"], denom, value=-lr / (1.0 - beta1 ** t))
        return loss
""")


idiom("adamw_optimizer_functional_update", "08_gpt", "AdamW",
      "an Optimizer whose step gathers each group's tensors, then calls a module-level update function on them "
      "(torch.optim's own split); a step count per parameter kept as a tensor, the update computed out of place "
      "and written back with Tensor.copy_", r"""
def _adamw_update(params, grads, exp_avgs, exp_avg_sqs, steps, *, lr, beta1, beta2, eps, weight_decay):
    for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
        t += 1
        m.copy_(beta1 * m + (1 - beta1) * g)
        v.copy_(beta2 * v + (1 - beta2) * g.square())
        m_hat = m / (1 - beta1 ** t.item())
        v_hat = v / (1 - beta2 ** t.item())
        p.copy_(p * (1 - lr * weight_decay) - lr * m_hat / (v_hat.sqrt() + eps))


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            with_grad = [p for p in group["params"] if p.grad is not None]
            for p in with_grad:
                if not self.state[p]:
                    self.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": torch.zeros_like(p)}
            states = [self.state[p] for p in with_grad]
            beta1, beta2 = group["betas"]
            _adamw_update(with_grad, [p.grad for p in with_grad], [s["exp_avg"] for s in states],
                          [s["exp_avg_sq"] for s in states], [s["step"] for s in states], lr=group["lr"],
                          beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"])
""")
