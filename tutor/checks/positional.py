"""Checks of chapter 03 (``solutions/positional.py``): sinusoidal tables, the positional-encoding
module, learned positions and RoPE."""
import torch

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, Failure, FunctionCheck, ModuleCheck, wrong

MISTAKES = define_mistakes({
    "pe_sin_cos_swapped": ("sin 和 cos 放反了：偶数列是 sin，奇数列是 cos",
                           "sin and cos are swapped: even columns are sin, odd columns cos"),
    "pe_freq_factor_2": ("频率差了 2 倍：指数应是 2i/d_model，其中 i 是第几对（列号 2i 和 2i+1 共用一个频率）",
                         "frequencies off by a factor 2 in the exponent: it is 2i/d_model with i the pair index "
                         "(columns 2i and 2i+1 share one frequency)"),
    "pe_sin_cos_halves": ("把 sin 放在前一半列、cos 放在后一半列：契约要求交错排列（偶数列 sin，奇数列 cos）",
                          "sin in the first half of the columns and cos in the second: the contract interleaves them "
                          "(even columns sin, odd cos)"),
    "pe_not_sliced": ("位置编码没有按序列长度切片：应加 pe[:, :T]，而不是整个 max_len 长的表",
                      "the positional table is not sliced to the sequence length: add pe[:, :T], not the whole max_len "
                      "table"),
    "pe_sliced_by_batch": ("位置编码按 x.size(0)（batch 大小）切片了：输入是 batch-first 的 (B, T, d_model)，应取 "
                           "pe[:, :x.size(1)]（PyTorch 教程的写法是 sequence-first）",
                           "the positional table is sliced by x.size(0), the batch size: inputs are batch-first (B, T, "
                           "d_model), take pe[:, :x.size(1)] (PyTorch's tutorial is sequence-first)"),
    "rope_half_split": ("RoPE 配对方式不对：本课程把相邻的 (2i, 2i+1) 配成一对，而不是 (i, i + d/2)",
                        "RoPE pairs the wrong features: this course rotates adjacent pairs (2i, 2i+1), not (i, i + d/"
                        "2)"),
    "rope_rotation_inverted": ("RoPE 旋转方向反了：out[2i] = x[2i]·cos − x[2i+1]·sin",
                               "RoPE rotates the wrong way: out[2i] = x[2i]·cos − x[2i+1]·sin"),
})


def pe_table(max_len, d_model, swap=False, exponent_factor=1.0, halves=False, dtype=torch.float64):
    """Sinusoidal table with switches for the known bugs; defaults = the contract."""
    position = torch.arange(max_len, dtype=dtype).unsqueeze(1)  # (max_len, 1)
    n_sin, n_cos = (d_model + 1) // 2, d_model // 2
    pair = torch.arange(n_sin, dtype=dtype)  # pair index i
    angles = position * torch.pow(10000.0, -2.0 * pair * exponent_factor / d_model)  # (max_len, n_sin)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    pe = torch.zeros(max_len, d_model, dtype=dtype)
    if halves:
        pe[:, :n_sin] = first(angles)
        pe[:, n_sin:] = second(angles[:, :n_cos])
    else:
        pe[:, 0::2] = first(angles)
        pe[:, 1::2] = second(angles[:, :n_cos])
    return pe


PE_BUGS = [
    Bug("pe_sin_cos_swapped", dict(swap=True)),
    Bug("pe_freq_factor_2", dict(exponent_factor=2.0)),
    Bug("pe_freq_factor_2", dict(exponent_factor=0.5)),
    Bug("pe_sin_cos_halves", dict(halves=True)),
]


def pe_table_variants(ref, case):
    return [wrong(b.id, lambda kw=b.switches: {"pe": pe_table(case["max_len"], case["d_model"], **kw)})
            for b in PE_BUGS]


def pe_module_variants(ref, case):
    x, max_len = case["x"], case["max_len"]

    def run(kw):
        pe = pe_table(max_len, x.size(-1), **kw).unsqueeze(0)  # (1, max_len, d_model)
        return {"pe": pe, "out": x + pe[:, : x.size(1)]}

    def sliced(length):
        pe = pe_table(max_len, x.size(-1)).unsqueeze(0)  # (1, max_len, d_model)
        return {"pe": pe, "out": x + pe[:, :length]}  # raises unless the length broadcasts

    return [wrong(b.id, lambda kw=b.switches: run(kw)) for b in PE_BUGS] + [
        wrong("pe_not_sliced", lambda: sliced(max_len)), wrong("pe_sliced_by_batch", lambda: sliced(x.size(0)))]


def rope(x, half_split=False, inverted=False, base=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angles = torch.arange(T, dtype=x.dtype).unsqueeze(-1) * theta  # (T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if inverted:
        sin = -sin
    if half_split:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # (..., T, d)


ROPE_BUGS = [Bug("rope_half_split", dict(half_split=True)), Bug("rope_rotation_inverted", dict(inverted=True))]


def rope_variants(ref, case):
    return combine(ROPE_BUGS, lambda **switches: {"out": rope(case["x"], **switches)})


# ---------------------------------------------------------------- the checks

def _pe_forward(m, case, x):
    pe = getattr(m, "pe", None)
    if pe is None:
        raise Failure("缺少缓冲区 pe / the buffer pe is missing: self.register_buffer('pe', ...)")
    return pe, m(case["x"])


def _positions_cases(seed, sizes):
    g = torch.Generator().manual_seed(seed)
    return [Case(f"d_model={d}, max_len={m}, x (B={b}, T={t})", {"x": randn(g, b, t, d)}, {"d_model": d, "max_len": m})
            for d, m, b, t in sizes]


def _apply_rope_cases():
    g = torch.Generator().manual_seed(13)
    return [Case("x (2, 2, 5, 8)", {"x": randn(g, 2, 2, 5, 8)}), Case("x (3, 4)", {"x": randn(g, 3, 4)})]


FunctionCheck("sinusoidal_positional_encoding", outputs=("pe",), variants=pe_table_variants,
              cases=lambda: [Case(f"max_len={m}, d_model={d}", {}, {"max_len": m, "d_model": d})
                             for m, d in ((10, 16), (50, 8), (7, 5), (1, 4))],
              call=lambda f, case, _: f(case["max_len"], case["d_model"]),
              mistakes=("pe_sin_cos_swapped", "pe_freq_factor_2", "pe_sin_cos_halves"))

ModuleCheck("PositionalEncoding", outputs=("pe", "out"), load=False, forward=_pe_forward, variants=pe_module_variants,
            cases=lambda: _positions_cases(3, ((16, 20, 2, 7), (5, 9, 1, 9), (8, 30, 3, 1))),
            make_args=lambda case: ((case["d_model"],), {"max_len": case["max_len"]}),
            probe=lambda ref, g: [Case("x", {"x": randn(g, 2, 5, ref.pe.size(-1))}, {"max_len": ref.pe.size(1)})],
            mistakes=("pe_not_sliced", "pe_sin_cos_swapped"))

ModuleCheck("LearnedPositionalEmbedding", outputs=("out",), grads=("x",), forward=lambda m, case, x: m(x["x"]),
            cases=lambda: _positions_cases(12, ((16, 20, 2, 7), (5, 9, 1, 9))),
            make_args=lambda case: ((case["d_model"],), {"max_len": case["max_len"]}))

FunctionCheck("apply_rope", cases=_apply_rope_cases, outputs=("out",), grads=("x",),
              call=lambda f, case, x: f(x["x"]), variants=rope_variants,
              mistakes=("rope_half_split", "rope_rotation_inverted"))
