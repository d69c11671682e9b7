"""Checks of chapter 13, efficiency by hand (``solutions/efficiency.py``): online softmax, tiled attention,
the MoE router and layer, the load-balancing loss, INT8 per-channel quantization."""
import math

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ..engine.diagnosis import combine
from ..engine.messages import define_mistakes
from ..engine.running import randn
from ..engine.specs import Bug, Case, Failure, FunctionCheck, ModuleCheck, wrong

MISTAKES = define_mistakes({
    "online_no_rescale": (
        "最大值变大时没有重新缩放旧的和：s 里的旧项是相对旧最大值 m 算的，要先乘 exp(m - m_new) 再加 exp(x_j - m_new)",
        "the running sum is not rescaled when the max grows: its old terms are relative to the old max m, multiply "
        "by exp(m - m_new) before adding exp(x_j - m_new)"),
    "online_max_updated_after_sum": (
        "新项 exp(x_j - m) 用的是更新前的最大值：先求 m_new = max(m, x_j)，再把新项写成 exp(x_j - m_new)"
        "（从 m = -inf 开始时第一项就成了 inf，结果全为 0）",
        "the new term exp(x_j - m) uses the max before its update: take m_new = max(m, x_j) first, then add "
        "exp(x_j - m_new) (starting from m = -inf the first term is inf and the result all zeros)"),
    "tiled_no_rescale": (
        "分块时最大值变大了，累加器 acc 和行和 l 都没有乘 exp(m_old - m_new)：前面各块是相对旧最大值累加的",
        "when a block raises the row max, neither the accumulator acc nor the row sum l is multiplied by "
        "exp(m_old - m_new): the earlier blocks were summed relative to the old max"),
    "tiled_acc_not_rescaled": (
        "行和 l 重新缩放了，输出累加器 acc 却没有：两者都要乘 exp(m_old - m_new)",
        "the row sum l is rescaled but the output accumulator acc is not: both are multiplied by "
        "exp(m_old - m_new)"),
    "tiled_causal_diagonal_unmasked": (
        "因果：跳过了对角线以上的整块，但对角线上的块内部没有遮挡（块内 key 位置 > query 位置的也被看到了）",
        "causal: the blocks above the diagonal are skipped, but the block on the diagonal is not masked inside "
        "(keys after the query within that block are seen)"),
    "tiled_causal_ignored": (
        "causal=True 被忽略了：每个 query 只能看位置不超过它自己的 key",
        "causal=True is ignored: each query may attend only to keys at positions up to its own"),
    "tiled_materialises_scores": (
        "算出了整张 T_q x T_k 的分数（或权重）矩阵：分块注意力的意义就在于每次只有一块 (b_q, b_k) 的分数，"
        "整行的 softmax 由运行最大值、运行和与累加器逐块合并",
        "the whole T_q x T_k score (or weight) matrix was computed: the point of tiled attention is that only one "
        "(b_q, b_k) block of scores exists at a time, the row's softmax merged block by block with the running max, "
        "running sum and accumulator"),
    "router_softmax_after_topk": (
        "先取 top-k 再 softmax（或总是把 k 个权重除以它们的和）：normalize=False 时契约先在全部专家上 softmax、"
        "再取前 k 个，权重就是这 k 个概率本身（Switch、DeepSeek-V2）；只有 normalize=True 时两种顺序才相等（Mixtral）",
        "top-k first, then the softmax (or the k weights always divided by their sum): with normalize=False the "
        "contract takes the softmax over all experts, then the top k, and the weights are those k probabilities "
        "(Switch, DeepSeek-V2); only with normalize=True do the two orders agree (Mixtral)"),
    "router_not_renormalised": (
        "normalize=True 时 k 个权重没有除以它们的和：每个 token 的 k 个权重加起来应为 1",
        "with normalize=True the k weights are not divided by their sum: each token's k weights must add up to 1"),
    "router_softmax_wrong_axis": (
        "路由的 softmax 沿错了轴（沿 token 维）：logits 是 (N, E)，沿专家维 dim=-1 归一化",
        "the router's softmax runs along the wrong axis (over tokens): logits are (N, E), normalise over the "
        "experts, dim=-1"),
    "moe_weights_not_applied": (
        "专家输出没有乘路由权重：out_t = sum_e w_te * expert_e(x_t)，没有权重时路由器也得不到梯度",
        "the experts' outputs are not multiplied by the router weights: out_t = sum_e w_te * expert_e(x_t); "
        "without the weights the router gets no gradient either"),
    "moe_weight_wrong_slot": (
        "专家输出乘的是第 0 个位置（最大）的权重，而不是选中该专家的那个位置的权重：torch.where(indices == e) "
        "同时给出 token 和位置 slot，用 weights[token, slot]",
        "each expert's output is weighted by slot 0's (the largest) weight instead of the weight of the slot "
        "that chose it: torch.where(indices == e) gives the token and the slot, use weights[token, slot]"),
    "aux_softmax_wrong_axis": (
        "负载均衡损失里的 softmax 沿了 token 维：P_i 是每个 token 在专家上的 softmax（dim=-1）对 token 求平均",
        "the load-balancing loss takes its softmax over the tokens: P_i is the softmax over the experts "
        "(dim=-1) of each token, averaged over the tokens"),
    "aux_f_from_probs": (
        "f_i 用的是概率而不是计数：f_i 是真正被分给专家 i 的 token 比例（由 expert_index 数出，不可导），"
        "P_i 才是平均概率；两者都用概率时损失变成 N * sum P_i^2",
        "f_i is taken from the probabilities instead of the counts: f_i is the fraction of tokens actually sent "
        "to expert i (counted from expert_index, not differentiable), P_i the mean probability; with both from "
        "the probabilities the loss becomes N * sum P_i^2"),
    "aux_no_num_experts": (
        "少乘了专家数 N：损失是 N * sum_i f_i * P_i（均匀时为 k，与专家数无关）",
        "the factor N (the number of experts) is missing: the loss is N * sum_i f_i * P_i (k when uniform, "
        "whatever the number of experts)"),
    "aux_counts_not_fraction": (
        "f_i 是计数而不是比例：要除以 token 数 T",
        "f_i is a count, not a fraction: divide by the number of tokens T"),
    "aux_probs_after_topk": (
        "P 取自只在 top-k 个 logits 上的 softmax，又沿 k 个位置（而不是沿 token）平均"
        "（transformers 4.36 的 Mixtral 损失）：每个 token 的 k 个概率加起来总是 1，损失恒等于 N / k，"
        "对路由器没有梯度；P_i 是全部专家上的 softmax 对 token 求平均",
        "P is taken from a softmax over the top-k logits only and averaged over the k slots, not over the tokens "
        "(transformers 4.36's Mixtral loss): each token's k probabilities always add up to 1, so the loss is the "
        "constant N / k and gives the router no gradient; P_i is the softmax over all experts averaged over the "
        "tokens"),
    "mla_caches_keys_and_values": (
        "缓存的是升维之后的 K 和 V，而不是潜向量：MLA 省内存就在于缓存只存 c = W_dkv(x)（每 token d_latent 个数），"
        "K、V 用时再由 W_uk、W_uv 算出",
        "the cache holds the up-projected K and V instead of the latent: MLA saves memory by caching only "
        "c = W_dkv(x) (d_latent numbers a token) and computing K and V from it with W_uk and W_uv when needed"),
    "mla_values_from_key_projection": (
        "V 也是用 W_uk 从潜向量升上来的：键和值各有自己的上投影，V = W_uv(c)",
        "V is up-projected from the latent with W_uk too: keys and values have their own up-projections, "
        "V = W_uv(c)"),
    "int8_per_tensor_scale": (
        "整个张量只用了一个 scale：契约是逐输出通道（每行一个，amax 沿 dim=1，keepdim），"
        "否则数值小的行只剩几个量化等级",
        "one scale for the whole tensor: the contract has one per output channel (one a row, amax along dim=1, "
        "keepdim), otherwise rows of small values keep only a few levels"),
    "int8_scale_per_input_channel": (
        "scale 是逐输入通道（每列）的：w 是 (out, in)，逐输出通道的 scale 沿 dim=1 取最大绝对值，形状 (out, 1)",
        "the scale is per input channel (one a column): w is (out, in), the per-output-channel scale takes the "
        "absmax along dim=1, shape (out, 1)"),
    "int8_divides_by_128": (
        "scale 除以 128 而不是 127：对称量化用 [-127, 127]，absmax / 128 会让最大值变成 128，超出 int8 的正半边"
        "（截断成 127 或溢出成 -128）",
        "the scale divides by 128 instead of 127: symmetric quantization uses [-127, 127]; absmax / 128 maps the "
        "largest value to 128, beyond int8's positive range (clamped to 127 or wrapped to -128)"),
    "int8_no_round": (
        "没有四舍五入：.to(torch.int8) 向零截断，误差可达一个 scale；先 torch.round(w / scale)",
        "no rounding: .to(torch.int8) truncates toward zero, an error of up to one scale; torch.round(w / scale) "
        "first"),
})


# ---------------------------------------------------------------- online_softmax

def _online(x, rescale=True, max_first=True, start="-inf"):
    """One-pass softmax with the learner's possible slips: no rescale, the new term against the old max."""
    if start == "-inf":
        m, s, first = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype), torch.zeros(x.shape[:-1], dtype=x.dtype), 0
    else:
        m, s, first = x[..., 0].clone(), torch.ones(x.shape[:-1], dtype=x.dtype), 1
    for j in range(first, x.shape[-1]):
        m_new = torch.maximum(m, x[..., j])
        factor = torch.exp(m - m_new) if rescale else 1.0
        s = s * factor + torch.exp(x[..., j] - (m_new if max_first else m))
        m = m_new
    with torch.no_grad():
        return {"y": torch.exp(x - m[..., None]) / s[..., None]}


def online_softmax_variants(ref, case):
    x = case["x"]
    return [wrong("online_no_rescale", lambda: _online(x, rescale=False)),
            wrong("online_no_rescale", lambda: _online(x, rescale=False, start="first")),
            wrong("online_max_updated_after_sum", lambda: _online(x, max_first=False)),
            wrong("online_max_updated_after_sum", lambda: _online(x, max_first=False, start="first"))]


def _online_cases():
    g = torch.Generator().manual_seed(130)
    rising = torch.arange(8, dtype=torch.float64).repeat(2, 1)                        # the max grows at every step
    return [Case("x (3, 7)", {"x": randn(g, 3, 7, scale=3.0)}, {}),
            Case("x (2, 3, 5)", {"x": randn(g, 2, 3, 5, scale=2.0)}, {}),
            Case("递增的一行：最大值每步都变 / a rising row: the max changes at every step", {"x": rising}, {}),
            Case("大数值 / large values (~1000)", {"x": randn(g, 2, 6) + 1000.0}, {}),
            Case("一维、只有一个元素 / 1-D, one element", {"x": randn(g, 1)}, {})]


# ---------------------------------------------------------------- tiled_attention

def _tiled(q, k, v, block, causal, scale=True, rescale="both", diagonal=True):
    d = q.shape[-1]
    T_q, T_k = q.shape[-2], k.shape[-2]
    out = torch.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    for i0 in range(0, T_q, block):
        qb = q[..., i0:i0 + block, :]
        b = qb.shape[-2]
        m = torch.full(qb.shape[:-1], -math.inf, dtype=q.dtype)
        row_sum = torch.zeros(qb.shape[:-1], dtype=q.dtype)
        acc = torch.zeros(qb.shape[:-1] + v.shape[-1:], dtype=q.dtype)
        for j0 in range(0, min(T_k, i0 + b) if causal else T_k, block):
            kb, vb = k[..., j0:j0 + block, :], v[..., j0:j0 + block, :]
            s = qb @ kb.transpose(-2, -1) / (math.sqrt(d) if scale else 1.0)
            if causal and diagonal:
                rows = torch.arange(i0, i0 + b)[:, None]
                s = s.masked_fill(torch.arange(j0, j0 + kb.shape[-2])[None, :] > rows, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - m_new[..., None])
            factor = torch.exp(m - m_new)
            row_sum = row_sum * (factor if rescale in ("both", "l") else 1.0) + p.sum(-1)
            acc = acc * (factor[..., None] if rescale == "both" else 1.0) + p @ vb
            m = m_new
        out[..., i0:i0 + b, :] = acc / row_sum[..., None]
    return {"out": out}


class _ScoresWatch(TorchDispatchMode):
    """Whether any operation returns a tensor whose last two axes cover all ``T_q`` queries and ``T_k`` keys."""

    def __init__(self, T_q, T_k):
        super().__init__()
        self.T_q, self.T_k, self.seen = T_q, T_k, False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.dim() >= 2 and t.shape[-2] >= self.T_q and t.shape[-1] >= self.T_k:
                self.seen = True
        return out


def _tiled_call(f, case, _):
    """The learner's output, watched: with blocks smaller than the sequences, no tensor may be T_q x T_k
    (the cases keep d below T_k, so that q, k and v themselves never look like scores)."""
    q, k, v, block = case["q"], case["k"], case["v"], case["block_size"]
    T_q, T_k = q.shape[-2], k.shape[-2]
    with _ScoresWatch(T_q, T_k) as watch:
        out = f(q.clone(), k.clone(), v.clone(), block_size=block, causal=case["causal"])
    if block < min(T_q, T_k) and watch.seen:
        raise Failure(f"tiled_attention 生成了 {T_q} x {T_k} 的矩阵，block_size={block} / built a {T_q} x {T_k} "
                      f"matrix with block_size={block}", "tiled_materialises_scores")
    return out


TILED_BUGS = [Bug("no_scale", dict(scale=False)), Bug("tiled_no_rescale", dict(rescale="none")),
              Bug("tiled_acc_not_rescaled", dict(rescale="l")),
              Bug("tiled_causal_diagonal_unmasked", dict(diagonal=False)),
              Bug("tiled_causal_ignored", dict(causal=False))]


def tiled_variants(ref, case):
    q, k, v, block, causal = case["q"], case["k"], case["v"], case["block_size"], case["causal"]
    bugs = TILED_BUGS if causal else TILED_BUGS[:3]

    def run(causal=causal, **switches):
        with torch.no_grad():
            return _tiled(q, k, v, block, causal, **switches)
    return combine(bugs, run)


def _tiled_cases():
    g = torch.Generator().manual_seed(131)
    cases = []
    for B, H, T_q, T_k, d, block, causal in ((2, 2, 9, 9, 4, 4, False), (1, 2, 6, 11, 8, 3, False),
                                             (2, 1, 10, 10, 4, 4, True), (1, 2, 12, 12, 4, 3, True),
                                             (1, 1, 5, 5, 2, 16, True)):
        ramp = torch.linspace(0, 3, T_k, dtype=torch.float64)[:, None]              # later keys score higher
        cases.append(Case(f"T_q={T_q}, T_k={T_k}, block_size={block}, causal={causal}",
                          {"q": randn(g, B, H, T_q, d, scale=2.0), "k": randn(g, B, H, T_k, d) + ramp,
                           "v": randn(g, B, H, T_k, d)}, {"block_size": block, "causal": causal}))
    return cases


# ---------------------------------------------------------------- TopKRouter and MoELayer

def _route(logits, k, normalize, order="softmax_first", renormalise=True, softmax_dim=-1):
    probs = torch.softmax(logits, dim=softmax_dim)
    top, indices = probs.topk(k, dim=-1)
    if order == "topk_first":
        top = torch.softmax(logits.gather(-1, indices), dim=-1)
    elif normalize and renormalise:
        top = top / top.sum(-1, keepdim=True)
    return top, indices


ROUTER_BUGS = [Bug("router_softmax_after_topk", dict(order="topk_first")),
               Bug("router_not_renormalised", dict(renormalise=False)),
               Bug("router_softmax_wrong_axis", dict(softmax_dim=0))]


def router_variants(ref, case):
    x = case["x"]
    logits = x @ ref.gate.weight.T                                                   # (N, d) @ (d, E)

    def run(**switches):
        weights, indices = _route(logits.detach(), ref.top_k, ref.normalize, **switches)
        return {"weights": weights, "indices": indices}
    return combine(ROUTER_BUGS, run)


def moe_variants(ref, case):
    x = case["x"]
    tokens = x.reshape(-1, x.shape[-1])                                             # (N, d_model)
    with torch.no_grad():
        logits = tokens @ ref.router.gate.weight.T                                  # (N, d) @ (d, E)
        expert_out = [expert(tokens) for expert in ref.experts]                     # E x (N, d_model)

    def run(weighted=True, slot="own", **switches):
        weights, indices = _route(logits, ref.router.top_k, ref.router.normalize, **switches)
        out = torch.zeros_like(tokens)
        for e, y in enumerate(expert_out):
            rows, slots = torch.where(indices == e)
            w = weights[rows, slots if slot == "own" else 0][:, None] if weighted else 1.0
            out = out.index_add(0, rows, y[rows] * w)
        return {"out": out.reshape(x.shape)}
    return combine([*ROUTER_BUGS, Bug("moe_weights_not_applied", dict(weighted=False)),
                    Bug("moe_weight_wrong_slot", dict(slot="first"))], run)


def _router_cases():
    g = torch.Generator().manual_seed(132)
    return [Case(f"x ({N}, {d}), num_experts={E}, top_k={k}, normalize={norm}", {"x": randn(g, N, d, scale=2.0)},
                 {"cfg": (d, E, k, norm)})
            for N, d, E, k, norm in ((6, 8, 4, 2, True), (7, 8, 4, 2, False), (5, 6, 5, 1, False),
                                     (6, 6, 5, 3, True))]


def _moe_cases():
    g = torch.Generator().manual_seed(133)
    return [Case(f"x ({B}, {T}, {d}), d_ff={f}, num_experts={E}, top_k={k}, normalize={norm}",
                 {"x": randn(g, B, T, d, scale=2.0)}, {"cfg": (d, f, E, k, norm)})
            for B, T, d, f, E, k, norm in ((2, 4, 8, 12, 4, 2, True), (1, 6, 8, 10, 4, 2, False),
                                           (2, 3, 6, 8, 3, 1, False))]


def _moe_args(case):
    *args, normalize = case["cfg"]
    return tuple(args), {"normalize": normalize}


# ---------------------------------------------------------------- load_balancing_loss

def _aux(logits, index, n, softmax_dim=-1, f_from="counts", factor=True, fraction=True):
    probs = torch.softmax(logits, dim=softmax_dim)
    counts = torch.stack([(index == i).sum() for i in range(n)]).to(logits.dtype)
    f = probs.mean(0) if f_from == "probs" else counts / (logits.shape[0] if fraction else 1)
    return {"loss": (n if factor else 1) * (f * probs.mean(0)).sum()}


AUX_BUGS = [Bug("aux_softmax_wrong_axis", dict(softmax_dim=0)), Bug("aux_f_from_probs", dict(f_from="probs")),
            Bug("aux_no_num_experts", dict(factor=False)), Bug("aux_counts_not_fraction", dict(fraction=False))]


def _aux_after_topk(logits, index, n):
    """transformers 4.36: P from a softmax over the top-k logits, averaged over the k slots; the routing mask
    averaged over the slots of each token, not over the tokens (a constant N / k)."""
    per_slot = F.one_hot(index, n).to(logits.dtype).mean(-2)                                     # (T, N), rows sum to 1
    per_token = torch.softmax(logits.gather(-1, index), dim=-1).mean(-1)                         # (T,): always 1 / k
    return {"loss": n * n * (per_slot * per_token[:, None]).mean()}


def aux_variants(ref, case):
    logits, index, n = case["router_logits"].detach(), case["expert_index"], case["num_experts"]
    return [wrong("aux_probs_after_topk", lambda: _aux_after_topk(logits, index, n)),
            *combine(AUX_BUGS, lambda **switches: _aux(logits, index, n, **switches))]


def _aux_call(f, case, leaves):
    """The learner's loss. Two normalisations of f are right: the fraction of tokens (the f sum to k:
    Hugging Face's ``load_balancing_loss_func``, the reference) and the fraction of the T * k assignments
    (the f sum to 1, as Megatron-LM divides by top-k); a loss written the second way is compared times k."""
    logits, index, n = leaves["router_logits"], case["expert_index"], case["num_experts"]
    loss = f(logits, index.clone(), n)
    k = index.shape[-1]
    if isinstance(loss, torch.Tensor) and loss.dim() == 0 and k > 1:
        per_assignment = _aux(logits.detach(), index, n)["loss"] / k
        if math.isclose(loss.item(), per_assignment.item(), rel_tol=1e-6, abs_tol=1e-12):
            loss = loss * k
    return loss


def _aux_cases():
    g = torch.Generator().manual_seed(134)
    cases = []
    for T, n, k in ((12, 4, 1), (10, 4, 2), (9, 6, 2), (16, 8, 3)):
        logits = randn(g, T, n, scale=1.5)
        index = torch.softmax(logits, -1).topk(k, -1).indices                      # (T, k), the router's choice
        cases.append(Case(f"T={T} tokens, num_experts={n}, top_k={k}", {"router_logits": logits, "expert_index": index},
                          {"num_experts": n}))
    return cases


# ---------------------------------------------------------------- quantize_int8

def _quantize(w, axis=1, levels=127, low=-127, rounded=True):
    absmax = w.abs().amax() if axis is None else w.abs().amax(dim=axis, keepdim=True)
    scale = (absmax / levels).expand(w.shape[0], 1) if axis is None else absmax / levels
    scaled = w / scale
    q = (torch.round(scaled) if rounded else scaled).clamp(low, 127)
    return {"q": q.to(torch.long)} if axis == 0 else {"q": q.to(torch.long), "scale": scale}  # (1, in): q alone


INT8_BUGS = [Bug("int8_per_tensor_scale", dict(axis=None)), Bug("int8_scale_per_input_channel", dict(axis=0)),
             Bug("int8_divides_by_128", dict(levels=128)), Bug("int8_no_round", dict(rounded=False))]


def quantize_variants(ref, case):
    w = case["w"]
    found = combine(INT8_BUGS, lambda **switches: _quantize(w, **switches))
    return found + [wrong("int8_divides_by_128", lambda: _quantize(w, levels=128, low=-128))]


def _quantize_call(f, case, _):
    q, scale = f(case["w"].clone())
    if not isinstance(q, torch.Tensor) or q.dtype != torch.int8:
        raise Failure(f"q 必须是 torch.int8 张量 / q must be a torch.int8 tensor, got "
                      f"{getattr(q, 'dtype', type(q).__name__)}")
    return q.to(torch.long), scale


def _quantize_cases():
    g = torch.Generator().manual_seed(135)
    rows = torch.tensor([[0.05], [1.0], [8.0], [0.5]], dtype=torch.float64)       # rows of very different sizes
    return [Case("w (4, 6)，各行量级不同 / rows of different magnitudes", {"w": randn(g, 4, 6) * rows}, {}),
            Case("w (3, 16)", {"w": randn(g, 3, 16, scale=2.0)}, {}),
            Case("w (5, 3)，最大绝对值为负 / the absmax is negative", {"w": -randn(g, 5, 3).abs() - 0.1}, {})]


# ---------------------------------------------------------------- MultiHeadLatentAttention (bonus)

def _mla_forward(m, case, x):
    out, cache = m(x["x"], case.get("mask"), case.get("cache"))
    if not isinstance(cache, torch.Tensor) or cache.dim() != 3:
        raise Failure("MultiHeadLatentAttention.forward 应返回 (out, cache)，cache 是潜向量 / "
                      "must return (out, cache), cache the latents (B, T_past + T, d_latent)",
                      "mla_caches_keys_and_values" if isinstance(cache, (tuple, list)) else None)
    return out, cache


def mla_variants(ref, case):
    x, mask, past = case["x"], case.get("mask"), case.get("cache")
    B, T, d_model = x.shape
    H = ref.num_heads

    def run(value_proj="W_uv"):
        with torch.no_grad():
            latent = x @ ref.W_dkv.weight.T                                       # (B, T, d_latent)
            latent = latent if past is None else torch.cat([past, latent], 1)
            heads = lambda t: t.view(B, t.shape[1], H, d_model // H).transpose(1, 2)   # noqa: E731 (B, H, T, d_k)
            q, k = heads(x @ ref.W_q.weight.T), heads(latent @ ref.W_uk.weight.T)
            v = heads(latent @ getattr(ref, value_proj).weight.T)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d_model // H)             # (B, H, T, T_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, -math.inf)
            out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, d_model)
            return {"out": out @ ref.W_o.weight.T}
    return [wrong("mla_values_from_key_projection", lambda: run("W_uk"))]


def _mla_cases():
    g = torch.Generator().manual_seed(136)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    return [Case("B=2 T=5 d_model=16 H=4 d_latent=6, 因果 / causal", {"x": randn(g, 2, 5, 16), "mask": causal},
                 {"cfg": (16, 4, 6)}),
            Case("缓存 / cache: T_past=3, T=2, d_model=12 H=3 d_latent=4", {"x": randn(g, 1, 2, 12)},
                 {"cfg": (12, 3, 4), "cache": randn(g, 1, 3, 4)})]


FunctionCheck("online_softmax", cases=_online_cases, outputs=("y",), variants=online_softmax_variants,
              call=lambda f, case, _: f(case["x"].clone()),
              mistakes=("online_no_rescale", "online_max_updated_after_sum"))

FunctionCheck("tiled_attention", cases=_tiled_cases, outputs=("out",), variants=tiled_variants,
              call=_tiled_call,
              mistakes=("tiled_no_rescale", "tiled_acc_not_rescaled", "tiled_causal_diagonal_unmasked",
                        "tiled_causal_ignored", "no_scale", "tiled_materialises_scores"))

ModuleCheck("TopKRouter", cases=_router_cases, outputs=("weights", "indices", "logits"), grads=("x",),
            make_args=lambda case: (case["cfg"][:3], {"normalize": case["cfg"][3]}),
            forward=lambda m, case, x: m(x["x"]), variants=router_variants,
            mistakes=("router_softmax_after_topk", "router_not_renormalised", "router_softmax_wrong_axis"))

ModuleCheck("MoELayer", cases=_moe_cases, outputs=("out", "logits", "indices"), grads=("x",), make_args=_moe_args,
            forward=lambda m, case, x: m(x["x"]), variants=moe_variants,
            mistakes=("moe_weights_not_applied", "moe_weight_wrong_slot", "router_softmax_after_topk",
                      "router_not_renormalised"))

FunctionCheck("load_balancing_loss", cases=_aux_cases, outputs=("loss",), grads=("router_logits",),
              variants=aux_variants, call=_aux_call,
              mistakes=("aux_softmax_wrong_axis", "aux_f_from_probs", "aux_no_num_experts", "aux_counts_not_fraction",
                        "aux_probs_after_topk"))

FunctionCheck("quantize_int8", cases=_quantize_cases, outputs=("q", "scale"), variants=quantize_variants,
              call=_quantize_call,
              mistakes=("int8_per_tensor_scale", "int8_scale_per_input_channel", "int8_divides_by_128",
                        "int8_no_round"))

ModuleCheck("MultiHeadLatentAttention", cases=_mla_cases, outputs=("out", "cache"), grads=("x",),
            make_args=lambda case: (case["cfg"], {}), forward=_mla_forward, variants=mla_variants,
            mistakes=("mla_caches_keys_and_values", "mla_values_from_key_projection"))
