"""Chapter 08: the three pieces of a training loop the learner writes: the learning-rate schedule
(linear warmup, then cosine decay), gradient clipping by the global norm, and AdamW.

Each equals PyTorch's own (tests/test_reference_llm.py): ``warmup_cosine_lr`` the values of
``SequentialLR(LinearLR, CosineAnnealingLR)``, ``clip_grad_norm`` ``torch.nn.utils.clip_grad_norm_``,
``AdamW`` ``torch.optim.AdamW`` step for step.
"""
import math

import torch


def warmup_cosine_lr(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """The learning rate of 0-based ``step`` (``0 <= step < max_steps``), a Python float.

    Linear warmup over the first ``warmup_steps`` steps: ``max_lr * (step + 1) / warmup_steps``
    (step 0 already learns, with ``max_lr / warmup_steps``; step ``warmup_steps - 1`` reaches
    ``max_lr``). Then cosine decay from ``max_lr`` (at step ``warmup_steps``) towards ``min_lr``
    (reached at ``max_steps``): ``min_lr + (max_lr - min_lr) * (1 + cos(pi * progress)) / 2``
    with ``progress = (step - warmup_steps) / (max_steps - warmup_steps)``.

    中文：第 ``step`` 步（从 0 数）的学习率：前 ``warmup_steps`` 步线性预热到 ``max_lr``（第 0 步就是
    ``max_lr / warmup_steps``，不是 0），之后按余弦从 ``max_lr`` 降向 ``min_lr``。
    """
    ### BEGIN SOLUTION
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
    ### END SOLUTION


def clip_grad_norm(parameters, max_norm):
    """Clip the gradients of ``parameters`` in place by their **global** L2 norm; return that norm.

    The global norm is the L2 norm of every gradient together, as one long vector:
    ``total = sqrt(sum over parameters of (p.grad ** 2).sum())`` (parameters whose ``.grad`` is
    ``None`` are skipped). When ``total > max_norm`` every gradient is multiplied by the same
    factor ``max_norm / (total + 1e-6)`` (as ``torch.nn.utils.clip_grad_norm_``): the direction of
    the update is kept, only its length shrinks. Otherwise nothing changes. Returns ``total``
    (before clipping) as a Python float. ``parameters`` may be a generator such as
    ``model.parameters()``, which can be gone through only once.

    中文：按**全局** L2 范数裁剪梯度（所有梯度拼成一个向量的范数），原地修改；总范数超过 ``max_norm``
    时，所有梯度乘同一个系数 ``max_norm / (total + 1e-6)``。返回裁剪前的总范数。
    """
    ### BEGIN SOLUTION
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.stack([g.detach().norm() for g in grads]).norm().item()  # norm of the per-tensor norms
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for g in grads:
            g.mul_(scale)
    return total
    ### END SOLUTION


class AdamW(torch.optim.Optimizer):
    """AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"), as ``torch.optim.AdamW``.

    A ``torch.optim.Optimizer``, written the way PyTorch and CS336 write one:
    ``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``, where ``params``
    are tensors (a list, or a generator such as ``model.parameters()``) or parameter groups
    (dicts such as ``{"params": [...], "weight_decay": 0.0}``; a setting a group leaves out is the
    constructor's). ``__init__`` hands ``params`` and the four settings as a dict (the defaults) to
    ``Optimizer.__init__``, which keeps the groups in ``self.param_groups``; ``self.state[p]``
    (a dict per parameter, empty until its first step) holds that parameter's moments and step
    count. ``zero_grad()`` is the inherited one (every ``.grad`` set to ``None``).

    ``step()`` reads ``lr``, ``betas``, ``eps`` and ``weight_decay`` from each group at every step
    (a schedule, or ``torch.optim.lr_scheduler.LambdaLR``, sets ``group["lr"]`` between steps) and
    updates every parameter of the group that has a ``.grad``, in place (one without is skipped),
    with ``t`` the number of steps that parameter has taken, this one included:

        p <- p - lr * weight_decay * p              (decoupled: the decay never enters m or v)
        m <- beta1 * m + (1 - beta1) * g            (first moment, starts at 0)
        v <- beta2 * v + (1 - beta2) * g * g        (second moment, starts at 0)
        m_hat = m / (1 - beta1 ** t), v_hat = v / (1 - beta2 ** t)   (bias correction)
        p <- p - lr * m_hat / (sqrt(v_hat) + eps)

    中文：AdamW 是一个 ``torch.optim.Optimizer`` 子类：``__init__`` 把四个超参组成字典交给
    ``super().__init__(params, defaults)``，参数组就在 ``self.param_groups`` 里，每个参数的
    状态（一阶、二阶矩和步数）在 ``self.state[p]`` 里；``step()`` 每一步都从各参数组读 ``lr`` 等超参
    （调度器在两步之间改 ``group["lr"]``），跳过 ``.grad`` 为 ``None`` 的参数。权重衰减与梯度**解耦**
    （直接让参数乘 ``1 - lr * weight_decay``，不加进梯度），一阶、二阶矩从 0 开始并做偏差修正（除以
    ``1 - beta ** t``，t 从 1 数）。参数原地更新。
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        ### BEGIN SOLUTION
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        ### END SOLUTION

    @torch.no_grad()
    def step(self):
        ### BEGIN SOLUTION
        for group in self.param_groups:
            lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # the first step of this parameter: moments start at 0
                    state["t"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["t"] += 1
                t, m, v, g = state["t"], state["m"], state["v"], p.grad
                p.mul_(1 - lr * weight_decay)  # decoupled weight decay
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                m_hat = m / (1 - beta1 ** t)  # bias correction: m and v start at 0
                v_hat = v / (1 - beta2 ** t)
                p.sub_(lr * m_hat / (v_hat.sqrt() + eps))
        ### END SOLUTION
