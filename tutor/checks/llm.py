"""Checks of the LLM components (``solutions/llm.py``, docs/CONTRACT_LLM.md): grouped-query attention
with RoPE and a KV cache, SwiGLU, the GPT block and model, sliding-window masks and the cost formulas."""
import torch
import torch.nn.functional as F

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, Failure, FunctionCheck, ModuleCheck, wrong
from .attention import attention

MISTAKES = define_mistakes({
    "kv_cache_not_returned": ("没有返回缓存（返回了 None）：forward 返回 (out, cache)，"
                              "cache 是这一层拼接之后的 (k, v)，下一步生成要用它",
                              "the cache is not returned (None): forward returns (out, cache), cache being this "
                              "layer's concatenated (k, v), which the next generation step needs"),
    "gqa_repeat_not_interleave": ("KV 头的复制顺序错了：用了 repeat（第 h 个查询头拿到 KV 头 h % G），应是 "
                                  "repeat_interleave（相邻的 H/G 个查询头共用 KV 头 h // (H/G)）",
                                  "KV heads repeated in the wrong order: repeat gives query head h the KV head h % G; "
                                  "use repeat_interleave (adjacent H/G query heads share KV head h // (H/G))"),
    "kv_cache_positions_reset": ("用 KV 缓存时新 token 的 RoPE 位置从 0 重新算了："
                                 "新 token 的位置是 T_past, T_past + 1, ……",
                                 "with a KV cache the new tokens are rotated as if they were at position 0: their "
                                 "positions are T_past, T_past + 1, ..."),
    "kv_cache_before_rope": ("缓存里存的是旋转之前的键：契约要求缓存存 RoPE 之后的键（之后每步不必再旋转旧键）",
                             "the cache holds keys before RoPE: the contract caches the rotated keys (old keys are "
                             "never rotated again)"),
    "rope_on_values": ("RoPE 也作用到了 V 上：只旋转 Q 和 K（位置信息只进入打分），V 不旋转",
                       "RoPE is applied to V too: rotate only Q and K (positions enter the scores), never V"),
    "kv_cache_repeated_heads": ("缓存里存的是复制之后的 H 个头：GQA 的缓存只存 G = num_kv_heads 个键/值头 "
                                "(B, G, T, d_k)，复制只在算注意力时做，这正是 GQA 省内存的地方",
                                "the cache holds the H repeated heads: a GQA cache keeps the G = num_kv_heads "
                                "key/value heads, (B, G, T, d_k), and repeats them only to attend; that is the memory "
                                "GQA saves"),
    "swiglu_gate_wrong_branch": ("SiLU 放错了分支：应是 down(silu(gate(x)) * up(x))，SiLU 作用在 gate_proj 上，up_proj "
                                 "保持线性",
                                 "SiLU on the wrong branch: it is down(silu(gate(x)) * up(x)), SiLU on gate_proj, "
                                 "up_proj stays linear"),
    "swiglu_sigmoid_gate": ("门用了 sigmoid（原始 GLU）：SwiGLU 的门是 SiLU(x) = x·sigmoid(x)",
                            "the gate uses sigmoid (the original GLU): SwiGLU's gate is SiLU(x) = x·sigmoid(x)"),
    "swiglu_silu_after_product": ("SiLU 作用在乘积上：应先 silu(gate(x))，再乘 up(x)",
                                  "SiLU applied to the product: take silu(gate(x)) first, then multiply by up(x)"),
    "gpt_no_final_norm": ("最后一个块之后缺少最终的 RMSNorm：Pre-LN 的残差路径从不归一化，lm_head 之前要有 norm",
                          "the final RMSNorm after the last block is missing: a Pre-LN residual stream is never "
                          "normalised, so apply norm before lm_head"),
    "window_off_by_one": ("滑动窗口差一：查询 i 应看 i - window < j <= i，恰好 window 个键（含自己）",
                          "sliding window off by one: query i sees i - window < j <= i, exactly window keys including "
                          "itself"),
    "window_not_causal": ("滑动窗口没有因果：未来的键也能看到；应同时满足 j <= i",
                          "the sliding window is not causal: future keys are visible; j <= i must hold too"),
    "flops_macs_not_doubled": ("把乘加当成 1 次 FLOP：一次乘加是 2 FLOPs（一次乘法、一次加法）",
                               "a multiply-add counted as 1 FLOP: it is 2 FLOPs (a multiply and an add)"),
    "flops_missing_projections": ("漏了 W_q、W_k、W_v、W_o 四个投影的 FLOPs：只算了 n² 的两项",
                                  "the FLOPs of the projections W_q, W_k, W_v, W_o are missing: only the two n² terms "
                                  "are counted"),
    "flops_kv_heads_ignored": ("K、V 投影按 H 个头算了：GQA 的 W_k、W_v 只有 num_kv_heads · d_k 列",
                               "the K and V projections counted with H heads: in GQA W_k and W_v have num_kv_heads · "
                               "d_k columns"),
    "attn_memory_one_head": ("注意力矩阵的内存漏乘了头数 H：每个头都有一个 n × n 矩阵",
                             "the attention-matrix memory misses the factor H: every head has its own n × n matrix"),
    "kv_cache_only_k": ("KV 缓存漏了因子 2：K 和 V 各存一份",
                        "the KV cache misses the factor 2: both K and V are stored"),
    "kv_cache_one_layer": ("KV 缓存只算了一层：每一层都有自己的 K、V",
                           "the KV cache counts one layer only: every layer keeps its own K and V"),
})

# ---------------------------------------------------------------- grouped-query attention

def repeat_kv_variants(ref, case):
    x, n = case["x"], case["n_rep"]
    return [wrong("gqa_repeat_not_interleave", lambda: {"out": x.repeat(1, n, 1, 1)})]


def gqa(ref, x, mask=None, cache=None, interleave=True, half_split=False, reset_positions=False, rope_v=False,
        cache_raw=False, scale="sqrt_dk", cache_repeated=False, **attn_kwargs):
    """Grouped-query attention with the reference's weights and switches for the known bugs."""
    B, T, d = x.shape
    H, G, d_k = ref.num_heads, ref.num_kv_heads, ref.d_k
    q = ref.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
    k = ref.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
    v = ref.W_v(x).view(B, T, G, d_k).transpose(1, 2)
    T_past = 0 if cache is None else cache[0].size(2)
    start = 0 if reset_positions else T_past
    scale = d ** 0.5 if scale == "sqrt_d_model" else scale

    def rot(t, first, length):
        pos = torch.arange(first, first + length, dtype=t.dtype)
        theta = ref.rope_base ** (-torch.arange(0, d_k, 2, dtype=t.dtype) / d_k)
        ang = pos[:, None] * theta  # (T, d_k/2)
        cos, sin = torch.cos(ang), torch.sin(ang)
        if half_split:
            a, b = t[..., : d_k // 2], t[..., d_k // 2:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    if ref.rope and not cache_raw:
        q, k = rot(q, start, T), rot(k, start, T)
        if rope_v:
            v = rot(v, start, T)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    kq = k
    if ref.rope and cache_raw:  # raw keys cached, all rotated by their absolute positions
        q, kq = rot(q, T_past, T), rot(k, 0, k.size(2))
    rep = (lambda t: t.repeat_interleave(H // G, dim=1)) if interleave else (lambda t: t.repeat(1, H // G, 1, 1))
    out, _ = attention(q, rep(kq), rep(v), mask, scale=scale, **attn_kwargs)
    if cache_repeated:  # the H repeated heads cached instead of the G KV heads
        k, v = rep(k), rep(v)  # (B, H, T_past + T, d_k)
    return {"out": ref.W_o(out.transpose(1, 2).reshape(B, T, d)), "k_cache": k, "v_cache": v}


GQA_BUGS = [
    Bug("gqa_repeat_not_interleave", dict(interleave=False)),
    Bug("rope_half_split", dict(half_split=True)),
    Bug("kv_cache_positions_reset", dict(reset_positions=True)),
    Bug("kv_cache_before_rope", dict(cache_raw=True)),
    Bug("rope_on_values", dict(rope_v=True)),
    Bug("no_scale", dict(scale=None)),
    Bug("scale_by_d_model", dict(scale="sqrt_d_model")),
    Bug("mask_inverted", dict(invert=True)),
    Bug("nan_fully_masked", dict(fill="-inf", zero_blocked=False)),
    Bug("fully_masked_uniform", dict(fill="-1e9", zero_blocked=False)),
    Bug("kv_cache_repeated_heads", dict(cache_repeated=True)),
]


def gqa_variants(ref, case):
    return combine(GQA_BUGS, lambda **kw: gqa(ref, case["x"], case.get("mask"), case.get("cache"), **kw))


# ---------------------------------------------------------------- SwiGLU, the block, the model

def swiglu(ref, x, act="silu", branch="gate", after=False):
    fn = {"silu": F.silu, "sigmoid": torch.sigmoid}[act]
    gate, up = ref.gate_proj(x), ref.up_proj(x)
    if after:
        return ref.down_proj(fn(gate * up))
    return ref.down_proj(fn(gate) * up if branch == "gate" else gate * fn(up))


SWIGLU_BUGS = [Bug("swiglu_gate_wrong_branch", dict(branch="up")), Bug("swiglu_sigmoid_gate", dict(act="sigmoid")),
               Bug("swiglu_silu_after_product", dict(after=True))]


def swiglu_variants(ref, case):
    return combine(SWIGLU_BUGS, lambda **kw: {"out": swiglu(ref, case["x"], **kw)})


def gpt_block(ref, x, mask, pre_ln=True, residual_from_input=False, attn_residual=True, gqa_kw=None,
              swiglu_kw=None):
    attn = gqa(ref.attn, ref.norm1(x) if pre_ln else x, mask, **(gqa_kw or {}))["out"]
    if not pre_ln:
        h = ref.norm1(x + attn)
        return ref.norm2(h + swiglu(ref.ffn, h, **(swiglu_kw or {})))
    h = x + attn if attn_residual else attn
    return (x if residual_from_input else h) + swiglu(ref.ffn, ref.norm2(h), **(swiglu_kw or {}))


BLOCK_GQA_BUGS = ("gqa_repeat_not_interleave", "rope_half_split", "no_scale", "scale_by_d_model", "mask_inverted")


def gpt_block_variants(ref, case):
    x, mask = case["x"], case.get("mask")
    return ([wrong("post_ln_instead_of_pre", lambda: {"out": gpt_block(ref, x, mask, pre_ln=False)}),
             wrong("residual_wrong_source", lambda: {"out": gpt_block(ref, x, mask, residual_from_input=True)}),
             wrong("missing_residual", lambda: {"out": gpt_block(ref, x, mask, attn_residual=False)})]
            + [wrong(b.id, lambda kw=b.switches: {"out": gpt_block(ref, x, mask, gqa_kw=kw)})
               for b in GQA_BUGS if b.id in BLOCK_GQA_BUGS]
            + [wrong(b.id, lambda kw=b.switches: {"out": gpt_block(ref, x, mask, swiglu_kw=kw)})
               for b in SWIGLU_BUGS])


def gpt_forward(ref, idx, causal=True, final_norm=True):
    T = idx.size(1)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None] if causal else None
    x = ref.tok_embed(idx)
    for block in ref.blocks:
        x = gpt_block(block, x, mask)
    return ref.lm_head(ref.norm(x) if final_norm else x)


def gpt_variants(ref, case):
    idx = case["idx"]
    return [wrong("causal_missing", lambda: {"logits": gpt_forward(ref, idx, causal=False)}),
            wrong("gpt_no_final_norm", lambda: {"logits": gpt_forward(ref, idx, final_norm=False)})]


# ---------------------------------------------------------------- masks and costs

def sliding_window_variants(ref, case):
    T, w = case["T"], case["window"]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    run = lambda m: {"mask": m[None, None]}
    return [wrong("window_off_by_one", lambda: run((j <= i) & (j >= i - w))),
            wrong("window_off_by_one", lambda: run((j <= i) & (j > i - w + 1))),
            wrong("window_not_causal", lambda: run((i - j).abs() < w))]


def attention_cost_variants(ref, case):
    n, d, H, G, B, b = (case[k] for k in ("n", "d", "H", "num_kv_heads", "batch", "bytes_per_element"))
    G = G or H
    d_k = d // H

    def run(mac=2, projections=True, kv_heads=G, heads=H):
        proj = mac * n * d * (2 * d + 2 * kv_heads * d_k) if projections else 0
        return {"flops": B * (proj + 2 * mac * n * n * H * d_k), "attn_bytes": B * heads * n * n * b}

    return [wrong("flops_macs_not_doubled", lambda: run(mac=1)),
            wrong("flops_missing_projections", lambda: run(projections=False)),
            wrong("flops_kv_heads_ignored", lambda: run(kv_heads=H)),
            wrong("attn_memory_one_head", lambda: run(heads=1))]


def kv_cache_bytes_variants(ref, case):
    keys = ("num_layers", "num_kv_heads", "head_dim", "seq_len", "batch", "bytes_per_element")
    L, G, d, T, B, b = (case[k] for k in keys)
    return [wrong("kv_cache_only_k", lambda: {"bytes": L * G * d * T * B * b}),
            wrong("kv_cache_one_layer", lambda: {"bytes": 2 * G * d * T * B * b})]


# ---------------------------------------------------------------- the checks

def _repeat_kv_cases():
    g = torch.Generator().manual_seed(30)
    return [Case(f"x {shape}, n_rep={n}", {"x": randn(g, *shape)}, {"n_rep": n})
            for shape, n in (((2, 2, 3, 4), 2), ((1, 3, 2, 5), 3), ((1, 1, 4, 2), 4), ((2, 2, 3, 4), 1))]


def _gqa_forward(m, case, x):
    out, cache = m(x["x"], case.get("mask"), case.get("cache"))
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        raise Failure("GroupedQueryAttention.forward 应返回 (out, (k, v)) / must return (out, (k, v))",
                      "kv_cache_not_returned" if cache is None else None)
    return out, cache[0], cache[1]


def _gpt_block_forward(m, case, x):
    returned = m(x["x"], case.get("mask"))
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise Failure("GPTBlock.forward 应返回 (out, cache) / must return (out, cache)")
    out, cache = returned
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        raise Failure("GPTBlock.forward 应返回 (out, cache)，cache 是注意力的 (k, v) / must return (out, cache), "
                      "cache being its attention's (k, v)", "kv_cache_not_returned" if cache is None else None)
    return out, cache[0], cache[1]


def _gpt_block_rule(case, expected, got):
    """``self.norm2 = self.norm1``: one RMSNorm object in both places."""
    m = case.built
    return "shared_norm" if m is not None and getattr(m, "norm1", None) is getattr(m, "norm2", 0) else None


def _gqa_cases():
    g = torch.Generator().manual_seed(31)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], dtype=torch.bool)
    left = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)  # row 2's first query sees no key
    cases = []

    def add(label, d_model, H, G, B, T, rope=True, mask=None, T_past=0):
        inputs = {"x": randn(g, B, T, d_model)}
        if mask is not None:
            inputs["mask"] = mask
        if T_past:
            d_k = d_model // H
            inputs["cache"] = (randn(g, B, G, T_past, d_k, scale=2.0), randn(g, B, G, T_past, d_k))
        cases.append(Case(label, inputs, {"cfg": (d_model, H, G), "rope": rope}))

    add("GQA H=4 G=2, 因果 & 填充 / causal & padding", 32, 4, 2, 2, 5, mask=keep[:, None, None, :] & causal)
    add("MQA H=4 G=1, 无掩码、无 RoPE / no mask, no RoPE, B=1", 16, 4, 1, 1, 4, rope=False)
    add("MHA H=2 G=2, 因果 / causal", 16, 2, 2, 2, 5, mask=torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None])
    add("KV 缓存 / KV cache: T_past=3, T=2 (T_q≠T_k), H=4 G=2", 32, 4, 2, 2, 2, T_past=3)
    add("B=1 H=1 G=1, KV 缓存 / KV cache T_past=4, T=1", 8, 1, 1, 1, 1, T_past=4)
    add("左填充，含整行被遮挡（契约：输出 0）/ left padding, a fully masked row (the contract: zeros), H=4 G=2",
        16, 4, 2, 2, 5, mask=left[:, None, None, :] & causal)
    return cases


def _swiglu_cases():
    g = torch.Generator().manual_seed(32)
    return [Case("x (2, 5, 8), d_ff=12", {"x": randn(g, 2, 5, 8)}, {"d_ff": 12}),
            Case("B=1, x (1, 3, 8), d_ff=16", {"x": randn(g, 1, 3, 8, scale=2.0)}, {"d_ff": 16}),
            Case("2 维输入 / 2-D input x (4, 6), d_ff=10", {"x": randn(g, 4, 6)}, {"d_ff": 10})]


def _gpt_block_cases():
    g = torch.Generator().manual_seed(33)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :]
    return [Case("因果 & 填充 / causal & padding, B=2 T=5 d_model=16 H=4 G=2",
                 {"x": randn(g, 2, 5, 16), "mask": causal & keep}, {"cfg": (16, 4, 2, 24)}),
            Case("因果 / causal, B=1 T=4 d_model=8 H=2 G=1", {"x": randn(g, 1, 4, 8), "mask": causal[..., :4, :4]},
                 {"cfg": (8, 2, 1, 12)})]


GPT_CFG = dict(d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=16)


def _gpt_cases():
    return [Case("B=2 T=6, 不共享权重 / untied", {"idx": torch.tensor([[3, 4, 5, 6, 7, 8], [1, 9, 9, 2, 0, 10]])},
                 {"tie": False}),
            Case("B=1 T=4, tie_weights=True", {"idx": torch.tensor([[5, 2, 7, 1]])}, {"tie": True})]


def _named_cases(keys, rows):
    """Cases of plain numbers, each labelled 'key=value, ...'."""
    return [Case(", ".join(f"{k}={v}" for k, v in zip(keys, values)), {}, dict(zip(keys, values))) for values in rows]


_FLOPS_KEYS = ("n", "d", "H", "num_kv_heads", "batch", "bytes_per_element")
_KV_KEYS = ("num_layers", "num_kv_heads", "head_dim", "seq_len", "batch", "bytes_per_element")

FunctionCheck("repeat_kv", cases=_repeat_kv_cases, outputs=("out",), grads=("x",), variants=repeat_kv_variants,
              call=lambda f, case, x: f(x["x"], case["n_rep"]),
              mistakes=("gqa_repeat_not_interleave",))

ModuleCheck("GroupedQueryAttention", cases=_gqa_cases, outputs=("out", "k_cache", "v_cache"), grads=("x",),
            make_args=lambda case: (case["cfg"], {"rope": case["rope"]}), forward=_gqa_forward, variants=gqa_variants,
            mistakes=("gqa_repeat_not_interleave", "kv_cache_positions_reset", "rope_half_split", "nan_fully_masked",
                      "kv_cache_repeated_heads", "rope_on_values", "kv_cache_before_rope", "scale_by_d_model",
                      "mask_inverted", "kv_cache_not_returned"))

ModuleCheck("SwiGLU", cases=_swiglu_cases, outputs=("out",), grads=("x",), forward=lambda m, case, x: m(x["x"]),
            make_args=lambda case: ((case["x"].size(-1), case["d_ff"]), {}), variants=swiglu_variants,
            mistakes=("swiglu_gate_wrong_branch", "swiglu_sigmoid_gate", "swiglu_silu_after_product"))

ModuleCheck("GPTBlock", cases=_gpt_block_cases, outputs=("out", "k_cache", "v_cache"), grads=("x",),
            variants=gpt_block_variants, rule=_gpt_block_rule,
            make_args=lambda case: (case["cfg"], {}), forward=_gpt_block_forward,
            mistakes=("post_ln_instead_of_pre", "missing_residual", "shared_norm", "kv_cache_not_returned"))

ModuleCheck("GPT", cases=_gpt_cases, outputs=("logits",), variants=gpt_variants,
            make_args=lambda case: ((11,), {**GPT_CFG, "tie_weights": case["tie"]}),
            forward=lambda m, case, x: m(case["idx"]),
            mistakes=("causal_missing", "gpt_no_final_norm"))

FunctionCheck("make_sliding_window_mask", outputs=("mask",), variants=sliding_window_variants,
              cases=lambda: [Case(f"T={T}, window={w}", {}, {"T": T, "window": w})
                             for T, w in ((6, 3), (5, 1), (7, 2), (4, 9))],
              call=lambda f, case, _: f(case["T"], case["window"]),
              mistakes=("window_not_causal", "window_off_by_one"))

FunctionCheck("attention_flops_and_memory", outputs=("flops", "attn_bytes"), variants=attention_cost_variants,
              cases=lambda: _named_cases(_FLOPS_KEYS, ((128, 64, 4, None, 1, 4), (1024, 512, 8, 2, 2, 2),
                                                       (4096, 4096, 32, 8, 1, 2), (16, 32, 4, 1, 3, 8))),
              call=lambda f, case, _: f(*(case[k] for k in _FLOPS_KEYS[:3]), num_kv_heads=case["num_kv_heads"],
                                        batch=case["batch"], bytes_per_element=case["bytes_per_element"]),
              mistakes=("attn_memory_one_head", "flops_macs_not_doubled", "flops_kv_heads_ignored",
                        "flops_missing_projections"))

FunctionCheck("kv_cache_bytes", outputs=("bytes",), variants=kv_cache_bytes_variants,
              cases=lambda: _named_cases(_KV_KEYS, ((32, 8, 128, 1, 1, 2), (32, 32, 128, 4096, 1, 2),
                                                    (2, 1, 16, 10, 3, 4))),
              call=lambda f, case, _: f(*(case[k] for k in _KV_KEYS[:3]), seq_len=case["seq_len"], batch=case["batch"],
                                        bytes_per_element=case["bytes_per_element"]),
              mistakes=("kv_cache_one_layer", "kv_cache_only_k"))
