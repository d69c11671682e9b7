"""Checks of decoding (``solutions/decoding.py``): top-k and top-p filters, sampling, generation with
and without a KV cache (its cost measured: ``tutor.engine.cost``) and beam search.

Sampled tokens cannot always match the reference's draw: a failing case that no variant reproduces
is still named when every drawn token is an allowed one (``rule=``), the draw then differing only.
"""
import math

import torch

from ..engine.cost import Cost, fed, per_row
from ..engine.messages import define_mistakes
from ..engine.running import provided, randn, solutions
from ..engine.specs import Case, FunctionCheck, wrong

MISTAKES = define_mistakes({
    "generate_cache_refeeds_prefix": ("用缓存时每一步又把整个序列喂了进去：缓存里已有前缀的键值，"
                                      "之后每步只喂新生成的那个 token",
                                      "with a cache the whole sequence is fed again at every step: the cache already "
                                      "holds the prefix, feed only the newest token"),
    "generate_new_tokens_only": ("只返回了新生成的 token：契约返回提示词加新 token，(B, T0 + max_new_tokens)",
                                 "only the new tokens are returned: the contract returns the prompt and the new "
                                 "tokens, (B, T0 + max_new_tokens)"),
    "top_k_ties_dropped": ("top-k 只按下标保留了恰好 k 个：与第 k 大并列的 token 也要保留（logits >= 第 k 大的值）",
                           "top-k kept exactly k by index: tokens tied with the k-th largest are kept too (logits >= "
                           "the k-th value)"),
    "top_k_off_by_one": ("top-k 差一：保留了 k+1 或 k−1 个（第 k 大是排序后下标 k−1 的那个）",
                         "top-k off by one: k+1 or k−1 tokens kept (the k-th largest sits at sorted index k−1)"),
    "top_k_fill_zero": ("被过滤的 logit 设成了 0 而不是 -inf：softmax 后它们仍有概率",
                        "filtered logits set to 0 instead of -inf: they keep probability after the softmax"),
    "top_p_drops_crossing_token": ("top-p 丢掉了越过 p 的那个 token：应保留累计概率首次 >= p "
                                   "的最小集合（它之前的累计概率 < p 就保留）",
                                   "top-p drops the token that crosses p: keep the smallest set whose mass is >= p (a "
                                   "token stays while the mass before it is < p)"),
    "top_p_strict_tie": ("top-p 用了严格的 >：前面的累计概率恰好等于 p 时，这个 token 也被留下了；契约是最小的、"
                         "累计概率 >= p 的集合：前面的累计概率 >= p 的 token 都去掉（float 里 0.5 + 0.3 == 0.8，"
                         "这种并列真的会出现）",
                         "top-p with a strict >: when the mass before a token is exactly p that token is kept too; the "
                         "contract keeps the smallest set whose mass is >= p, dropping every token whose mass before "
                         "it is >= p (in float 0.5 + 0.3 == 0.8, so such ties do occur)"),
    "top_p_one_minus_p": ("top-p 的阈值写成了 1 - p（保留的集合只有 1 - p 的概率质量）：p 是要保留的质量，"
                          "前面的累计概率 >= p 的 token 才去掉",
                          "top-p thresholded at 1 - p (the kept set holds a mass of only 1 - p): p is the mass to "
                          "keep, drop a token only when the mass before it is >= p"),
    "top_p_not_sorted": ("top-p 的累计概率没有先按概率从大到小排序：按词表顺序累加得到的不是“最可能的 token”集合",
                         "top-p accumulates the mass in vocabulary order: sort the probabilities in descending order "
                         "first"),
    "temperature_after_softmax": ("温度用在了 softmax 之后：应先用温度除 logits，再做 softmax",
                                  "temperature applied after the softmax: divide the logits by the temperature, then "
                                  "take the softmax"),
    "filters_order_swapped": ("top-k 和 top-p 的顺序反了：先 top-k，再在剩下的 token 上做 top-p",
                              "top-k and top-p in the wrong order: top-k first, then top-p on what is left"),
    "sample_argmax": ("采样时取了 argmax：temperature > 0 时要用 torch.multinomial 从分布中抽样",
                      "argmax where sampling was asked: for temperature > 0 draw with torch.multinomial"),
    "top_p_missing": ("没有做 top-p 过滤（top_p 参数被忽略了）：先 top-k，再在剩下的 token 上做 top-p",
                      "no top-p filter (the top_p argument is ignored): top-k first, then top-p on what is left"),
    "top_k_missing": ("没有做 top-k 过滤（top_k 参数被忽略了）：先 top-k，再在剩下的 token 上做 top-p",
                      "no top-k filter (the top_k argument is ignored): top-k first, then top-p on what is left"),
    "sample_draw_not_contract": ("抽到的 token 都在允许的 token 里，但抽法与契约不同：契约是每步一次 "
                                 "torch.multinomial(probs, 1, generator=generator)，probs 是整个词表按词表顺序"
                                 "（不排序、不截取）的分布，并使用传入的 generator；多次抽样、指数分布技巧"
                                 "（gpt-fast 的 probs / Exp(1)）或不传 generator 都会抽出别的 token",
                                 "every drawn token is an allowed one, but the draw is not the contract's: one "
                                 "torch.multinomial(probs, 1, generator=generator) per step, probs over the whole "
                                 "vocabulary in vocabulary order (not sorted, not cut down), with the given generator; "
                                 "several draws, the exponential trick (gpt-fast's probs / Exp(1)) or no generator "
                                 "draw other tokens"),
    "generate_wrong_position": ("下一个 token 取自第 0 个位置的 logits（logits[:, 0]）："
                                "应取最后一个位置 logits[:, -1]，它才看过整个前缀",
                                "the next token is read from the logits of position 0 (logits[:, 0]): read the last "
                                "position, logits[:, -1], the only one that has seen the whole prefix"),
    "generate_use_cache_ignored": ("use_cache=False 时仍然用了缓存：契约要求这时每一步把整个前缀重新喂给 model(idx)"
                                   "（两种方式的 token 相同，用来对比速度和验证缓存）",
                                   "the cache is used even with use_cache=False: the contract then feeds the whole "
                                   "prefix to model(idx) at every step (both give the same tokens; the uncached run is"
                                   " what the cache is timed and checked against)"),
    "beam_length_excludes_eos": ("长度归一化的 n 没有算 EOS：n 是生成的 token 数，EOS 也算（前缀不算）",
                                 "the length normalisation's n leaves EOS out: n counts the generated tokens, EOS "
                                 "included (prefix excluded)"),
    "beam_no_length_norm": ("束搜索没有做长度归一化：分数应是 logp_sum / n ** alpha，否则偏爱短输出",
                            "beam search without length normalisation: the score is logp_sum / n ** alpha, otherwise "
                            "short outputs win"),
    "beam_finished_extended": ("已经输出 EOS 的束还在继续扩展：结束的束应移出存活集合，不再扩展",
                               "beams that emitted EOS are still extended: finished beams leave the alive set and "
                               "stop"),
    "beam_norm_counts_prefix": ("长度归一化把前缀也算进了长度：n 只数生成的 token（含 EOS，不含前缀）",
                                "the length normalisation counts the prefix: n is the number of generated tokens (EOS "
                                "included, prefix excluded)"),
    "beam_score_differs": ("束搜索选出的 token 对了，分数不对：分数是所选束的对数概率之和（step_fn 给出的对数概率，"
                           "每步不要再归一化）除以 n ** alpha，n 只数生成的 token（含 EOS，不含前缀）",
                           "beam search picks the right tokens but reports another score: the score is the chosen "
                           "beam's sum of log-probabilities (as step_fn gives them, not renormalised at each step) "
                           "divided by n ** alpha, n the generated tokens (EOS included, prefix excluded)"),
})

# ---------------------------------------------------------------- filters and sampling

def top_k_variants(ref, case):
    logits, k = case["logits"], case["k"]
    ninf = float("-inf")

    def exactly_k():
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, -1).indices, True)
        return {"out": logits.masked_fill(~keep, ninf)}

    def kth(j, fill=ninf):
        j = min(max(j, 1), logits.size(-1))
        return {"out": logits.masked_fill(logits < torch.topk(logits, j, -1).values[..., -1:], fill)}

    finite = lambda out: {"out": out["out"].masked_fill(out["out"] == ninf, torch.finfo(logits.dtype).min)}
    return [wrong("top_k_ties_dropped", lambda: finite(exactly_k())),
            wrong("top_k_off_by_one", lambda: finite(kth(k + 1))),
            wrong("top_k_off_by_one", lambda: finite(kth(k - 1))), wrong("top_k_fill_zero", lambda: kth(k, 0.0))]


def top_p_variants(ref, case):
    logits, p = case["logits"], case["p"]

    def run(drop_crossing=False, unsorted=False, strict=False, threshold=p):
        probs = torch.softmax(logits, -1)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        if unsorted:
            sorted_probs, order = probs, torch.arange(probs.size(-1)).expand_as(probs)
        cum = torch.cumsum(sorted_probs, -1)
        if drop_crossing:
            drop = cum > threshold
        elif strict:  # the inclusive mass > threshold, shifted right by one (x-transformers' way)
            drop = torch.cat([torch.zeros_like(cum[..., :1], dtype=torch.bool), (cum > threshold)[..., :-1]], -1)
        else:
            drop = cum - sorted_probs >= threshold
        drop[..., 0] = False  # the top token is always kept
        return {"out": logits.masked_fill(drop.scatter(-1, order, drop), torch.finfo(logits.dtype).min)}

    return [wrong("top_p_drops_crossing_token", lambda: run(drop_crossing=True)),
            wrong("top_p_not_sorted", lambda: run(unsorted=True)),
            wrong("top_p_strict_tie", lambda: run(strict=True)),
            wrong("top_p_one_minus_p", lambda: run(strict=True, threshold=1 - p)),
            wrong("top_p_one_minus_p", lambda: run(threshold=1 - p))]


def _top_k_exactly(logits, k):
    """Exactly ``k`` logits kept per row (``torch.topk`` + scatter): a tie at the k-th loses its other members."""
    if k is None or k >= logits.size(-1):
        return logits
    values, indices = torch.topk(logits, k, -1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def sampling_probs_variants(ref, case):
    logits, T, k, p = case["logits"], case["temperature"], case["top_k"], case["top_p"]
    filtered = lambda z: solutions.top_p_filter(solutions.top_k_filter(z, k), p)

    def after_softmax(renormalise):
        probs = torch.softmax(filtered(logits), -1) / T
        return {"probs": probs / probs.sum(-1, keepdim=True) if renormalise else probs}

    return [wrong("temperature_after_softmax", lambda: after_softmax(False)),
            wrong("temperature_after_softmax", lambda: after_softmax(True)),
            wrong("filters_order_swapped", lambda: {"probs": torch.softmax(
                solutions.top_k_filter(solutions.top_p_filter(logits / T, p), k), -1)}),
            wrong("top_p_missing", lambda: {"probs": torch.softmax(solutions.top_k_filter(logits / T, k), -1)}),
            wrong("top_k_missing", lambda: {"probs": torch.softmax(solutions.top_p_filter(logits / T, p), -1)}),
            wrong("top_k_ties_dropped", lambda: {"probs": torch.softmax(
                solutions.top_p_filter(_top_k_exactly(logits / T, k), p), -1)})]


def _sample(logits, temperature, top_k, top_p, generator, after_softmax=False, argmax=False, exactly_k=False):
    if temperature == 0 or argmax:
        return logits.argmax(-1)
    if exactly_k:
        probs = torch.softmax(solutions.top_p_filter(_top_k_exactly(logits / temperature, top_k), top_p), -1)
    elif after_softmax:
        probs = torch.softmax(solutions.top_p_filter(solutions.top_k_filter(logits, top_k), top_p), -1) / temperature
    else:
        probs = solutions.sampling_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def sample_next_token_variants(ref, case):
    kw = {k: case[k] for k in ("temperature", "top_k", "top_p")}

    def run(**bug):
        return {"tokens": _sample(case["logits"], **kw, generator=torch.Generator().manual_seed(case["seed"]), **bug)}

    def without(name):  # one filter left out, the draw the contract's
        return {"tokens": _sample(case["logits"], **{**kw, name: None},
                                  generator=torch.Generator().manual_seed(case["seed"]))}

    return [wrong("sample_argmax", lambda: run(argmax=True)),
            wrong("temperature_after_softmax", lambda: run(after_softmax=True)),
            wrong("top_k_ties_dropped", lambda: run(exactly_k=True)),
            wrong("top_p_missing", lambda: without("top_p")), wrong("top_k_missing", lambda: without("top_k"))]


def _draw_allowed(logits, temperature, top_k, top_p, tokens):
    """Every token of ``tokens`` (B,) has a positive probability under the contract's distribution."""
    probs = solutions.sampling_probs(logits, temperature, top_k, top_p)  # (B, V)
    if type(tokens) is not torch.Tensor or tokens.shape != probs.shape[:-1] or tokens.dtype != torch.long:
        return False
    if tokens.min() < 0 or tokens.max() >= probs.size(-1):
        return False
    return bool((probs.gather(-1, tokens[..., None]) > 0).all())


def _sample_rule(case, expected, got):
    if case["temperature"] == 0 or not _draw_allowed(case["logits"], case["temperature"], case["top_k"],
                                                     case["top_p"], got.get("tokens")):
        return None
    return "sample_draw_not_contract"


# ---------------------------------------------------------------- generation

def generate_variants(ref, case):
    model, idx, n = case["model"], case["idx"], case["max_new_tokens"]
    kw = case["kwargs"]

    def refeed():
        caches, ys = None, idx
        gen = torch.Generator().manual_seed(case["seed"])
        for _ in range(n):
            logits, caches = model.forward_cached(ys, caches)
            nxt = _sample(logits[:, -1], kw.get("temperature", 0.0), kw.get("top_k"), kw.get("top_p"), gen)  # (B,)
            ys = torch.cat([ys, nxt[:, None]], 1)
        return {"tokens": ys}

    def new_only():  # the contract's tokens without the prompt
        gen = torch.Generator().manual_seed(case["seed"])
        return {"tokens": solutions.generate(model, idx, n, generator=gen, **kw)[:, idx.size(1):]}

    def first_position():  # the next token read from the logits of position 0
        ys, gen = idx, torch.Generator().manual_seed(case["seed"])
        with torch.no_grad():
            for _ in range(n):
                nxt = _sample(model(ys)[:, 0], kw.get("temperature", 0.0), kw.get("top_k"), kw.get("top_p"), gen)
                ys = torch.cat([ys, nxt[:, None]], 1)
        return {"tokens": ys}

    return ([wrong("generate_cache_refeeds_prefix", refeed)] if kw.get("use_cache", True) else []) + [
        wrong("generate_new_tokens_only", new_only), wrong("generate_wrong_position", first_position)]


def _generate_rule(case, expected, got):
    """Sampled tokens that differ where each row first differs by an allowed draw of the same model."""
    kw, want, ys = case["kwargs"], expected["tokens"], got.get("tokens")
    if kw.get("temperature", 0.0) == 0 or type(ys) is not torch.Tensor or ys.shape != want.shape:
        return None
    T0 = case["idx"].size(1)
    if not torch.equal(ys[:, :T0], want[:, :T0]):
        return None
    for b in range(ys.size(0)):
        differ = (ys[b] != want[b]).nonzero()
        if len(differ):
            t = int(differ[0])
            with torch.no_grad():
                logits = case["model"](ys[b:b + 1, :t])[:, -1]  # (1, V)
            if not _draw_allowed(logits, kw["temperature"], kw.get("top_k"), kw.get("top_p"), ys[b:b + 1, t]):
                return None
    return "sample_draw_not_contract"


def _generate_problems(cases):
    """The prompt is fed once, then one token per step: more tokens per row is a recomputing cache."""
    problems = {}
    for case in cases:
        seen = per_row(case, case["idx"].size(0))
        if not seen:
            continue
        tokens, T0, n = seen["tok_embed"], case["idx"].size(1), case["max_new_tokens"]
        if not case["kwargs"].get("use_cache", True):
            if len(tokens) > 1 and sum(tokens) <= T0 + n:  # one token per step after the prompt: the cache
                plain = [T0 + i for i in range(n)]
                problems.setdefault("generate_use_cache_ignored", (
                    f"实测 / measured: 每次调用模型喂入的 token 数 / tokens fed per model call {fed(tokens)}，"
                    f"不用缓存应是 / without the cache: {fed(plain)}（用例 / case 「{case.label}」）"))
            continue
        if tokens and sum(tokens) > T0 + n:
            honest = [T0] + [1] * (len(tokens) - 1)
            problems.setdefault("kv_cache_recomputes", (
                f"实测 / measured: 每次调用模型喂入的 token 数 / tokens fed per model call {fed(tokens)}，"
                f"用缓存应是 / with the cache: {fed(honest)}（用例 / case 「{case.label}」）"))
    return list(problems.items())


def moderate(module, seed):
    """Weights of moderate size, so that sampled and greedy tokens vary (the 0.02 init is nearly uniform)."""

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(1 + 0.3 * torch.randn(p.shape, generator=gen) if p.dim() == 1
                    else torch.randn(p.shape, generator=gen) / math.sqrt(p.size(-1)))
    return module.eval()


def _generate_cases():
    ns = provided("GPT")
    torch.manual_seed(34)
    model = moderate(ns["GPT"](13, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=64), 35)
    prompt = torch.tensor([[3, 4, 5], [7, 1, 2]])
    return [Case(label, {"idx": prompt if B == 2 else prompt[:1]},
                 {"model": model, "max_new_tokens": n, "seed": 36 + i, "kwargs": kwargs})
            for i, (label, B, n, kwargs) in enumerate([
                ("贪心、用缓存 / greedy with cache, B=2", 2, 6, dict(temperature=0.0)),
                ("贪心、不用缓存 / greedy without cache, B=1", 1, 5, dict(temperature=0.0, use_cache=False)),
                ("采样 top-k=5 top-p=0.9 T=0.8、用缓存 / sampling with cache", 2, 7,
                 dict(temperature=0.8, top_k=5, top_p=0.9)),
                ("采样 T=1.5、不用缓存 / sampling without cache", 2, 5, dict(temperature=1.5, use_cache=False))])]


def _generate(f, case, _):
    gen = torch.Generator().manual_seed(case["seed"])
    return f(case["model"], case["idx"].clone(), case["max_new_tokens"], generator=gen, **case["kwargs"])


# ---------------------------------------------------------------- beam search

def beam(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0, normalise=True, stop_finished=True,
         count_prefix=False, count_eos=True):
    """Beam search with switches for the known bugs; defaults = the contract."""
    alive, alive_scores, finished = prefix[None], torch.zeros(1, dtype=torch.float64), []
    for _ in range(max_new_tokens):
        log_probs = step_fn(alive).to(torch.float64)
        V = log_probs.size(-1)
        top, flat = torch.topk((alive_scores[:, None] + log_probs).flatten(), min(beam_size, alive.size(0) * V))
        ys = torch.cat([alive[flat // V], (flat % V)[:, None]], dim=1)
        done = (flat % V == eos_id) & stop_finished
        finished += [(ys[i], float(top[i])) for i in done.nonzero().flatten().tolist()]
        alive, alive_scores = ys[~done], top[~done]
        if alive.size(0) == 0 or len(finished) >= beam_size:
            break
    offset = 0 if count_prefix else prefix.numel()

    def length(c):
        ends = not count_eos and c[0].numel() > prefix.numel() and int(c[0][-1]) == eos_id
        return max(c[0].numel() - offset - ends, 1)
    norm = lambda c: c[1] / length(c) ** alpha if normalise else c[1]
    best = max(finished + list(zip(alive, alive_scores.tolist())), key=norm)
    return {"tokens": best[0], "score": float(norm(best))}


def beam_search_variants(ref, case):
    args = (case["step_fn"], case["prefix"], case["beam_size"], case["max_new_tokens"], case["eos_id"], case["alpha"])
    return [wrong("beam_no_length_norm", lambda: beam(*args, normalise=False)),
            wrong("beam_finished_extended", lambda: beam(*args, stop_finished=False)),
            wrong("beam_norm_counts_prefix", lambda: beam(*args, count_prefix=True)),
            wrong("beam_length_excludes_eos", lambda: beam(*args, count_eos=False))]


def _beam_rule(case, expected, got):
    tokens = got.get("tokens")
    if type(tokens) is torch.Tensor and tokens.shape == expected["tokens"].shape \
            and torch.equal(tokens, expected["tokens"]):
        return "beam_score_differs"
    return None


def _beam_cases():
    g = torch.Generator().manual_seed(41)
    tables = [torch.log_softmax(1.5 * torch.randn(8, 5, 5, generator=g), -1) for _ in range(2)]
    short = torch.full((4, 3, 3), -20.0)  # a short output wins the raw sum, a longer one the normalised score
    short[0, 1] = torch.tensor([-1.0, -0.4, -20.0])
    short[1, 1] = torch.tensor([-0.8, -20.0, -20.0])
    markov = lambda table: (lambda ys: table[ys.size(1) - 1, ys[:, -1]])
    torch.manual_seed(42)
    gpt = moderate(provided("GPT")["GPT"](9, d_model=16, num_heads=2, num_kv_heads=1, d_ff=24, max_len=32), 43)
    gpt.requires_grad_(False)  # its log-probs carry no graph: float(score) in a learner's code stays silent
    gpt_step = lambda ys: torch.log_softmax(gpt(ys)[:, -1], -1)
    return [Case(label, {"prefix": prefix},
                 {"step_fn": step, "beam_size": k, "max_new_tokens": n, "eos_id": eos, "alpha": a})
            for label, prefix, step, k, n, eos, a in [
                ("马尔可夫表 / Markov table, beam 3, alpha=0", torch.tensor([1, 2]), markov(tables[0]), 3, 6, 0, 0.0),
                ("长度归一化 / length normalisation, alpha=1", torch.tensor([1]), markov(short), 2, 3, 0, 1.0),
                ("马尔可夫表 / Markov table, beam 4, alpha=0.7", torch.tensor([3]), markov(tables[1]), 4, 7, 0, 0.7),
                ("小 GPT / a small GPT, beam 3, alpha=0.6", torch.tensor([3, 4]), gpt_step, 3, 6, 0, 0.6)]]


# ---------------------------------------------------------------- the checks

def neg_inf_as_min(t):
    """-inf and the dtype's most negative finite number both block a token: compare them as one."""

    if type(t) is not torch.Tensor or not t.dtype.is_floating_point:
        return t
    return t.masked_fill(t == float("-inf"), torch.finfo(t.dtype).min)


def _top_k_cases():
    g = torch.Generator().manual_seed(37)
    ties = torch.tensor([[3.0, 2.0, 2.0, 1.0, 0.5, 2.0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    return [Case("logits (3, 10), k=3", {"logits": randn(g, 3, 10, scale=2.0)}, {"k": 3}),
            Case("第 k 个有并列 / ties at the k-th, k=2", {"logits": ties}, {"k": 2}),
            Case("k=1, 3 维 / 3-D (2, 2, 7)", {"logits": randn(g, 2, 2, 7)}, {"k": 1}),
            Case("k >= V", {"logits": randn(g, 2, 5)}, {"k": 5})]


def _top_p_cases():
    g = torch.Generator().manual_seed(38)
    exact = torch.tensor([[0.5, 0.25, 0.125, 0.125], [0.125, 0.125, 0.25, 0.5]]).log()  # exact binary fractions
    return [Case("随机 / random (4, 12), p=0.8", {"logits": randn(g, 4, 12, scale=2.0)}, {"p": 0.8}),
            Case("越过 p 的 token / the token that crosses p, p=0.6", {"logits": exact}, {"p": 0.6}),
            Case("最大的 token 已超过 p / the top token alone exceeds p, p=0.3, B=1", {"logits": exact[:1]},
                 {"p": 0.3}),
            Case("float32，0.5 + 0.3 恰好等于 p / float32, 0.5 + 0.3 is exactly p, p=0.8 (the visible test's row)",
                 {"logits": torch.tensor([[0.15, 0.5, 0.05, 0.3]], dtype=torch.float32).log()}, {"p": 0.8}),
            Case("p=0.9：四个都保留（0.875 < 0.9）/ all four kept (0.875 < 0.9)", {"logits": exact}, {"p": 0.9})]


def sampling_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = [Case(f"T={t}, top_k={k}, top_p={p}, logits {shape}", {"logits": randn(g, *shape, scale=2.0)},
                  {"temperature": t, "top_k": k, "top_p": p, "seed": seed + i})
             for i, (t, k, p, shape) in enumerate([(0.7, None, None, (16, 8)), (1.3, 4, None, (16, 9)),
                                                   (0.9, 6, 0.8, (16, 10)), (0.5, None, 0.7, (1, 6))])]
    exact = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log().expand(8, 4)  # top-k first leaves 2/3, 1/3: top-p keeps 1
    cases.append(Case("先 top-k 再 top-p / top-k before top-p: top_k=2, top_p=0.6", {"logits": exact},
                      {"temperature": 1.0, "top_k": 2, "top_p": 0.6, "seed": seed + 4}))
    ties = torch.tensor([[2.0, 1.0, 1.0, 0.0, -1.0]]).expand(16, 5)  # the 2nd and 3rd tie: top_k=2 keeps 3
    cases.append(Case("第 k 个有并列 / ties at the k-th: top_k=2, logits (16, 5)", {"logits": ties},
                      {"temperature": 1.0, "top_k": 2, "top_p": None, "seed": seed + 5}))
    return cases


def _sample_next_token_cases():
    cases = sampling_cases(40)
    cases.append(Case("温度 0 = 贪心 / temperature 0 = greedy", {"logits": cases[0]["logits"]},
                      {"temperature": 0.0, "top_k": None, "top_p": None, "seed": 0}))
    return cases


FunctionCheck("top_k_filter", cases=_top_k_cases, outputs=("out",), variants=top_k_variants,
              call=lambda f, case, x: neg_inf_as_min(f(case["logits"].clone(), case["k"])),
              mistakes=("top_k_fill_zero", "top_k_ties_dropped", "top_k_off_by_one"))

FunctionCheck("top_p_filter", cases=_top_p_cases, outputs=("out",), variants=top_p_variants,
              call=lambda f, case, x: neg_inf_as_min(f(case["logits"].clone(), case["p"])),
              mistakes=("top_p_drops_crossing_token", "top_p_not_sorted", "top_p_strict_tie", "top_p_one_minus_p"))

FunctionCheck("sampling_probs", cases=lambda: sampling_cases(39), outputs=("probs",), variants=sampling_probs_variants,
              call=lambda f, case, x: f(case["logits"].clone(), case["temperature"], case["top_k"], case["top_p"]),
              mistakes=("filters_order_swapped", "temperature_after_softmax", "top_p_missing", "top_k_missing",
                        "top_k_ties_dropped"))

FunctionCheck("sample_next_token", cases=_sample_next_token_cases, outputs=("tokens",),
              variants=sample_next_token_variants, rule=_sample_rule,
              call=lambda f, case, x: f(case["logits"].clone(), case["temperature"], case["top_k"], case["top_p"],
                                        generator=torch.Generator().manual_seed(case["seed"])),
              mistakes=("sample_argmax", "temperature_after_softmax", "sample_draw_not_contract", "top_p_missing",
                        "top_k_ties_dropped"))

FunctionCheck("generate", cases=_generate_cases, outputs=("tokens",), call=_generate, variants=generate_variants,
              rule=_generate_rule, cost=Cost(
                  watched=lambda case: {"tok_embed": case["model"].tok_embed}, problems=_generate_problems),
              mistakes=("generate_cache_refeeds_prefix", "kv_cache_recomputes", "generate_new_tokens_only",
                        "generate_wrong_position", "generate_use_cache_ignored"))

FunctionCheck("beam_search", cases=_beam_cases, outputs=("tokens", "score"), variants=beam_search_variants,
              rule=_beam_rule, call=lambda f, case, x: f(case["step_fn"], case["prefix"].clone(), case["beam_size"],
                                                        case["max_new_tokens"], case["eos_id"], alpha=case["alpha"]),
              mistakes=("beam_finished_extended", "beam_no_length_norm", "beam_norm_counts_prefix",
                        "beam_length_excludes_eos", "beam_score_differs"))
