"""Checks of chapter 05's layers (``solutions/layers.py``): the Post-LN encoder and decoder layers.

Both are composites: a failure no single wiring bug explains is localised in their parts
(attention, FFN, norms) by ``tutor.engine.localise``, with ``parts``, ``probe`` and ``wiring`` below.
"""
import torch

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, Failure, ModuleCheck

MISTAKES = define_mistakes({
    "layers_shared": ("所有层是同一个对象（例如 [layer] * N）：它们共用一组参数；每层都要新建一次，如 [Layer(...) for "
                      "_ in range(N)]",
                      "every layer is the same object (e.g. [layer] * N), so they share one set of weights: build each "
                      "layer anew, [Layer(...) for _ in range(N)]"),
    "norms_swapped": ("LayerNorm 用错了位置：第 k 个子层之后用 norm{k}（norm1 在自注意力之后……）",
                      "the LayerNorms are used in the wrong places: sublayer k is followed by norm{k} (norm1 after "
                      "self-attention, ...)"),
    "residual_wrong_source": ("残差加错了对象：每个子层加的是它自己的输入（上一个子层的输出），不是整层的输入",
                              "the residual adds the wrong tensor: each sublayer adds its own input (the previous "
                              "sublayer's output), not the layer's input"),
    "src_mask_missing": ("编码器没有用源序列的填充掩码：PAD token 被当作真实内容关注",
                         "the encoder ignores the source padding mask: PAD tokens are attended to as if they were "
                         "content"),
    "memory_mask_missing": ("交叉注意力没有用源序列的填充掩码：解码器会关注源序列的 PAD",
                            "cross-attention ignores the source padding mask: the decoder attends to source PAD "
                            "tokens"),
    "cross_attn_target_mask": ("交叉注意力用了目标序列的掩码：它的键来自 memory（源序列），应使用源序列的填充掩码 "
                               "memory_mask",
                               "cross-attention uses the target mask: its keys come from memory (the source), use the "
                               "source padding mask memory_mask"),
    "cross_attn_wrong_source": ("交叉注意力的键和值应来自 memory（编码器输出），查询来自解码器",
                                "cross-attention takes keys and values from memory (the encoder output) and queries "
                                "from the decoder"),
})


def encoder_layer(ref, x, mask, residual=(True, True), pre_ln=False, use_mask=True, norms=(1, 2),
                  skip_from_input=False):
    """The Post-LN encoder layer from ``ref``'s parts, with switches for the known wiring bugs."""
    x0, mask = x, (mask if use_mask else None)
    n1, n2 = (getattr(ref, f"norm{k}").ln for k in norms)
    attn_sub = lambda h: ref.self_attn(h, h, mask)[0]
    if pre_ln:
        x = x + attn_sub(n1(x))
        return x + ref.ffn(n2(x))
    a = attn_sub(x)
    x = n1(x + a if residual[0] else a)
    f = ref.ffn(x)
    return n2((x0 if skip_from_input else x) + f if residual[1] else f)


ENCODER_BUGS = [
    Bug("missing_residual", dict(residual=(False, True))),
    Bug("missing_residual", dict(residual=(True, False))),
    Bug("missing_residual", dict(residual=(False, False))),
    Bug("pre_ln_instead_of_post", dict(pre_ln=True)),
    Bug("src_mask_missing", dict(use_mask=False)),
    Bug("shared_norm", dict(norms=(1, 1))),
    Bug("shared_norm", dict(norms=(2, 2))),
    Bug("norms_swapped", dict(norms=(2, 1))),
    Bug("residual_wrong_source", dict(skip_from_input=True)),
]


def encoder_variants(ref, case):
    x, mask = case["x"], case.get("src_mask")
    return combine(ENCODER_BUGS, lambda **kw: {"out": encoder_layer(ref, x, mask, **kw)})


def decoder_layer(ref, y, memory, tgt_mask, memory_mask, residual=(True, True, True), pre_ln=False,
                  cross_mask="memory", cross_source="memory", norms=(1, 2, 3), skip_from_input=False):
    """The Post-LN decoder layer from ``ref``'s parts, with switches for the known wiring bugs."""
    cmask = {"memory": memory_mask, "target": tgt_mask, None: None}[cross_mask]
    n1, n2, n3 = (getattr(ref, f"norm{k}").ln for k in norms)
    self_sub = lambda h: ref.self_attn(h, h, tgt_mask)[0]
    cross_sub = {"memory": lambda h: ref.cross_attn(h, memory, cmask)[0],
                 "target": lambda h: ref.cross_attn(h, h, cmask)[0],
                 "swapped": lambda h: ref.cross_attn(memory, h, cmask)[0]}[cross_source]  # swapped: queries from memory
    if pre_ln:
        y = y + self_sub(n1(y))
        y = y + cross_sub(n2(y))
        return y + ref.ffn(n3(y))
    y0 = y
    for sub, norm, keep in ((self_sub, n1, residual[0]), (cross_sub, n2, residual[1]), (ref.ffn, n3, residual[2])):
        s = sub(y)
        y = norm((y0 if skip_from_input else y) + s if keep else s)
    return y


# one norm reused by another sublayer (norm k in place of norm j), or one norm for all three; norms permuted
_SHARED = [tuple(k if i == j else i for i in (1, 2, 3)) for j in (1, 2, 3) for k in (1, 2, 3) if k != j] + [(1, 1, 1)]
_SWAPPED = [(2, 1, 3), (1, 3, 2), (3, 2, 1), (2, 3, 1), (3, 1, 2)]
DECODER_BUGS = [Bug("missing_residual", dict(residual=tuple(i != k for i in range(3)))) for k in range(3)] + [
    Bug("pre_ln_instead_of_post", dict(pre_ln=True)),
    Bug("cross_attn_target_mask", dict(cross_mask="target")),
    Bug("memory_mask_missing", dict(cross_mask=None)),
    Bug("cross_attn_wrong_source", dict(cross_source="target")),
    Bug("cross_attn_wrong_source", dict(cross_source="target", cross_mask="target")),
    Bug("cross_attn_wrong_source", dict(cross_source="swapped")),
    Bug("residual_wrong_source", dict(skip_from_input=True)),
] + [Bug("shared_norm", dict(norms=norms)) for norms in _SHARED] + [
    Bug("norms_swapped", dict(norms=norms)) for norms in _SWAPPED]


def decoder_variants(ref, case):
    args = (case["y"], case["memory"], case.get("tgt_mask"), case.get("memory_mask"))
    return combine(DECODER_BUGS, lambda **kw: {"out": decoder_layer(ref, *args, **kw)})


# ---------------------------------------------------------------- the checks

def pad_causal(keep):
    T = keep.size(1)
    return keep[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]


def _encoder_cases():
    g = torch.Generator().manual_seed(10)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    return [Case("键填充 / key padding, B=2 T=5 d_model=16 H=4",
                 {"x": randn(g, 2, 5, 16), "src_mask": keep[:, None, None, :]}, {"cfg": (16, 4, 32)}),
            Case("无掩码 / no mask, B=1 T=3 d_model=8 H=1", {"x": randn(g, 1, 3, 8)}, {"cfg": (8, 1, 16)})]


def _decoder_cases():
    g = torch.Generator().manual_seed(11)
    keep_t = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    keep_s = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    keep_5 = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    return [Case("因果 & 填充 / causal & padding, T_t=4 T_s=6 d_model=16 H=4",
                 {"y": randn(g, 2, 4, 16), "memory": randn(g, 2, 6, 16), "tgt_mask": pad_causal(keep_t),
                  "memory_mask": keep_s[:, None, None, :]}, {"cfg": (16, 4, 32)}),
            Case("T_t = T_s = 5, B=1 H=2",
                 {"y": randn(g, 1, 5, 8), "memory": randn(g, 1, 5, 8),
                  "tgt_mask": pad_causal(torch.ones(1, 5, dtype=torch.bool)),
                  "memory_mask": keep_5[:, None, None, :]}, {"cfg": (8, 2, 16)})]


def _decoder_forward(m, case, x):
    y, weights = m(x["y"], x["memory"], case.get("tgt_mask"), case.get("memory_mask"))
    if not isinstance(weights, (tuple, list)) or len(weights) != 2:
        raise Failure("DecoderLayer.forward 应返回 (y, (self_attn_w, cross_attn_w)) / "
                      "must return (y, (self_attn_w, cross_attn_w))")
    return y, weights[0], weights[1]


def _probe_masks():
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)  # (B, T) with padding
    return keep[:, None, None, :], torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]


def _probe_encoder(ref, g):
    pad, _ = _probe_masks()
    return [Case("x", {"x": randn(g, 2, 5, ref.norm1.ln.weight.numel()), "src_mask": pad})]


def _probe_decoder(ref, g):
    d = ref.norm1.ln.weight.numel()
    pad, causal = _probe_masks()
    return [Case("y", {"y": randn(g, 2, 5, d), "memory": randn(g, 2, 5, d), "tgt_mask": pad & causal,
                       "memory_mask": pad})]


_NORMS = [f"norm{k}" for k in (1, 2, 3)]

ModuleCheck("EncoderLayer", cases=_encoder_cases, outputs=("out", "attn"), grads=("x",),
            make_args=lambda case: (case["cfg"], {"dropout": 0.1}),
            forward=lambda m, case, x: m(x["x"], case.get("src_mask")), variants=encoder_variants,
            parts=lambda ref: [("self_attn", "MultiHeadAttention"), ("ffn", "FeedForward")]
            + [(n, "ResidualLayerNorm") for n in _NORMS[:2]],
            wiring=lambda m, case: {"out": encoder_layer(m, case["x"], case.get("src_mask"))},
            probe=_probe_encoder, shared="layers_shared",
            mistakes=("missing_residual", "pre_ln_instead_of_post", "src_mask_missing"))

ModuleCheck("DecoderLayer", cases=_decoder_cases, outputs=("out", "self_attn", "cross_attn"), grads=("y", "memory"),
            make_args=lambda case: (case["cfg"], {"dropout": 0.1}), forward=_decoder_forward, variants=decoder_variants,
            parts=lambda ref: [("self_attn", "MultiHeadAttention"), ("cross_attn", "MultiHeadAttention"),
                               ("ffn", "FeedForward")] + [(n, "ResidualLayerNorm") for n in _NORMS],
            wiring=lambda m, case: {"out": decoder_layer(m, case["y"], case["memory"], case.get("tgt_mask"),
                                                         case.get("memory_mask"))},
            probe=_probe_decoder, shared="layers_shared",
            mistakes=("missing_residual", "cross_attn_target_mask", "cross_attn_wrong_source"))
