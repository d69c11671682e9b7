"""Checks of the backward passes written by hand (``solutions/backward.py``): softmax, LayerNorm, BatchNorm
(forward too), a two-layer ReLU MLP, and cross-entropy with label smoothing."""
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
    "bn_stats_wrong_axis": ("BatchNorm 的统计量沿错了轴：均值和方差沿 batch（第 0 维）求，每个特征一个；"
                            "沿最后一维（每个样本的特征）求的是 LayerNorm",
                            "BatchNorm's statistics over the wrong axis: mean and variance over the batch (dim 0), "
                            "one per feature; over the last axis (each sample's features) is LayerNorm"),
    "bn_unbiased_var": ("用了无偏方差（除以 N−1）：训练时 BatchNorm 用这一批的有偏方差（除以 N）归一化，"
                        "无偏方差只用来更新 running_var",
                        "unbiased variance (divides by N−1): in training BatchNorm normalises with the batch's "
                        "biased variance (divides by N); the unbiased one only updates running_var"),
    "bn_backward_missing_mean_terms": ("BatchNorm 反向只剩 grad_out · weight / σ：这一批的均值和方差依赖每个样本，"
                                       "grad_x = (g - mean(g) - x̂·mean(g·x̂)) / σ，均值沿 batch（第 0 维）",
                                       "BatchNorm backward keeps only grad_out · weight / σ: the batch's mean and "
                                       "variance depend on every sample, grad_x = (g - mean(g) - x̂·mean(g·x̂)) / σ, "
                                       "means over the batch (dim 0)"),
    "bn_backward_missing_variance_term": ("BatchNorm 反向漏了方差项 x̂·mean(g·x̂)（沿 batch 求均值）",
                                          "BatchNorm backward misses the variance term x̂·mean(g·x̂) (mean over the "
                                          "batch)"),
    "bn_param_grads_wrong_axis": ("grad_weight / grad_bias 沿错了轴求和：沿 batch（第 0 维）求和，"
                                  "每个特征一个数，形状 (D,)",
                                  "grad_weight / grad_bias summed over the wrong axis: sum over the batch (dim 0), one "
                                  "number per feature, shape (D,)"),
    "bn_backward_eps_dropped": ("反向里有一项漏了 eps：方差项的 (var + eps)^(-3/2) 写成了 var^(-3/2)；"
                                "前向除以的是 sqrt(var + eps)，反向的每一项都要用同一个 σ",
                                "eps is dropped from one term of the backward: the variance term's (var + eps)^(-3/2) "
                                "is written var^(-3/2); the forward divides by sqrt(var + eps), so every term of the "
                                "backward uses that same σ"),
    "bn_param_grads_keepdim": ("grad_weight / grad_bias 保留了求和的那一维，形状是 (1, D)：去掉 keepdim，"
                               "梯度的形状与 weight、bias 相同，(D,)",
                               "grad_weight / grad_bias keep the summed axis, shape (1, D): drop keepdim, a gradient "
                               "has its parameter's shape, (D,)"),
    "mlp_relu_no_mask": ("ReLU 的梯度被忘了：回传到隐藏层的梯度要乘预激活的 0/1 掩码 (z > 0)",
                         "ReLU's gradient is forgotten: the gradient reaching the hidden layer is multiplied by the "
                         "pre-activation's 0/1 mask (z > 0)"),
    "mlp_relu_times_activation": ("ReLU 的梯度乘的是激活值 relu(z)：导数是 0/1 掩码 (z > 0)，不是激活本身",
                                  "ReLU's gradient is multiplied by the activation relu(z): its derivative is the 0/1 "
                                  "mask (z > 0), not the activation itself"),
    "mlp_weight_grad_transposed": ("权重梯度转置了：nn.Linear 的权重是 (out, in)，grad_w = grad_z^T @ 输入，"
                                   "形状与权重相同（不是 输入^T @ grad_z）",
                                   "a weight gradient is transposed: nn.Linear's weight is (out, in), grad_w = "
                                   "grad_z^T @ input, the weight's shape (not input^T @ grad_z)"),
    "mlp_bias_grad_not_summed": ("偏置的梯度没有在 batch 上求和：每个样本都用同一个偏置，梯度要在所有前导维上求和"
                                 "（不是取平均、不是只对第 0 维）",
                                 "a bias gradient is not summed over the batch: every sample uses the same bias, so "
                                 "its gradient is summed over every leading axis (not averaged, not over dim 0 "
                                 "only)"),
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


BATCH_NORM_STAT_BUGS = [Bug("bn_unbiased_var", dict(unbiased=True)), Bug("bn_stats_wrong_axis", dict(axis=-1)),
                        Bug("ln_eps_outside_sqrt", dict(eps_outside=True))] + [
    Bug("ln_eps_value", dict(eps_value=e)) for e in (1e-12, 1e-8, 1e-6, 1e-5)]  # fixed eps (hipsternet, DLFS, ...)


def _batch_norm_parts(x, eps, axis=0, unbiased=False, eps_outside=False, eps_value=None):
    """(x_hat, sigma) with the statistics over ``axis``, as a wrong implementation computes them."""
    eps = eps if eps_value is None else eps_value
    var = x.var(axis, keepdim=True, unbiased=unbiased)
    sigma = var.sqrt() + eps if eps_outside else torch.sqrt(var + eps)
    return (x - x.mean(axis, keepdim=True)) / sigma, sigma


def _eps_note(eps):
    return lambda kw: ("" if "eps_value" not in kw else f"eps = {kw['eps_value']:g}，契约是 {eps:g} / "
                       f"eps = {kw['eps_value']:g}, the contract says {eps:g}")


def batch_norm_forward_variants(ref, case):
    x, w, b, eps = case["x"], case["weight"], case["bias"], case["eps"]

    def run(affine=True, **stats):
        x_hat, _ = _batch_norm_parts(x, eps, **stats)
        return {"out": x_hat * w + b if affine else x_hat}

    return combine([*BATCH_NORM_STAT_BUGS, Bug("ln_no_affine", dict(affine=False))], run, note=_eps_note(eps))


def batch_norm_backward_variants(ref, case):
    x, w, go, eps = case["x"], case["weight"], case["grad_out"], case["eps"]

    def run(terms="both", param_axis=0, bias_only=False, keepdim=False, eps_in_var_term=True, **stats):
        x_hat, sigma = _batch_norm_parts(x, eps, **stats)
        axis = stats.get("axis", 0)
        g = go * w
        gx = g if terms == "none" else g - g.mean(axis, keepdim=True)
        if terms == "both" and eps_in_var_term:
            gx = gx - x_hat * (g * x_hat).mean(axis, keepdim=True)
        if terms == "both" and not eps_in_var_term:  # (x - mean) * mean(g (x - mean)) * var^(-3/2), times sigma
            centred = x - x.mean(axis, keepdim=True)
            var = x.var(axis, keepdim=True, unbiased=False)
            gx = gx - centred * (g * centred).mean(axis, keepdim=True) * sigma / var ** 1.5
        return {"grad_x": gx / sigma, "grad_weight": (go * x_hat).sum(0 if bias_only else param_axis, keepdim),
                "grad_bias": go.sum(param_axis, keepdim)}

    return combine([*BATCH_NORM_STAT_BUGS, Bug("bn_backward_missing_mean_terms", dict(terms="none")),
                    Bug("bn_backward_missing_variance_term", dict(terms="mean")),
                    Bug("bn_backward_eps_dropped", dict(eps_in_var_term=False)),
                    Bug("bn_param_grads_wrong_axis", dict(param_axis=1)),
                    Bug("bn_param_grads_wrong_axis", dict(param_axis=1, bias_only=True)),
                    Bug("bn_param_grads_keepdim", dict(keepdim=True))], run, note=_eps_note(eps))


MLP_BUGS = [Bug("mlp_relu_no_mask", dict(relu="none")), Bug("mlp_relu_times_activation", dict(relu="value")),
            Bug("mlp_weight_grad_transposed", dict(transposed=("w1", "w2"))),
            Bug("mlp_weight_grad_transposed", dict(transposed=("w1",))),
            Bug("mlp_bias_grad_not_summed", dict(bias="mean")), Bug("mlp_bias_grad_not_summed", dict(bias="none")),
            Bug("mlp_bias_grad_not_summed", dict(bias="dim0"))]


def mlp_backward_variants(ref, case):
    x, w1, b1, w2, b2, go = (case[k] for k in ("x", "w1", "b1", "w2", "b2", "grad_out"))

    def run(relu="mask", transposed=(), bias="sum"):
        z = x @ w1.T + b1  # (..., h)
        a = torch.relu(z)
        grad_a = go @ w2  # (..., d_out) @ (d_out, h) -> (..., h)
        grad_z = {"mask": grad_a * (z > 0), "none": grad_a, "value": grad_a * a}[relu]
        lead = tuple(range(x.dim() - 1))  # every leading axis

        def weight_grad(name, upstream, inp):  # (out, in), or (in, out) when transposed
            out = torch.einsum("...o,...i->oi", upstream, inp)
            return out.T if name in transposed else out

        def bias_grad(upstream):
            return {"sum": upstream.sum(lead), "mean": upstream.mean(lead), "none": upstream,
                    "dim0": upstream.sum(0)}[bias]

        return {"grad_x": grad_z @ w1, "grad_w1": weight_grad("w1", grad_z, x), "grad_b1": bias_grad(grad_z),
                "grad_w2": weight_grad("w2", go, a), "grad_b2": bias_grad(go)}

    return combine(MLP_BUGS, run)


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


def _batch_norm_cases(with_grad_out):
    g = torch.Generator().manual_seed(47 + with_grad_out)
    cases = []
    for (N, D), eps, scale in (((8, 5), 1e-5, 2.0), ((4, 3), 1e-3, 0.03), ((16, 6), 1e-5, 1.0)):
        inputs = {"x": randn(g, N, D, scale=scale) + 0.5, "weight": 1 + randn(g, D, scale=0.3)}
        inputs.update({"grad_out": randn(g, N, D)} if with_grad_out else {"bias": randn(g, D)})
        small = ", 小方差 / small variance" if scale < 0.1 else ""
        cases.append(Case(f"x ({N}, {D}), eps={eps}{small}", inputs, {"eps": eps}))
    return cases


def _mlp_backward_cases():
    g = torch.Generator().manual_seed(49)
    cases = []
    for lead, d_in, h, d_out in (((6,), 4, 5, 3), ((2, 3), 5, 7, 4), ((1,), 3, 6, 2)):
        inputs = {"x": randn(g, *lead, d_in), "w1": randn(g, h, d_in, scale=0.7), "b1": randn(g, h, scale=0.5),
                  "w2": randn(g, d_out, h, scale=0.7), "b2": randn(g, d_out, scale=0.5),
                  "grad_out": randn(g, *lead, d_out)}
        cases.append(Case(f"x {(*lead, d_in)}, h={h}, d_out={d_out}", inputs))
    return cases


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

FunctionCheck("batch_norm_forward", cases=lambda: _batch_norm_cases(False), outputs=("out",),
              variants=batch_norm_forward_variants,
              call=lambda f, case, x: f(case["x"].clone(), case["weight"].clone(), case["bias"].clone(), case["eps"]),
              mistakes=("bn_stats_wrong_axis", "bn_unbiased_var", "ln_eps_outside_sqrt", "ln_eps_value",
                        "ln_no_affine"))

FunctionCheck("batch_norm_backward", cases=lambda: _batch_norm_cases(True),
              outputs=("grad_x", "grad_weight", "grad_bias"), variants=batch_norm_backward_variants,
              call=lambda f, case, x: f(case["x"].clone(), case["weight"].clone(), case["grad_out"].clone(),
                                        case["eps"]),
              mistakes=("bn_backward_missing_mean_terms", "bn_backward_missing_variance_term",
                        "bn_backward_eps_dropped", "bn_param_grads_wrong_axis", "bn_param_grads_keepdim",
                        "bn_stats_wrong_axis", "bn_unbiased_var", "ln_eps_outside_sqrt", "ln_eps_value"))

FunctionCheck("mlp_backward", cases=_mlp_backward_cases,
              outputs=("grad_x", "grad_w1", "grad_b1", "grad_w2", "grad_b2"), variants=mlp_backward_variants,
              call=lambda f, case, x: f(*(case[k].clone() for k in ("x", "w1", "b1", "w2", "b2", "grad_out"))),
              mistakes=("mlp_relu_no_mask", "mlp_relu_times_activation", "mlp_weight_grad_transposed",
                        "mlp_bias_grad_not_summed"))

FunctionCheck("cross_entropy", cases=_cross_entropy_cases, outputs=("loss",), grads=("logits",),
              variants=cross_entropy_variants,
              call=lambda f, case, x: f(x["logits"], case["target"].clone(), ignore_index=case["ignore_index"],
                                        label_smoothing=case["label_smoothing"]),
              mistakes=("ce_ignored_in_mean", "ls_over_v_minus_1", "ce_no_label_smoothing", "ce_sum_not_mean",
                        "ce_no_max_subtraction"))
