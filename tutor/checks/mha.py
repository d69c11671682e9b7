"""Checks of chapter 02 (``solutions/mha.py``): multi-head attention.

Its wrong implementations reuse chapter 01's attention switches (``ATTENTION_BUGS``) inside the
heads, so a bug of the inner attention is named here too.
"""
import math

import torch

from ..engine.diagnosis import combine, exception_means
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, ModuleCheck, missing_parameter
from .attention import ATTENTION_BUGS, attention

MISTAKES = define_mistakes({
    "scale_by_d_model": ("多头里按 √d_model 缩放了：每个头的点积只有 d_k = d_model / H 维，应除以 √d_k",
                         "scaled by √d_model in multi-head attention: each head's dot product has d_k = d_model / H "
                         "terms, divide by √d_k"),
    "split_heads_no_transpose": ("拆头时直接 view 成 (B, H, T, d_k)：这会把不同 token 的数字混进一个头；"
                                 "应先 view(B, T, H, d_k) 再 transpose(1, 2)",
                                 "heads split by a straight view to (B, H, T, d_k): that mixes numbers of different "
                                 "tokens into one head; view(B, T, H, d_k) then transpose(1, 2)"),
    "merge_heads_no_transpose": ("合并头时没有先 transpose(1, 2) 回 (B, T, H, d_k)：直接 view 成 (B, T, d_model) "
                                 "会打乱 token",
                                 "heads merged without transpose(1, 2) back to (B, T, H, d_k): a straight view to (B, "
                                 "T, d_model) scrambles the tokens"),
    "view_without_contiguous": ("transpose 之后的张量不连续，不能直接 view：先 .contiguous() 或改用 reshape",
                                "a transposed tensor is not contiguous and cannot be viewed: call .contiguous() first "
                                "or use reshape"),
    "missing_w_o": ("缺少输出投影 W_o：合并各头之后还要再乘 W_o",
                    "the output projection W_o is missing: apply W_o after merging the heads"),
    "attn_averaged_over_heads": ("返回的注意力权重在头上取了平均（nn.MultiheadAttention 的默认做法）："
                                 "契约要每个头各自的权重 (B, H, T_q, T_k)",
                                 "the attention weights are averaged over the heads (nn.MultiheadAttention's default): "
                                 "the contract returns each head's weights, (B, H, T_q, T_k)"),
    "kv_swapped": ("K 和 V 用反了：键（用来打分）来自 W_k，值（被加权求和）来自 W_v",
                   "K and V are swapped: keys (scored against queries) come from W_k, values (averaged) from W_v"),
})

exception_means("view size is not compatible with input tensor's size and stride", "view_without_contiguous")
missing_parameter("W_o", "missing_w_o")  # a module without W_o's parameters: the output projection is missing


def mha(ref, x_q, x_kv, mask=None, split_transpose=True, merge_transpose=True, use_w_o=True,
        swap_kv=False, average_attn=False, **attn_kwargs):
    """Multi-head attention with the reference's weights and switches for each known bug."""
    B, T_q, d_model = x_q.shape
    T_k = x_kv.size(1)
    H, d_k = ref.num_heads, d_model // ref.num_heads

    def split(x, T):
        if split_transpose:
            return x.view(B, T, H, d_k).transpose(1, 2)  # (B, T, d_model) -> (B, H, T, d_k)
        return x.view(B, H, T, d_k)  # the bug: no transpose

    q, k, v = split(ref.W_q(x_q), T_q), split(ref.W_k(x_kv), T_k), split(ref.W_v(x_kv), T_k)
    if swap_kv:
        k, v = v, k
    out, attn = attention(q, k, v, mask, **attn_kwargs)  # (B, H, T_q, d_k), (B, H, T_q, T_k)
    if merge_transpose:
        out = out.transpose(1, 2).reshape(B, T_q, d_model)  # (B, T_q, H, d_k) -> (B, T_q, d_model)
    else:
        out = out.reshape(B, T_q, d_model)  # the bug: (B, H, T_q, d_k) read as (B, T_q, d_model)
    return (ref.W_o(out) if use_w_o else out), (attn.mean(dim=1) if average_attn else attn)


MHA_BUGS = [
    Bug("attn_averaged_over_heads", dict(average_attn=True)),
    Bug("split_heads_no_transpose", dict(split_transpose=False)),
    Bug("merge_heads_no_transpose", dict(merge_transpose=False)),
    Bug("missing_w_o", dict(use_w_o=False)),
    Bug("kv_swapped", dict(swap_kv=True)),
] + ATTENTION_BUGS


def mha_variants(ref, case):
    def run(kw):
        out, attn = mha(ref, case["x_q"], case.get("x_kv", case["x_q"]), case.get("mask"), **kw)
        return {"out": out, "attn": attn}

    bugs = MHA_BUGS + [Bug("scale_by_d_model", dict(scale=math.sqrt(case["x_q"].size(-1))))]
    return combine(bugs, lambda **kw: run(kw))


# ---------------------------------------------------------------- the check

def _mha_cases():
    g = torch.Generator().manual_seed(2)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    cases = []

    def add(label, d_model, H, B, T_q, T_k=None, mask=None):
        inputs = {"x_q": randn(g, B, T_q, d_model, scale=2.0)}
        if T_k is not None:
            inputs["x_kv"] = randn(g, B, T_k, d_model, scale=2.0)
        if mask is not None:
            inputs["mask"] = mask
        cases.append(Case(label, inputs, {"d_model": d_model, "H": H}))

    add("自注意力 / self-attention, B=2 T=5 d_model=16 H=4", 16, 4, 2, 5)
    add("交叉注意力 + 键填充 / cross-attention + key padding, T_q=3 T_k=6 H=4", 16, 4, 2, 3, 6,
        torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :])
    add("B=1 H=1, 因果 / causal, d_model=8", 8, 1, 1, 4, mask=causal[..., :4, :4])
    pad = torch.tensor([[True, True, True, True, True], [False, True, True, True, False]])[:, None, None, :]
    add("填充 & 因果，含整行被遮挡 / padding & causal, a fully masked row, d_model=12 "
        "H=2", 12, 2, 2, 5, mask=pad & causal)
    return cases


def _mha_probe(ref, g):
    """Self- and cross-attention inputs, sized from the reference part, for running it alone."""
    d = ref.W_q.in_features
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)  # (B, T) with padding
    pad, causal = keep[:, None, None, :], torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    return [Case("self", {"x_q": randn(g, 2, 5, d), "mask": pad & causal}),
            Case("cross", {"x_q": randn(g, 2, 3, d), "x_kv": randn(g, 2, 5, d), "mask": pad})]


ModuleCheck("MultiHeadAttention", cases=_mha_cases, outputs=("out", "attn"), grads=("x_q", "x_kv"),
            make_args=lambda case: ((case["d_model"], case["H"]), {}),
            forward=lambda m, case, x: m(x["x_q"], x.get("x_kv", x["x_q"]), case.get("mask")),
            variants=mha_variants, probe=_mha_probe,
            mistakes=("no_scale", "scale_by_d_model", "split_heads_no_transpose", "merge_heads_no_transpose",
                      "view_without_contiguous", "missing_w_o", "kv_swapped"))
