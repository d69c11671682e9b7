"""Checks of the backward passes written by hand (``solutions/backward.py``): softmax, LayerNorm and
cross-entropy with label smoothing."""
import torch

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, FunctionCheck, wrong

MISTAKES = define_mistakes({
    "softmax_backward_missing_sum": ("softmax 反向漏了求和项：grad_x = y * (grad_y - sum(grad_y * y))，"
                                     "雅可比矩阵不只是对角线",
                                     "softmax backward misses the sum term: grad_x = y * (grad_y - sum(grad_y * y)); "
                                     "the Jacobian is not diagonal"),
    "backward_sum_wrong_axis": ("反向里的求和沿错了轴：沿 softmax 的 dim 求和（keepdim=True）",
                                "the backward sums over the wrong axis: sum along the softmax's dim (keepdim=True)"),
    "softmax_backward_no_keepdim": ("softmax 反向里的求和丢了 keepdim：sum(grad_y * y, dim) 要 keepdim=True "
                                    "才能和 y 对齐广播（否则报错，或在别的轴上悄悄广播）",
                                    "softmax backward's sum loses keepdim: sum(grad_y * y, dim) needs keepdim=True to "
                                    "broadcast against y (otherwise it raises, or silently broadcasts along another "
                                    "axis)"),
    "ln_backward_missing_mean_terms": ("LayerNorm 反向漏了均值项：grad_x = (g - mean(g) - x̂·mean(g·x̂)) / σ，"
                                       "两个均值项来自均值和方差对每个 x 的依赖",
                                       "LayerNorm backward misses the mean terms: grad_x = (g - mean(g) - "
                                       "x̂·mean(g·x̂)) / σ, from the mean and the variance depending on every x"),
    "ln_backward_missing_variance_term": ("LayerNorm 反向漏了方差项 x̂·mean(g·x̂)",
                                          "LayerNorm backward misses the variance term x̂·mean(g·x̂)"),
    "ln_backward_no_weight": ("LayerNorm 反向里 grad_x 没有乘 weight：g = grad_out * weight",
                              "LayerNorm backward: grad_x ignores the weight: g = grad_out * weight"),
    "ln_backward_grads_swapped": ("grad_weight 和 grad_bias 放反了：grad_weight = sum(grad_out · x̂)，"
                                  "grad_bias = sum(grad_out)",
                                  "grad_weight and grad_bias are swapped: grad_weight = sum(grad_out · x̂), grad_bias "
                                  "= sum(grad_out)"),
    "ln_backward_sums_fixed_axes": ("grad_weight、grad_bias 只在轴 (0, 1) 上求和（只对 (B, T, C) 输入成立）："
                                    "要对最后一维之外的所有轴求和，x 也可以是 2 维",
                                    "grad_weight and grad_bias are summed over axes (0, 1), right for a (B, T, C) "
                                    "input only: sum over every axis but the last, x may be 2-D too"),
    "ls_over_v_minus_1": ("标签平滑把 ε 只分给了其余 V−1 个类：PyTorch 的约定是 ε / C 分给全部 C 个类（包括正确类）",
                          "label smoothing spreads ε over the other V−1 classes: PyTorch spreads ε / C over all C "
                          "classes, the true one included"),
    "ln_backward_no_mean_g": (
        "grad_x 少了 mean(g) 这一项：x 的均值也依赖每个 x_i，g = grad_out · weight 要减去它沿最后一维的均值，"
        "grad_x = (g - mean(g) - x̂ · mean(g · x̂)) / σ",
        "grad_x lacks its mean(g) term: the mean of x depends on every x_i, so g = grad_out · weight loses its mean "
        "over the last axis, grad_x = (g - mean(g) - x̂ · mean(g · x̂)) / σ"),
    "ce_no_label_smoothing": (
        "忽略了 label_smoothing：平滑后的目标是 (1 - ε)·onehot + ε / C，"
        "损失是 (1 - ε)·nll + ε·mean(-log p)",
        "label_smoothing ignored: the smoothed target is (1 - ε)·onehot + ε / C, the loss (1 - ε)·nll + "
        "ε·mean(-log p)"),
    "ce_sum_not_mean": (
        "损失是求和而不是平均：应除以未被忽略的位置数（F.cross_entropy 的 reduction='mean'）",
        "the loss is summed, not averaged: divide by the number of positions not ignored (F.cross_entropy's "
        "reduction='mean')"),
    "ce_no_max_subtraction": (
        "log-sum-exp 没有先减去最大值：logits 很大（约 1000）时 exp 溢出成 inf，"
        "损失变成 NaN/inf；用 logits - logits.max(-1, keepdim=True) 或 torch.logsumexp",
        "log-sum-exp without subtracting the max first: with large logits (~1000) exp overflows to inf and the "
        "loss becomes NaN/inf; use logits - logits.max(-1, keepdim=True) or torch.logsumexp"),
    "ce_ignored_in_mean": ("被忽略的位置也算进了平均的分母：只对 target != ignore_index 的位置求平均",
                           "ignored positions count in the mean's denominator: average over the positions with target "
                           "!= ignore_index only"),
})


def softmax_backward_variants(ref, case):
    y, g = case["y"], case["grad_y"]
    return [wrong("softmax_backward_missing_sum", lambda: {"grad_x": y * g}),
            wrong("softmax_backward_missing_sum", lambda: {"grad_x": y * (1 - y) * g}),
            wrong("backward_sum_wrong_axis", lambda: {"grad_x": y * (g - (g * y).sum(-1, keepdim=True))}),
            wrong("softmax_backward_no_keepdim", lambda: {"grad_x": y * (g - (g * y).sum(case["dim"]))})]


def layer_norm_backward_variants(ref, case):
    x, w, go, eps = case["x"], case["weight"], case["grad_out"], case["eps"]
    d = x.size(-1)

    def run(mean_term=True, var_term=True, weight=True, mean_g=True, unbiased=False, eps_outside=False):
        var = x.var(-1, keepdim=True, unbiased=unbiased)
        sigma = var.sqrt() + eps if eps_outside else torch.sqrt(var + eps)
        x_hat = (x - x.mean(-1, keepdim=True)) / sigma
        g = go * w if weight else go
        mean_part = g.mean(-1, keepdim=True) if mean_term and mean_g else 0
        var_part = x_hat * (g * x_hat).mean(-1, keepdim=True) if var_term else 0
        gx = g - mean_part - var_part
        return {"grad_x": gx / sigma, "grad_weight": (go * x_hat).reshape(-1, d).sum(0),
                "grad_bias": go.reshape(-1, d).sum(0)}

    def fixed_axes():  # dw and db summed over axes (0, 1), as for a (B, T, C) input only
        out = run()
        x_hat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
        return {**out, "grad_weight": (go * x_hat).sum((0, 1)), "grad_bias": go.sum((0, 1))}

    def swapped():
        out = run()
        return {**out, "grad_weight": out["grad_bias"], "grad_bias": out["grad_weight"]}

    return [wrong("ln_backward_missing_mean_terms", lambda: run(mean_term=False, var_term=False)),
            wrong("ln_backward_missing_variance_term", lambda: run(var_term=False)),
            wrong("ln_backward_no_mean_g", lambda: run(mean_g=False)),
            wrong("ln_backward_no_weight", lambda: run(weight=False)),
            wrong("ln_unbiased_var", lambda: run(unbiased=True)),
            wrong("ln_eps_outside_sqrt", lambda: run(eps_outside=True)),
            wrong("ln_backward_grads_swapped", swapped),
            wrong("ln_backward_sums_fixed_axes", fixed_axes)]


CROSS_ENTROPY_BUGS = [Bug("ls_over_v_minus_1", dict(smoothing="rest")),
                      Bug("ce_no_label_smoothing", dict(smoothing="none")),
                      Bug("ce_ignored_in_mean", dict(mean="all")), Bug("ce_sum_not_mean", dict(mean="sum")),
                      Bug("loss_includes_pad", dict(use_ignore=False)),
                      Bug("ce_no_max_subtraction", dict(stable=False))]


def cross_entropy_variants(ref, case):
    logits, target, ignore, eps = case["logits"], case["target"], case["ignore_index"], case["label_smoothing"]
    C = logits.size(-1)
    z, t = logits.reshape(-1, C), target.reshape(-1)

    def run(smoothing="all", mean="kept", use_ignore=True, stable=True):
        logp = torch.log_softmax(z, -1) if stable else z - z.exp().sum(-1, keepdim=True).log()
        keep = t != ignore if use_ignore else torch.ones_like(t, dtype=torch.bool)
        safe = t.masked_fill(t == ignore, 0) if use_ignore else t.clamp_min(0)
        nll = -logp.gather(-1, safe[:, None]).squeeze(-1)
        if smoothing == "rest":
            loss = (1 - eps) * nll + eps * (-logp.sum(-1) - nll) / (C - 1)
        elif smoothing == "none":
            loss = nll
        else:
            loss = (1 - eps) * nll + eps * -logp.mean(-1)
        total = loss[keep].sum()
        return {"loss": total if mean == "sum" else total / (t.numel() if mean == "all" else keep.sum())}

    return combine(CROSS_ENTROPY_BUGS, run)


# ---------------------------------------------------------------- the checks

def _softmax_backward_cases():
    g = torch.Generator().manual_seed(44)
    cases = []
    for shape, dim in (((2, 3, 5), -1), ((2, 3, 4), 1), ((4, 3), 0), ((6,), 0)):  # dim=-1 left out: 3-D, so 1 fails
        y = torch.softmax(randn(g, *shape, scale=2.0), dim)
        cases.append(Case(f"y {shape}, dim={dim}", {"y": y, "grad_y": randn(g, *shape)}, {"dim": dim}))
    return cases


def _layer_norm_backward_cases():
    g = torch.Generator().manual_seed(45)
    return [Case(f"x {shape}, eps={eps}",
                 {"x": randn(g, *shape, scale=2.0) + 0.5, "weight": 1 + randn(g, shape[-1], scale=0.3),
                  "grad_out": randn(g, *shape)}, {"eps": eps})
            for shape, eps in (((2, 5, 8), 1e-5), ((4, 6), 1e-3), ((1, 3, 4), 1e-5))]


def _cross_entropy_cases():
    g = torch.Generator().manual_seed(46)
    return [Case("logits (2, 5, 7), 无平滑 / no smoothing, ignore_index=0",
                 {"logits": randn(g, 2, 5, 7, scale=2.0), "target": torch.tensor([[3, 4, 5, 0, 0], [6, 2, 0, 0, 0]])},
                 {"ignore_index": 0, "label_smoothing": 0.0}),
            Case("标签平滑 / label smoothing 0.1, ignore_index=-100, (6, 5)",
                 {"logits": randn(g, 6, 5, scale=2.0), "target": torch.tensor([0, 1, 2, 3, 4, -100])},
                 {"ignore_index": -100, "label_smoothing": 0.1}),
            Case("平滑 0.2 + 忽略 / smoothing 0.2 + ignore_index=3, B=1",
                 {"logits": randn(g, 1, 6, 4, scale=3.0), "target": torch.tensor([[3, 1, 3, 0, 2, 3]])},
                 {"ignore_index": 3, "label_smoothing": 0.2}),
            Case("大 logits / large logits (~1000)",
                 {"logits": randn(g, 3, 4) + 1000.0, "target": torch.tensor([0, 3, 1])},
                 {"ignore_index": -100, "label_smoothing": 0.0})]


FunctionCheck("softmax_backward", cases=_softmax_backward_cases, outputs=("grad_x",),
              variants=softmax_backward_variants,
              call=lambda f, case, x: f(case["y"].clone(), case["grad_y"].clone(), case["dim"]),
              mistakes=("backward_sum_wrong_axis", "softmax_backward_missing_sum", "softmax_backward_no_keepdim"))

FunctionCheck("layer_norm_backward", cases=_layer_norm_backward_cases, outputs=("grad_x", "grad_weight", "grad_bias"),
              variants=layer_norm_backward_variants,
              call=lambda f, case, x: f(case["x"].clone(), case["weight"].clone(), case["grad_out"].clone(),
                                        case["eps"]),
              mistakes=("ln_backward_missing_mean_terms", "ln_backward_missing_variance_term",
                        "ln_backward_no_mean_g", "ln_backward_no_weight", "ln_backward_grads_swapped",
                        "ln_backward_sums_fixed_axes", "ln_unbiased_var", "ln_eps_outside_sqrt"))

FunctionCheck("cross_entropy", cases=_cross_entropy_cases, outputs=("loss",), grads=("logits",),
              variants=cross_entropy_variants,
              call=lambda f, case, x: f(x["logits"], case["target"].clone(), ignore_index=case["ignore_index"],
                                        label_smoothing=case["label_smoothing"]),
              mistakes=("ce_ignored_in_mean", "ls_over_v_minus_1", "ce_no_label_smoothing", "ce_sum_not_mean",
                        "ce_no_max_subtraction"))
