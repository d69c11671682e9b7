"""Other honest caching styles (issue 25): the cost checks measure tokens fed, not a layout, so a
chunked prefill and a preallocated cache pass like the reference's concatenated cache."""
import torch

from .reference import load
from .wrong_realcode import _greedy_cached

R = load()


@torch.no_grad()
def generate_chunked_prefill(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                             use_cache=True):
    """The prompt fed in chunks of 2 tokens (as servers do for long prompts), then one token per step."""
    if not use_cache:
        return R["generate"](model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache=False)
    caches = None
    for start in range(0, idx.size(1), 2):
        logits, caches = model.forward_cached(idx[:, start:start + 2], caches)  # (B, <= 2, V)
    for step in range(max_new_tokens):
        nxt = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
        idx = torch.cat([idx, nxt[:, None]], 1)
        if step + 1 < max_new_tokens:
            logits, caches = model.forward_cached(nxt[:, None], caches)  # (B, 1, V)
    return idx


def greedy_cached_preallocated(model, src, bos_id, eos_id, max_new_tokens):
    """K/V buffers of max_new_tokens positions allocated once and written in place (gpt-fast's style), the
    new token projected as a (B, d_model) matrix: the cost is counted in tokens, whatever the layout."""
    return _greedy_cached(model, src, bos_id, eos_id, max_new_tokens, preallocated=True)


CASES = [
    ("generate", generate_chunked_prefill),
    ("greedy_decode_cached", greedy_cached_preallocated),
]
