"""Idioms of the exercises checked in tutor/checks/decoding.py (09 decoding)."""
from . import idiom

# ---------------------------------------------------------------- 09_decoding

idiom("top_k_sort_where_optional", "09_decoding", "top_k_filter",
      "torch.sort instead of torch.topk, the k-th value by slicing, torch.where with a -inf tensor, Optional hint", r'''
from typing import Optional


def top_k_filter(logits: torch.Tensor, k: Optional[int]) -> torch.Tensor:
    if k is None or k >= logits.shape[-1]:
        return logits
    ranked, _ = torch.sort(logits, dim=-1, descending=True)             # (..., V)
    kth = ranked[..., k - 1:k]                                           # (..., 1) the k-th largest
    return torch.where(logits >= kth, logits, torch.full_like(logits, -math.inf))
''')


idiom("sampling_filter_table_multinomial_index", "09_decoding", "sampling_probs",
      "the filters applied from a table of (function, argument) pairs, logits.div, F.softmax, "
      "torch.argmax, torch.multinomial(num_samples=1)[:, 0]", r'''
def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")
    logits = logits.div(temperature)                                   # before the softmax
    for keep, arg in ((top_k_filter, top_k), (top_p_filter, top_p)):   # top-k first, then top-p
        logits = keep(logits, arg)
    return F.softmax(logits, dim=-1)                                   # (B, V)


def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if not temperature:
        return torch.argmax(logits, dim=-1)                            # greedy, (B,)
    probs = sampling_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]   # (B, 1) -> (B,)
''')


idiom("generate_preallocated_while_no_grad_block", "09_decoding", "generate",
      "a preallocated output tensor filled in a while loop, `with torch.no_grad():` instead of the decorator, "
      "keyword arguments to sample_next_token", r'''
def generate(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None, use_cache=True):
    B, T0 = idx.shape
    out = idx.new_zeros(B, T0 + max_new_tokens)                       # (B, T0 + n)
    out[:, :T0] = idx
    t, caches = T0, None
    with torch.no_grad():
        while t < T0 + max_new_tokens:
            if use_cache:
                fresh = out[:, :t] if caches is None else out[:, t - 1:t]   # the prompt once, then one token
                logits, caches = model.forward_cached(fresh, caches)        # (B, T_step, V)
            else:
                logits = model(out[:, :t])                                  # (B, t, V)
            out[:, t] = sample_next_token(logits[:, -1], temperature=temperature, top_k=top_k,
                                          top_p=top_p, generator=generator)
            t += 1
    return out
''')


idiom("beam_search_python_lists_nlargest", "09_decoding", "beam_search",
      "beams as Python lists of token ids with float log-prob sums, heapq.nlargest over (beam, token) pairs, "
      "a NamedTuple for hypotheses, max() over candidates with a key", r'''
import heapq
from typing import NamedTuple


class Hypothesis(NamedTuple):
    tokens: list
    logp: float


@torch.no_grad()
def beam_search(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    start = prefix.tolist()
    alive, finished = [Hypothesis(start, 0.0)], []
    for _ in range(max_new_tokens):
        ys = torch.tensor([h.tokens for h in alive], dtype=torch.long, device=prefix.device)   # (N, t)
        log_probs = step_fn(ys).double().tolist()                                             # N lists of V
        pairs = ((h.logp + lp, i, v) for i, h in enumerate(alive) for v, lp in enumerate(log_probs[i]))
        best = heapq.nlargest(beam_size, pairs, key=lambda pair: pair[0])
        extended = [Hypothesis(alive[i].tokens + [v], score) for score, i, v in best]
        finished += [h for h in extended if h.tokens[-1] == eos_id]
        alive = [h for h in extended if h.tokens[-1] != eos_id]
        if not alive or len(finished) >= beam_size:
            break

    def normalised(h):
        return h.logp / (len(h.tokens) - len(start)) ** alpha

    winner = max(finished + alive, key=normalised)
    return torch.tensor(winner.tokens, dtype=torch.long, device=prefix.device), normalised(winner)
''')


# ---------------------------------------------------------------- 10_drills

idiom("top_p_row_loop_stable_sort", "10_drills", "top_p_filter",
      "a plain Python loop over the sorted tokens of each row (mass before each token accumulated by hand), "
      "flatten(0, -2) for the leading axes, boolean indexing back to vocabulary order", r'''
def top_p_filter(logits, p):
    if p is None or p >= 1.0:
        return logits
    rows = logits.reshape(-1, logits.shape[-1])                       # (N, V)
    drop = torch.zeros_like(rows, dtype=torch.bool)                  # (N, V)
    probs = rows.softmax(-1)
    for n in range(rows.shape[0]):
        ranked, order = torch.sort(probs[n], descending=True, stable=True)
        mass = torch.zeros((), dtype=ranked.dtype)
        for prob, token in zip(ranked, order):
            if mass >= p:                                            # the tokens before already reach p
                drop[n, token] = True
            mass = mass + prob
    return rows.masked_fill(drop, float("-inf")).view_as(logits)
''')


idiom("sample_next_token_typed_max_indices", "10_drills", "sample_next_token",
      "Optional[torch.Generator] hint, logits.max(-1).indices for greedy, .view(-1) on the draw", r'''
from typing import Optional


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                      top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    if temperature == 0.0:
        return logits.max(dim=-1).indices                                        # (B,)
    draw = torch.multinomial(sampling_probs(logits, temperature, top_k, top_p), 1, generator=generator)
    return draw.view(-1)                                                         # (B, 1) -> (B,)
''')

