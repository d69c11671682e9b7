"""Right alternatives for the shared LLM components (docs/CONTRACT_LLM.md): other layouts, loops, einsum."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .reference import load

R = load()


def repeat_kv_builtin(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


class GQAGroupedEinsum(nn.Module):
    """No repeat at all: queries grouped as (B, G, n_rep, T, d_k) against (B, G, T_k, d_k); additive mask."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.H, self.G, self.d_k, self.rope, self.base = num_heads, num_kv_heads, d_model // num_heads, rope, rope_base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.H, self.G, self.d_k
        q = self.W_q(x).reshape(B, T, H, d_k).permute(0, 2, 1, 3)
        k = self.W_k(x).reshape(B, T, G, d_k).permute(0, 2, 1, 3)
        v = self.W_v(x).reshape(B, T, G, d_k).permute(0, 2, 1, 3)
        past = 0 if cache is None else cache[0].shape[2]
        if self.rope:
            pos = torch.arange(past, past + T)
            q, k = R["apply_rope"](q, pos, self.base), R["apply_rope"](k, pos, self.base)
        if cache is not None:
            k, v = torch.cat((cache[0], k), 2), torch.cat((cache[1], v), 2)
        qg = q.reshape(B, G, H // G, T, d_k)  # adjacent query heads share a KV head
        scores = torch.einsum("bgrtd,bgsd->bgrts", qg, k) / d_k ** 0.5
        if mask is not None:
            m = torch.broadcast_to(mask.bool(), (B, H, T, k.shape[2])).reshape(B, G, H // G, T, k.shape[2])
            scores = scores + torch.zeros_like(scores).masked_fill(~m, -1e30)
            w = scores.softmax(-1) * m
        else:
            w = scores.softmax(-1)
        out = torch.einsum("bgrts,bgsd->bgrtd", w, v).reshape(B, H, T, d_k)
        return self.W_o(out.permute(0, 2, 1, 3).reshape(B, T, d)), (k, v)


class SwiGLUManual(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        a = self.gate_proj(x)
        return self.down_proj(a * torch.sigmoid(a) * self.up_proj(x))


@torch.no_grad()
def generate_prefill_one_by_one(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                                use_cache=True):
    """The prompt enters the cache one token at a time; without a cache, a Python loop re-runs the model."""
    out = idx
    if use_cache:
        caches = None
        for t in range(idx.size(1)):
            logits, caches = model.forward_cached(idx[:, t:t + 1], caches)
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = model(out)
        nxt = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)
        out = torch.cat((out, nxt.unsqueeze(1)), dim=1)
        if use_cache:
            logits, caches = model.forward_cached(nxt.unsqueeze(1), caches)
    return out


def top_k_by_sort(logits, k):
    if k is None or k >= logits.shape[-1]:
        return logits
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
    return torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf")))


def top_p_hugging_face(logits, p):
    if p is None or p >= 1:
        return logits
    sorted_logits, order = torch.sort(logits, descending=False)
    drop = sorted_logits.softmax(-1).cumsum(-1) <= 1 - p
    drop[..., -1:] = False
    return logits.masked_fill(drop.scatter(-1, order, drop), torch.finfo(logits.dtype).min)


def sampling_probs_renormalised(logits, temperature=1.0, top_k=None, top_p=None):
    probs = (logits / temperature).softmax(-1)
    keep = top_p_hugging_face(top_k_by_sort(logits / temperature, top_k), top_p) > torch.finfo(logits.dtype).min
    probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


def sample_next_token_own(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.max(dim=-1).indices
    probs = sampling_probs_renormalised(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def beam_search_lists(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    """Python lists of (tokens, score); the candidates flattened beam-major, as topk over (N * V) sees them."""
    beams, done = [(prefix.tolist(), 0.0)], []
    for _ in range(max_new_tokens):
        lp = step_fn(torch.tensor([b for b, _ in beams])).double()
        flat = torch.stack([s + lp[i] for i, (_, s) in enumerate(beams)]).flatten()
        top = flat.topk(min(beam_size, flat.numel()))
        V = lp.shape[-1]
        new = []
        for score, j in zip(top.values.tolist(), top.indices.tolist()):
            seq = beams[j // V][0] + [j % V]
            (done if j % V == eos_id else new).append((seq, score))
        beams = new
        if not beams or len(done) >= beam_size:
            break
    n0 = len(prefix)
    scored = [(seq, s / (len(seq) - n0) ** alpha) for seq, s in done + beams]
    best = max(scored, key=lambda c: c[1])
    return torch.tensor(best[0]), best[1]


def softmax_backward_jacobian(y, grad_y, dim=-1):
    y_, g_ = y.movedim(dim, -1), grad_y.movedim(dim, -1)
    jac = torch.diag_embed(y_) - y_.unsqueeze(-1) * y_.unsqueeze(-2)  # (..., n, n), symmetric
    return torch.einsum("...ij,...j->...i", jac, g_).movedim(-1, dim)


def layer_norm_backward_sums(x, weight, grad_out, eps=1e-5):
    N = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    inv = (((x - mu) ** 2).mean(-1, keepdim=True) + eps).rsqrt()
    x_hat = (x - mu) * inv
    g = grad_out * weight
    grad_x = inv / N * (N * g - g.sum(-1, keepdim=True) - x_hat * (g * x_hat).sum(-1, keepdim=True))
    flat = lambda t: t.reshape(-1, N)  # noqa: E731
    return grad_x, (flat(grad_out) * flat(x_hat)).sum(0), flat(grad_out).sum(0)


def cross_entropy_soft_targets(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.shape[-1]
    z, t = logits.reshape(-1, C), target.reshape(-1)
    keep = t != ignore_index
    z, t = z[keep], t[keep]
    soft = torch.full_like(z, label_smoothing / C)
    soft[torch.arange(len(t)), t] += 1 - label_smoothing
    return -(soft * F.log_softmax(z, -1)).sum(-1).mean()


def sliding_window_tril_triu(T, window, device=None):
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    return (ones.tril() & ones.triu(-(window - 1))).view(1, 1, T, T)


def flops_per_part(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    d_kv = (num_kv_heads or H) * (d // H)
    q_o, k_v = 2 * (2 * n * d * d), 2 * (2 * n * d * d_kv)
    scores = H * 2 * n * n * (d // H)
    return batch * (q_o + k_v + 2 * scores), batch * H * n * n * bytes_per_element


def kv_cache_bytes_per_token(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    per_token = num_layers * 2 * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len * batch


CASES = [
    ("repeat_kv", repeat_kv_builtin),
    ("GroupedQueryAttention", GQAGroupedEinsum),
    ("GroupedQueryAttention", R["GroupedQueryAttention"]),
    ("SwiGLU", SwiGLUManual),
    ("GPTBlock", R["GPTBlock"]),
    ("GPT", R["GPT"]),
    ("generate", generate_prefill_one_by_one),
    ("top_k_filter", top_k_by_sort),
    ("top_p_filter", top_p_hugging_face),
    ("sampling_probs", sampling_probs_renormalised),
    ("sample_next_token", sample_next_token_own),
    ("beam_search", beam_search_lists),
    ("softmax_backward", softmax_backward_jacobian),
    ("layer_norm_backward", layer_norm_backward_sums),
    ("cross_entropy", cross_entropy_soft_targets),
    ("make_sliding_window_mask", sliding_window_tril_triu),
    ("attention_flops_and_memory", flops_per_part),
    ("kv_cache_bytes", kv_cache_bytes_per_token),
]
