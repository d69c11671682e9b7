"""Checks of chapter 04 (``solutions/ffn_norm.py``): the feed-forward block, LayerNorm and RMSNorm,
the Post-LN and Pre-LN residual wrappers."""
import torch
import torch.nn.functional as F

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, ModuleCheck, wrong

MISTAKES = define_mistakes({
    "ffn_no_activation": ("FFN 两层之间缺少激活函数：没有非线性，两层等于一层",
                          "the FFN has no activation between its layers: without a non-linearity two layers collapse "
                          "into one"),
    "ffn_wrong_activation": ("激活函数与 activation 参数不一致（relu / gelu）",
                             "the activation does not follow the activation argument (relu / gelu)"),
    "ffn_gelu_tanh": ("用了 tanh 近似的 GELU（GPT-2 的 gelu_new）：契约是精确的 erf 版本，即 F.gelu 的默认值",
                      "the tanh approximation of GELU (GPT-2's gelu_new): the contract is the exact, erf-based GELU, "
                      "F.gelu's default"),
    "ffn_activation_after_fc2": ("在 fc2 之后又加了一次激活：FFN 的输出不能被截断为非负",
                                 "an activation after fc2: the FFN output must not be clipped"),
    "ln_wrong_axis": ("LayerNorm 归一化的轴错了：只在最后一维（每个位置的特征）上求均值和方差，不是在 batch 或时间轴上",
                      "LayerNorm normalises over the wrong axis: take mean and variance over the last (feature) axis "
                      "of each position, not over batch or time"),
    "ln_unbiased_var": ("用了无偏方差（除以 n−1）：LayerNorm 用有偏方差，unbiased=False",
                        "unbiased variance (divides by n−1): LayerNorm uses the biased variance, unbiased=False"),
    "ln_eps_outside_sqrt": ("eps 放在根号外面：应是 sqrt(var + eps)，方差很小时两者差别很大",
                            "eps outside the square root: it is sqrt(var + eps); for small variances the two differ a "
                            "lot"),
    "ln_eps_value": ("eps 的数值与契约不同（例如 BERT 的 1e-12、Annotated Transformer 的 1e-6）：用传入的 eps"
                     "（构造参数或函数参数），默认 1e-5",
                     "eps differs from the contract (e.g. BERT's 1e-12, the Annotated Transformer's 1e-6): use the eps "
                     "you are given (the constructor's or the function's argument), default 1e-5"),
    "ln_no_affine": ("没有乘 weight、加 bias：归一化之后还要做可学习的缩放和平移",
                     "weight and bias are not applied: scale and shift after normalising"),
    "rms_subtracts_mean": ("RMSNorm 不减均值：只除以均方根 sqrt(mean(x²) + eps)",
                           "RMSNorm does not subtract the mean: divide by the root mean square sqrt(mean(x²) + eps) "
                           "only"),
    "rms_weight_plus_one": ("RMSNorm 乘的是 (1 + weight)（Gemma 的约定，weight 初始化为 0）：本课程乘 weight，"
                            "weight 初始化为 1",
                            "RMSNorm scaled by (1 + weight) (Gemma's convention, weight initialised at 0): this course "
                            "multiplies by weight, initialised at 1"),
    "missing_residual": ("缺少残差连接：子层输出要与它的输入相加（x + sublayer(x)）再归一化",
                         "a residual connection is missing: add the sublayer's input to its output (x + sublayer(x)) "
                         "before normalising"),
    "pre_ln_instead_of_post": ("写成了 Pre-LN：这里要求 Post-LN，即 LayerNorm(x + sublayer(x))",
                               "Pre-LN where Post-LN was asked: this contract is LayerNorm(x + sublayer(x))"),
    "post_ln_instead_of_pre": ("写成了 Post-LN：Pre-LN 是 x + sublayer(LayerNorm(x))，残差路径不经过归一化",
                               "Post-LN where Pre-LN was asked: Pre-LN is x + sublayer(LayerNorm(x)), the residual "
                               "path is not normalised"),
    "shared_norm": ("一个 LayerNorm 被两个子层共用：每个子层要有自己的 norm1、norm2……，各自学习自己的参数",
                    "one LayerNorm shared by two sublayers: each sublayer has its own norm1, norm2, ... with its own "
                    "parameters"),
})

# ---------------------------------------------------------------- the feed-forward block

FFN_BUGS = [
    Bug("ffn_no_activation", dict(act=None)),
    Bug("ffn_wrong_activation", dict(act="relu")),  # whatever the activation argument says
    Bug("ffn_wrong_activation", dict(act="gelu")),
    Bug("ffn_gelu_tanh", dict(tanh=True)),
    Bug("ffn_activation_after_fc2", dict(after_fc2=True)),
]


def ffn_variants(ref, case):
    x = case["x"]

    def run(act=case["activation"], tanh=False, after_fc2=False):
        fn = {"relu": F.relu, "gelu": lambda h: F.gelu(h, approximate="tanh" if tanh else "none"),
              None: lambda h: h}[act]
        out = ref.fc2(fn(ref.fc1(x)))
        return {"out": fn(out) if after_fc2 else out}

    return combine(FFN_BUGS, run)


# ---------------------------------------------------------------- normalisation

def layer_norm(x, weight, bias, eps, dims=(-1,), unbiased=False, eps_outside=False, affine=True, eps_value=None):
    eps = eps if eps_value is None else eps_value
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    std = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    y = (x - mean) / std
    return y * weight + bias if affine else y


LN_BUGS = [
    Bug("ln_wrong_axis", dict(dims=(0,))),
    Bug("ln_wrong_axis", dict(dims=(-2,))),
    Bug("ln_wrong_axis", dict(dims=(-2, -1))),
    Bug("ln_unbiased_var", dict(unbiased=True)),
    Bug("ln_eps_outside_sqrt", dict(eps_outside=True)),
    Bug("ln_no_affine", dict(affine=False)),
] + [Bug("ln_eps_value", dict(eps_value=eps)) for eps in (1e-12, 1e-6, 1e-8, 1e-5)]  # BERT, Annotated, ...


def _layer_norm_combinations(x, ln):
    """LayerNorm bugs alone and up to three at once (the Annotated Transformer's has three)."""
    note = lambda kw: ("" if "eps_value" not in kw else
                       f"eps = {kw['eps_value']:g}，契约是 {ln.eps:g} / eps = {kw['eps_value']:g}, the contract says "
                       f"{ln.eps:g}")
    return combine(LN_BUGS, lambda **kw: {"out": layer_norm(x, ln.weight, ln.bias, ln.eps, **kw)}, most=3, note=note)


def layer_norm_variants(ref, case):
    return _layer_norm_combinations(case["x"], ref)


def rms_variants(ref, case):
    x = case["x"]
    zero = torch.zeros_like(ref.weight)
    rms_out = lambda: {"out": x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + ref.eps) * ref.weight}
    plus_one = lambda: {"out": x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + ref.eps) * (1 + ref.weight)}
    return [wrong("rms_subtracts_mean", lambda: {"out": layer_norm(x, ref.weight, zero, ref.eps)}),
            wrong("ln_eps_outside_sqrt", rms_out), wrong("rms_weight_plus_one", plus_one)]


# ---------------------------------------------------------------- residual wrappers

def residual_variants(ref, case):
    x, s, ln = case["x"], case["sublayer_out"], ref.ln
    return [wrong("missing_residual", lambda: {"out": ln(s)}),
            wrong("pre_ln_instead_of_post", lambda: {"out": x + ln(s)}),
            wrong("pre_ln_instead_of_post", lambda: {"out": ln(x) + s})] + _layer_norm_combinations(x + s, ln)


def pre_ln_variants(ref, case):
    x, sub, ln = case["x"], case["sublayer"], ref.ln
    return [wrong("post_ln_instead_of_pre", lambda: {"out": ln(x + sub(x))}),
            wrong("missing_residual", lambda: {"out": sub(ln(x))})]


# ---------------------------------------------------------------- the checks

def _ffn_cases():
    g = torch.Generator().manual_seed(4)
    return [Case("relu, x (2, 5, 8), d_ff=32", {"x": randn(g, 2, 5, 8)}, {"d_ff": 32, "activation": "relu"}),
            Case("gelu, x (1, 3, 8), d_ff=16", {"x": randn(g, 1, 3, 8)}, {"d_ff": 16, "activation": "gelu"}),
            Case("relu, 2 维输入 / 2-D input x (4, 8)", {"x": randn(g, 4, 8)}, {"d_ff": 24, "activation": "relu"})]


def _ffn_probe(ref, g):
    activation = "gelu" if ref.activation is torch.nn.functional.gelu else "relu"
    return [Case("x", {"x": randn(g, 2, 3, ref.fc1.in_features)}, {"activation": activation})]


def norm_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [Case("x (2, 5, 8)", {"x": randn(g, 2, 5, 8, scale=3.0) + 1.0}, {"eps": 1e-5}),
            Case("小方差输入 / small-variance input (std 1e-3)", {"x": randn(g, 2, 4, 8, scale=1e-3)}, {"eps": 1e-5}),
            Case("B=1, eps=1e-3", {"x": randn(g, 1, 3, 8)}, {"eps": 1e-3}),
            Case("2 维输入 / 2-D input x (4, 8)", {"x": randn(g, 4, 8, scale=0.5)}, {"eps": 1e-5})]


def _residual_cases():
    g = torch.Generator().manual_seed(7)
    cases = []
    for c in norm_cases(7):
        c.inputs["sublayer_out"] = randn(g, *c["x"].shape, scale=float(c["x"].std()))
        cases.append(c)
    return cases


def _pre_ln_cases():
    cases = norm_cases(8)
    for c in cases:
        d = c["x"].size(-1)
        torch.manual_seed(9)
        lin = torch.nn.Linear(d, d).double()
        c.extra["sublayer"] = lambda h, lin=lin: torch.tanh(lin(h))
    return cases


def _probe_norm(ref, g):
    """Inputs for a LayerNorm run alone: an ordinary one and a small-variance one, where eps matters."""
    d = ref.weight.numel()
    return [Case("x", {"x": randn(g, 2, 3, d, scale=2.0) + 0.5}), Case("small", {"x": randn(g, 2, 3, d, scale=1e-3)})]


def _probe_residual(ref, g):
    d = ref.ln.weight.numel()
    return [Case(label, {"x": randn(g, 2, 3, d, scale=scale), "sublayer_out": randn(g, 2, 3, d, scale=scale)})
            for label, scale in (("x", 1.0), ("small", 1e-3))]


def _norm_args(case):
    return (case["x"].size(-1),), {"eps": case["eps"]}


ModuleCheck("FeedForward", cases=_ffn_cases, outputs=("out",), grads=("x",), forward=lambda m, case, x: m(x["x"]),
            make_args=lambda case: ((case["x"].size(-1), case["d_ff"]), {"activation": case["activation"]}),
            variants=ffn_variants, probe=_ffn_probe,
            mistakes=("ffn_no_activation", "ffn_wrong_activation", "ffn_activation_after_fc2", "no_autograd_graph"))

ModuleCheck("LayerNorm", cases=lambda: norm_cases(5), outputs=("out",), grads=("x",), make_args=_norm_args,
            forward=lambda m, case, x: m(x["x"]), variants=layer_norm_variants, probe=_probe_norm, shared="shared_norm",
            mistakes=("ln_wrong_axis", "ln_unbiased_var", "ln_eps_outside_sqrt", "ln_no_affine"))

ModuleCheck("RMSNorm", cases=lambda: norm_cases(6), outputs=("out",), grads=("x",), make_args=_norm_args,
            forward=lambda m, case, x: m(x["x"]), variants=rms_variants,
            mistakes=("rms_subtracts_mean", "rms_weight_plus_one"))

ModuleCheck("ResidualLayerNorm", cases=_residual_cases, outputs=("out",), grads=("x", "sublayer_out"),
            make_args=_norm_args, forward=lambda m, case, x: m(x["x"], x["sublayer_out"]), variants=residual_variants,
            parts=lambda ref: [("ln", "LayerNorm")], probe=_probe_residual, shared="shared_norm",
            wiring=lambda m, case: {"out": m.ln(case["x"] + case["sublayer_out"])},
            mistakes=("missing_residual", "pre_ln_instead_of_post"))

ModuleCheck("PreLNResidual", cases=_pre_ln_cases, outputs=("out",), grads=("x",), make_args=_norm_args,
            forward=lambda m, case, x: m(x["x"], case["sublayer"]), variants=pre_ln_variants,
            mistakes=("post_ln_instead_of_pre",))
