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


idiom("adamw_state_dict_lerp_addcdiv", "08_gpt", "AdamW",
      "per-parameter state in a dict keyed by id(p), Tensor.lerp_ for the first moment, addcmul_/addcdiv_, "
      "the step size folded into a float (PyTorch's own layout)", r"""
class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.state = {id(p): {"t": 0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
                      for p in self.params}

    @torch.no_grad()
    def step(self):
        beta1, beta2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            state = self.state[id(p)]
            state["t"] += 1
            t = state["t"]
            p.mul_(1.0 - self.lr * self.weight_decay)                     # decoupled decay first
            state["exp_avg"].lerp_(p.grad, 1.0 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
            denom = (state["exp_avg_sq"] / (1.0 - beta2 ** t)).sqrt_().add_(self.eps)
            p.addcdiv_(state["exp_avg"], denom, value=-self.lr / (1.0 - beta1 ** t))

    def zero_grad(self):
        for p in self.params:
            p.grad = None
""")

