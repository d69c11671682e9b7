"""Checks of chapter 01 (``solutions/attention.py``): softmax, attention in NumPy and in PyTorch.

Each check is declared once below with its cases; its known mistakes are explained right above the
wrong implementation that makes them (``attention`` with one switch per bug, shared by ``mha`` and
``llm``).
"""
import math

import numpy as np
import torch

from ..engine.diagnosis import combine, exception_means
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, FunctionCheck, ModuleCheck, wrong

# ---------------------------------------------------------------- the known mistakes

MISTAKES = define_mistakes({
    "no_scale": ("注意力分数没有除以 √d_k：d_k 大时 softmax 饱和、梯度消失",
                 "scores are not divided by √d_k: for large d_k the softmax saturates and gradients vanish"),
    "scale_by_dk": ("除以了 d_k 而不是 √d_k：Q·K 的方差是 d_k，要除以标准差 √d_k",
                    "divided by d_k instead of √d_k: Q·K has variance d_k, divide by its std √d_k"),
    "softmax_wrong_axis": ("softmax 的轴错了：应在最后一维（对每个查询的所有键）归一化",
                           "softmax over the wrong axis: normalise over the last axis (all keys of one query)"),
    "softmax_ignores_axis": ("softmax 忽略了 axis 参数，总在最后一维归一化：max 和 sum 都要沿 axis 取（keepdims=True）",
                             "softmax ignores its axis argument and always normalises the last axis: take max and sum "
                             "along axis (keepdims=True)"),
    "softmax_all_elements": ("softmax 对整个数组归一化（max/sum 没有指定轴）：应沿 axis 归一化，每个切片之和为 1",
                             "softmax normalises the whole array (max/sum without an axis): normalise along axis, each "
                             "slice sums to 1"),
    "softmax_fixed_axis": ("softmax 总在一条固定的轴（例如 axis=0，常见的 e_x / e_x.sum(axis=0)）上求和，没有沿 axis："
                           "max 和 sum 都要沿 axis 取（keepdims=True）",
                           "softmax sums over a fixed axis (e.g. the common e_x / e_x.sum(axis=0)), not along axis: "
                           "take max and sum along axis (keepdims=True)"),
    "softmax_unstable": ("没有先减去最大值：大输入时 exp 溢出得到 inf/NaN",
                         "the maximum is not subtracted first: exp overflows to inf/NaN for large inputs"),
    "mask_inverted": ("掩码约定反了：本课程 True = 可以看，True 的位置要保留，False 的位置才遮挡",
                      "mask convention inverted: in this course True = may attend; block the False positions, keep the "
                      "True ones"),
    "mask_after_softmax": ("在 softmax 之后才遮挡：被遮挡位置置 0 后每行之和不再是 1；应在 softmax "
                           "之前把分数设为很大的负数",
                           "mask applied after the softmax: zeroing weights afterwards leaves rows that do not sum to "
                           "1; fill the scores before the softmax"),
    "mask_multiplies_scores": ("被遮挡的分数变成了 0（scores * mask，或 masked_fill(~mask, 0)）"
                               "而不是很大的负数：exp(0) = 1，它们仍然分到权重；用 -inf 或 dtype 最小值填充",
                               "blocked scores become 0 (scores * mask, or masked_fill(~mask, 0)), not a large "
                               "negative number: exp(0) = 1, so they still get weight; fill with -inf or the "
                               "dtype's minimum"),
    "mask_zero_then_after_softmax": ("先把被遮挡的分数设为 0，softmax 之后又把它们的权重清零："
                                     "这些 0 分数在 softmax 里已经分走了概率，清零后每行之和不再是 1；"
                                     "在 softmax 之前用很大的负数填充，之后不要再改权重",
                                     "blocked scores set to 0 before the softmax and their weights zeroed after it: "
                                     "the 0 scores already took probability in the softmax, so rows no longer sum to "
                                     "1; fill with a large negative number before the softmax and leave the weights "
                                     "alone afterwards"),
    "nan_fully_masked": ("用 -inf 填充后，整行都被遮挡的查询得到 NaN；契约要求这样的行输出全 0",
                         "filling with -inf gives NaN on a query row whose keys are all blocked; the contract asks for "
                         "zeros there"),
    "fully_masked_uniform": ("整行都被遮挡时得到均匀权重（用了有限的大负数却没把被遮挡的权重清零）；契约要求全 0",
                             "a fully blocked row gets uniform weights (a finite large negative fill without zeroing "
                             "the blocked weights); the contract asks for zeros"),
    "mask_shape": ("掩码不能广播到注意力分数 (B, H, T_q, T_k)：make_pad_mask 已是 (B, 1, 1, T)，make_subsequent_mask "
                   "已是 (1, 1, T, T)，直接传入，不要再 unsqueeze",
                   "the mask does not broadcast to the scores (B, H, T_q, T_k): make_pad_mask already gives (B, 1, 1, "
                   "T) and make_subsequent_mask (1, 1, T, T); pass them as they are, without another unsqueeze"),
    "mask_not_bool": ("掩码可能是 0/1 整数：先 mask.to(torch.bool) 再用 ~mask 或 masked_fill",
                      "the mask may be 0/1 integers: convert with mask.to(torch.bool) before ~mask or masked_fill"),
})

exception_means("only supports boolean masks", "mask_not_bool")
exception_means("bitwise_not", "mask_not_bool")
exception_means("is not broadcastable to the scores", "mask_shape")  # the course's scaled_dot_product_attention


def attention(Q, K, V, mask=None, scale="sqrt_dk", softmax_dim=-1, invert=False, mode="fill",
              fill="min", zero_blocked=True):
    """Scaled dot-product attention with switches for each known bug; defaults = the contract."""
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1)  # (..., T_q, T_k)
    if scale == "sqrt_dk":
        scores = scores / math.sqrt(d_k)
    elif scale == "dk":
        scores = scores / d_k
    elif scale is not None:
        scores = scores / scale
    if mask is not None:
        mask = mask.to(torch.bool)
        if invert:
            mask = ~mask
        if mode == "fill":
            value = {"min": torch.finfo(scores.dtype).min, "-inf": float("-inf"), "-1e9": -1e9}[fill]
            scores = scores.masked_fill(~mask, value)
        elif mode in ("multiply", "zero_then_after"):
            scores = scores * mask
    attn = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and (zero_blocked or mode in ("after_softmax", "zero_then_after")):
        attn = attn.masked_fill(~mask, 0.0)
    return attn @ V, attn  # (..., T_q, d_v), (..., T_q, T_k)


ATTENTION_BUGS = [
    Bug("no_scale", dict(scale=None)),
    Bug("scale_by_dk", dict(scale="dk")),
    Bug("softmax_wrong_axis", dict(softmax_dim=-2)),
    Bug("mask_inverted", dict(invert=True)),
    Bug("mask_after_softmax", dict(mode="after_softmax")),
    Bug("mask_multiplies_scores", dict(mode="multiply", zero_blocked=False)),
    Bug("mask_zero_then_after_softmax", dict(mode="zero_then_after")),
    Bug("nan_fully_masked", dict(fill="-inf", zero_blocked=False)),
    Bug("fully_masked_uniform", dict(fill="-1e9", zero_blocked=False)),
]


def _attention_variants(Q, K, V, mask, to_output):
    return combine(ATTENTION_BUGS, lambda **kw: to_output(*attention(Q, K, V, mask, **kw)))


def sdpa_variants(ref, case):
    to_output = lambda out, attn: {"out": out, "attn": attn}
    return _attention_variants(case["Q"], case["K"], case["V"], case.get("mask"), to_output)


def numpy_attention_variants(ref, case):
    t = lambda a: None if a is None else torch.from_numpy(np.asarray(a))
    to_output = lambda out, attn: {"out": out.numpy(), "weights": attn.numpy()}
    return _attention_variants(t(case["Q"]), t(case["K"]), t(case["V"]), t(case.get("mask")), to_output)


def softmax_variants(ref, case):
    x = case["x"]

    def run(axis=case["axis"], stable=True):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x - np.max(x, axis=axis, keepdims=True)) if stable else np.exp(x)
            return {"y": e / np.sum(e, axis=axis, keepdims=True)}

    def fixed_axis(axis):  # the whole array's max (stable enough), the sum over one fixed axis
        e = np.exp(x - np.max(x))
        return {"y": e / e.sum(axis=axis, keepdims=True)}

    return combine([Bug("softmax_unstable", dict(stable=False)), Bug("softmax_ignores_axis", dict(axis=-1)),
                    Bug("softmax_all_elements", dict(axis=None))], run) + [
        wrong("softmax_fixed_axis", lambda axis=axis: fixed_axis(axis)) for axis in (0, 1) if axis < x.ndim]


# ---------------------------------------------------------------- the checks

def _softmax_cases():
    rng = np.random.default_rng(0)
    return [Case("axis=-1, 2 维 / 2-D", {"x": rng.normal(size=(2, 5)) * 3}, {"axis": -1}),
            Case("大输入 / large inputs (~1000)", {"x": rng.normal(size=(3, 4)) + 1000.0}, {"axis": -1}),
            Case("axis=0, 3 维 / 3-D", {"x": rng.normal(size=(3, 4, 5))}, {"axis": 0}),
            Case("很负的输入 / very negative inputs, axis=1", {"x": rng.normal(size=(2, 3)) - 1000.0}, {"axis": 1}),
            Case("1 维 / 1-D", {"x": rng.normal(size=(6,))}, {"axis": -1})]


def attention_cases():
    """SDPA cases: 4-D and 3-D, T_q != T_k, d_v != d_k, padding/causal/combined masks, a fully masked row, 0/1 ints."""

    g = torch.Generator().manual_seed(1)
    cases = []

    def add(label, q_shape, T_k, d_v, mask=None):
        *lead, T_q, d_k = q_shape
        inputs = {"Q": randn(g, *q_shape), "K": randn(g, *lead, T_k, d_k), "V": randn(g, *lead, T_k, d_v)}
        if mask is not None:
            inputs["mask"] = mask
        cases.append(Case(label, inputs))

    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None, None]
    pad = torch.tensor([[True, True, True, True], [False, True, True, False]])[:, None, None, :]
    add("无掩码 / no mask, B=2 H=2 T_q=3 T_k=5 d_k=8 d_v=6", (2, 2, 3, 8), 5, 6)
    add("B=1 H=1, 键填充掩码 / key padding mask", (1, 1, 4, 8), 5, 3,
        torch.tensor([[True, True, True, False, False]])[:, None, None, :])
    add("因果掩码 / causal mask, T=4", (2, 3, 4, 4), 4, 4, causal)
    add("填充 & 因果，含整行被遮挡 / padding & causal with a fully masked row", (2, 2, 4, 8), 4, 5, pad & causal)
    add("0/1 整数掩码、3 维输入 / 0/1 integer mask, 3-D inputs", (2, 3, 8), 5, 4,
        torch.tensor([[[1, 1, 0, 1, 0]], [[0, 0, 0, 0, 0]]]))
    return cases


def _numpy_cases():
    return [Case(c.label, {k: v.numpy() for k, v in c.inputs.items()}) for c in attention_cases()]


FunctionCheck("softmax", cases=_softmax_cases, outputs=("y",),
              call=lambda f, case, _: f(case["x"].copy(), axis=case["axis"]), variants=softmax_variants,
              mistakes=("softmax_unstable", "softmax_ignores_axis", "softmax_fixed_axis", "softmax_all_elements"))

FunctionCheck("attention_numpy", cases=_numpy_cases, outputs=("out", "weights"),
              call=lambda f, case, _: f(*(case[k].copy() for k in ("Q", "K", "V")), case.get("mask")),
              variants=numpy_attention_variants,
              mistakes=("no_scale",))

FunctionCheck("scaled_dot_product_attention", cases=attention_cases, outputs=("out", "attn"), grads=("Q", "K", "V"),
              call=lambda f, case, x: f(x["Q"], x["K"], x["V"], case.get("mask")), variants=sdpa_variants,
              mistakes=("no_scale", "scale_by_dk", "softmax_wrong_axis", "mask_inverted", "mask_after_softmax",
                        "mask_multiplies_scores", "mask_zero_then_after_softmax", "nan_fully_masked",
                        "fully_masked_uniform", "mask_not_bool"))

def _sdpa_module_cases():
    """The SDPA cases in eval mode, then one in training mode: dropout=0.5 must act (the visible test asks it)."""
    cases = attention_cases()[:4]
    train = cases[0]
    cases.append(Case("训练模式、dropout=0.5 / training mode, dropout=0.5", dict(train.inputs), {"train": True}))
    return cases


def _dropout_acts(m, Q, K, V, mask):
    """[some weight dropped, the kept ones scaled by 1/(1 - p)] of ``m`` in training mode, as a tensor."""
    m.eval()
    with torch.no_grad():
        _, expected = m(Q, K, V, mask)
        m.train()
        torch.manual_seed(0)
        out, attn = m(Q, K, V, mask)
    m.eval()
    if not (isinstance(attn, torch.Tensor) and attn.shape == expected.shape):
        return torch.zeros(2), torch.zeros(2)
    dropped, kept = (attn == 0) & (expected != 0), attn != 0
    scaled = bool(torch.allclose(attn[kept], expected[kept] * 2.0)) and bool(torch.allclose(out, attn @ V))
    acts = torch.tensor([float(dropped.any()), float(scaled)])
    return acts, acts


def _sdpa_module_forward(m, case, x):
    if case.get("train"):
        return _dropout_acts(m, x["Q"].detach(), x["K"].detach(), x["V"].detach(), case.get("mask"))
    return m(x["Q"], x["K"], x["V"], case.get("mask"))


def sdpa_module_variants(ref, case):
    if case.get("train"):  # the known attention bugs leave dropout alone
        return [wrong(b.id, lambda: {"out": torch.ones(2), "attn": torch.ones(2)}) for b in ATTENTION_BUGS]
    return sdpa_variants(ref, case)


ModuleCheck("ScaledDotProductAttention", cases=_sdpa_module_cases, outputs=("out", "attn"),
            grads=("Q", "K", "V"), make_args=lambda case: ((), {"dropout": 0.5}), load=False,
            forward=_sdpa_module_forward, variants=sdpa_module_variants,
            mistakes=("no_scale",))
