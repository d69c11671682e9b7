"""Chapter 09 and the drill bank (chapter 10): sampling (temperature, top-k, top-p), KV-cache generation, beam search.

Contract: docs/CONTRACT_LLM.md. Order of the sampling transforms, as in Hugging Face's
``generate``: temperature, top-k, top-p, softmax, one ``torch.multinomial`` draw.
"""
import torch
import torch.nn.functional as F

from .masks import make_pad_mask


def top_k_filter(logits, k):
    """Keep the ``k`` largest logits of each row, set the others to ``-inf``.

    ``top_k_filter(logits (..., V), k) -> (..., V)``. Every logit ``>=`` the ``k``-th largest of
    its row is kept, so tokens tied with the ``k``-th are all kept (nanoGPT, Hugging Face).
    ``k=None`` or ``k >= V`` returns the logits unchanged.

    中文：每行只保留最大的 ``k`` 个 logit（与第 ``k`` 大相等的并列者全部保留），其余设为 ``-inf``。
    """
    if k is None or k >= logits.size(-1):
        return logits
    ### BEGIN SOLUTION
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))
    ### END SOLUTION


def top_p_filter(logits, p):
    """Nucleus (top-p) filter: keep the smallest set of most probable tokens whose mass is >= ``p``.

    ``top_p_filter(logits (..., V), p) -> (..., V)``. Probabilities ``softmax(logits)`` sorted in
    descending order (``torch.sort(descending=True, stable=True)``); the token whose cumulative
    mass crosses ``p`` is **kept**: a token is dropped iff the mass of the tokens before it is
    ``>= p``. The most probable token is always kept. Dropped logits become ``-inf``.
    ``p=None`` or ``p >= 1`` returns the logits unchanged.

    中文：核采样过滤：按概率从大到小排序，保留累计概率首次 ``>= p`` 的最小集合（越过 ``p`` 的那个 token 保留），
    即“它之前的累计概率已 ``>= p``”的 token 才丢弃；概率最大的 token 总会保留。
    """
    if p is None or p >= 1.0:
        return logits
    ### BEGIN SOLUTION
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)  # (..., V) each
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # (..., V) mass of the better tokens
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))
    ### END SOLUTION


def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution one sampling step draws from.

    ``sampling_probs(logits (B, V), temperature=1.0, top_k=None, top_p=None) -> probs (B, V)``
    ``= softmax(top_p_filter(top_k_filter(logits / temperature, top_k), top_p))``: the
    temperature divides the logits (before the softmax); rows sum to 1, filtered tokens are 0.

    中文：一步采样所用的分布：先用温度除 logits（在 softmax 之前），再 top-k、top-p，最后 softmax。
    """
    if temperature <= 0:
        raise ValueError(f"temperature 应大于 0 / temperature must be > 0; got {temperature}")
    ### BEGIN SOLUTION
    logits = top_p_filter(top_k_filter(logits / temperature, top_k), top_p)
    return torch.softmax(logits, dim=-1)  # (B, V)
    ### END SOLUTION


def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One decoding step: ``LongTensor (B,)`` from the next-token ``logits (B, V)``.

    ``temperature == 0``: greedy (``argmax``, no random draw). Otherwise exactly
    ``torch.multinomial(sampling_probs(logits, temperature, top_k, top_p), 1,
    generator=generator).squeeze(-1)``: one draw per step, so a ``torch.Generator`` seeded alike
    gives the same tokens. The draw happens where the logits are: ``generator`` must live on the
    logits' device (``torch.Generator(device=logits.device)``); never make another one or move the
    probabilities elsewhere. The tokens come back on the logits' device.

    中文：一步解码：温度为 0 时取 argmax；否则用 ``torch.multinomial`` 从 ``sampling_probs`` 抽一次
    （同一个种子得到同样的 token）。在 logits 所在的设备上抽：``generator`` 须建在同一设备上。
    """
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    probs = sampling_probs(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B, 1) -> (B,)
    ### END SOLUTION


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True):
    """Autoregressive generation with a ``GPT``: ``LongTensor (B, T0 + max_new_tokens)``.

    ``generate(model, idx (B, T0), max_new_tokens, temperature=0.0, top_k=None, top_p=None,
    generator=None, use_cache=True)``. Each step takes the logits of the last position and calls
    ``sample_next_token``. ``use_cache=False`` re-runs ``model(idx)`` on the whole prefix
    (O(T^2) token passes); ``use_cache=True`` runs the prompt once through
    ``model.forward_cached`` and then feeds one token per step with the returned caches. Both
    give identical tokens. Call ``model.eval()`` first. ``idx`` and ``generator`` are on the
    model's device (``torch.Generator(device=idx.device)``), and so is the result.

    中文：用 ``GPT`` 自回归生成。不用缓存时每步重算整个前缀；用缓存时先把提示词跑一遍 ``forward_cached``，
    之后每步只喂一个新 token。两种方式的输出 token 完全相同。``idx`` 和 ``generator`` 与模型在同一设备上。
    """
    ### BEGIN SOLUTION
    caches, step_input = None, idx
    for _ in range(max_new_tokens):
        if use_cache:
            logits, caches = model.forward_cached(step_input, caches)  # (B, T_step, V)
        else:
            logits = model(idx)  # (B, T, V)
        next_token = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
        idx = torch.cat([idx, next_token[:, None]], dim=1)  # (B, T + 1)
        step_input = next_token[:, None]  # (B, 1)
    return idx
    ### END SOLUTION


def gpt_step_fn(model):
    """``step_fn(ys (N, t)) -> log_probs (N, V)`` of the next token for ``beam_search``, from a ``GPT``."""
    return lambda ys: F.log_softmax(model(ys)[:, -1], dim=-1)


def transformer_step_fn(model, src):
    """``step_fn`` for ``beam_search`` on the chapter 06/07 encoder-decoder ``Transformer``.

    ``src (1, T_s)`` is encoded once; ``step_fn(ys (N, t))`` decodes the ``N`` beams against the
    memory expanded to ``N`` rows and returns the next-token log-probabilities ``(N, tgt_vocab)``.
    """
    memory = model.encode(src)  # (1, T_s, d_model)
    src_mask = make_pad_mask(src, model.pad_id)  # (1, 1, 1, T_s)

    def step_fn(ys):
        N = ys.size(0)
        hidden = model.decode(ys, memory.expand(N, -1, -1), src_mask.expand(N, -1, -1, -1))  # (N, t, d_model)
        return F.log_softmax(model.out_proj(hidden[:, -1]), dim=-1)  # (N, tgt_vocab)

    return step_fn


@torch.no_grad()
def beam_search(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    """Beam search with length normalisation; finished beams stop.

    ``beam_search(step_fn, prefix LongTensor (T0,), beam_size, max_new_tokens, eos_id, alpha=0.0)
    -> (tokens LongTensor (T0 + n,), score float)``. ``step_fn(ys (N, t)) -> log_probs (N, V)``
    scores the next token of the ``N`` alive beams. Each step, every alive beam x every token is
    scored ``logp_sum + log_prob``; the ``beam_size`` best (``torch.topk`` over the flattened
    ``N * V`` scores) are kept; those ending in ``eos_id`` are finished and never extended again.
    Stops when no beam is alive, when ``beam_size`` beams have finished, or after
    ``max_new_tokens`` steps. Among the finished and the still-alive beams, the best by
    ``logp_sum / n ** alpha`` wins (``n`` generated tokens, EOS included, prefix excluded;
    ``alpha = 0``: the raw sum, which favours short outputs); ties: the first found.

    中文：带长度归一化的束搜索：每步从“存活束 × 词表”里选总对数概率最高的 ``beam_size`` 个，
    以 ``eos_id`` 结尾的束结束、不再扩展；最后按 ``logp_sum / n ** alpha`` 选最好的
    （``n`` 为生成的 token 数，含 EOS，不含前缀）。
    """
    ### BEGIN SOLUTION
    alive = prefix[None]  # (1, T0)
    alive_scores = torch.zeros(1, dtype=torch.float64, device=prefix.device)  # (1,) log-prob sums
    finished = []  # (tokens (T0 + n,), logp_sum)
    for _ in range(max_new_tokens):
        log_probs = step_fn(alive).to(torch.float64)  # (N, V)
        V = log_probs.size(-1)
        scores = (alive_scores[:, None] + log_probs).flatten()  # (N * V,)
        top, flat = torch.topk(scores, min(beam_size, scores.numel()))  # (k,) each
        beams, tokens = flat // V, flat % V  # (k,) which beam, which token
        ys = torch.cat([alive[beams], tokens[:, None]], dim=1)  # (k, t + 1)
        done = tokens == eos_id  # (k,)
        finished += [(ys[i], float(top[i])) for i in done.nonzero().flatten().tolist()]
        alive, alive_scores = ys[~done], top[~done]
        if alive.size(0) == 0 or len(finished) >= beam_size:
            break
    candidates = finished + [(ys, float(s)) for ys, s in zip(alive, alive_scores)]
    T0 = prefix.numel()
    best = max(candidates, key=lambda c: c[1] / (c[0].numel() - T0) ** alpha)
    return best[0], best[1] / (best[0].numel() - T0) ** alpha
    ### END SOLUTION
