"""Wrong implementations of the shared LLM components (docs/CONTRACT_LLM.md), each a classic mistake."""

import math

import torch
import torch.nn.functional as F

from .reference import load

R = load()
GQA, Block, GPT = R["GroupedQueryAttention"], R["GPTBlock"], R["GPT"]


def repeat_kv_cycled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # bug: head h gets KV head h % G


class _GQA(GQA):
    """The contract's attention with one step replaced (``rotate``, ``expand``, ``scale``)."""

    def rotate(self, t, positions):
        return R["apply_rope"](t, positions, self.rope_base)

    def expand(self, t):
        return torch.repeat_interleave(t, self.num_heads // self.num_kv_heads, dim=1)

    def positions(self, T_past, T):
        return torch.arange(T_past, T_past + T)

    def values(self, v, positions):
        return v

    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)
        T_past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            pos = self.positions(T_past, T)
            q, k, v = self.rotate(q, pos), self.rotate(k, pos), self.values(v, pos)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        out, _ = R["scaled_dot_product_attention"](q, self.expand(k), self.expand(v), mask)
        return self.W_o(out.transpose(1, 2).reshape(B, T, d)), (k, v)


class GQARepeat(_GQA):
    def expand(self, t):
        return t.repeat(1, self.num_heads // self.num_kv_heads, 1, 1)  # bug: repeat, not repeat_interleave


class GQAHalfSplitRope(_GQA):
    def rotate(self, t, positions):
        d = t.size(-1)
        theta = self.rope_base ** (-torch.arange(0, d, 2, dtype=t.dtype) / d)
        ang = positions.to(t.dtype)[:, None] * theta
        a, b = t[..., : d // 2], t[..., d // 2:]  # bug: pairs (i, i + d/2)
        return torch.cat((a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()), dim=-1)


class GQARopeOnValues(_GQA):
    def values(self, v, positions):
        return self.rotate(v, positions)  # bug: the values are rotated too


class GQACacheBeforeRope(_GQA):
    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)  # (B, G, T, d_k)
        T_past = 0 if cache is None else cache[0].size(2)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)  # (B, G, T_past + T, d_k)
        keys = k
        if self.rope:  # bug: the cache keeps the keys before RoPE, all rotated again at every call
            q, keys = self.rotate(q, self.positions(T_past, T)), self.rotate(k, torch.arange(k.size(2)))
        out, _ = R["scaled_dot_product_attention"](q, self.expand(keys), self.expand(v), mask)  # (B, H, T, d_k)
        return self.W_o(out.transpose(1, 2).reshape(B, T, d)), (k, v)


class GQACachePositionsReset(_GQA):
    def positions(self, T_past, T):
        return torch.arange(T)  # bug: the new tokens always start at position 0


class SwiGLUUpActivated(torch.nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = torch.nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = torch.nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = torch.nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(self.gate_proj(x) * F.silu(self.up_proj(x)))  # bug: SiLU on the up branch


class SwiGLUSigmoid(SwiGLUUpActivated):
    def forward(self, x):
        return self.down_proj(torch.sigmoid(self.gate_proj(x)) * self.up_proj(x))  # bug: GLU's sigmoid


class BlockPostLN(Block):
    def forward(self, x, mask=None, cache=None):
        a, cache = self.attn(x, mask, cache)
        h = self.norm1(x + a)  # bug: Post-LN
        return self.norm2(h + self.ffn(h)), cache


class GPTNoFinalNorm(GPT):
    def forward_cached(self, idx, caches=None):
        T = idx.size(1)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]
        x = self.tok_embed(idx)
        for block in self.blocks:
            x, _ = block(x, mask)
        return self.lm_head(x), None  # bug: no self.norm


class GPTNotCausal(GPT):
    def forward_cached(self, idx, caches=None):
        x = self.tok_embed(idx)
        for block in self.blocks:
            x, _ = block(x, None)  # bug: no causal mask
        return self.lm_head(self.norm(x)), None


@torch.no_grad()
def generate_refeeds_prefix(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                            use_cache=True):
    caches = None
    for _ in range(max_new_tokens):
        if use_cache:
            logits, caches = model.forward_cached(idx, caches)  # bug: the whole sequence again, on top of the cache
        else:
            logits = model(idx)
        nxt = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx


def top_k_exactly_k(logits, k):
    if k is None or k >= logits.size(-1):
        return logits
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, -1).indices, True)
    return logits.masked_fill(~keep, float("-inf"))  # bug: ties with the k-th are dropped


def top_k_zero_fill(logits, k):
    if k is None or k >= logits.size(-1):
        return logits
    return logits.masked_fill(logits < logits.topk(k, -1).values[..., -1:], 0.0)  # bug: 0, not -inf


def top_p_drops_crossing(logits, p):
    probs, order = torch.sort(logits.softmax(-1), -1, descending=True)
    drop = probs.cumsum(-1) > p  # bug: the token that crosses p is dropped too
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def top_p_unsorted(logits, p):
    probs = logits.softmax(-1)
    drop = probs.cumsum(-1) - probs >= p  # bug: mass accumulated in vocabulary order, not sorted
    return logits.masked_fill(drop, float("-inf"))


def top_p_strict(logits, p):
    probs, order = torch.sort(logits.softmax(-1), -1, descending=True)
    over = probs.cumsum(-1) > p  # bug: strict >, a mass of exactly p keeps one token more
    drop = torch.cat([torch.zeros_like(over[..., :1]), over[..., :-1]], -1)
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def top_p_one_minus_p(logits, p):
    probs, order = torch.sort(logits.softmax(-1), -1, descending=True)
    drop = probs.cumsum(-1) - probs >= 1 - p  # bug: the nucleus of mass 1 - p
    drop[..., 0] = False
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def _exactly_k(logits, k):
    if k is None or k >= logits.size(-1):
        return logits
    values, indices = logits.topk(k, -1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)  # bug: ties at the k-th dropped


def sampling_probs_exactly_k(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.softmax(R["top_p_filter"](_exactly_k(logits / temperature, top_k), top_p), -1)


def sample_next_token_exactly_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    return torch.multinomial(sampling_probs_exactly_k(logits, temperature, top_k, top_p), 1,
                             generator=generator).squeeze(-1)


def sampling_probs_temperature_after(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(R["top_p_filter"](R["top_k_filter"](logits, top_k), top_p), -1) ** 1.0 / temperature
    return probs / probs.sum(-1, keepdim=True)  # bug: temperature after the softmax has no effect


def sampling_probs_order_swapped(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.softmax(R["top_k_filter"](R["top_p_filter"](logits / temperature, top_p), top_k), -1)  # bug


def sample_argmax(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return R["sampling_probs"](logits, temperature or 1.0, top_k, top_p).argmax(-1)  # bug: never samples


def sample_temperature_after(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(R["top_p_filter"](R["top_k_filter"](logits, top_k), top_p), -1) / temperature  # bug
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _beam(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0, normalise=True, stop=True):
    alive, scores, finished = prefix[None], torch.zeros(1, dtype=torch.float64), []
    for _ in range(max_new_tokens):
        lp = step_fn(alive).double()
        V = lp.size(-1)
        top, flat = (scores[:, None] + lp).flatten().topk(min(beam_size, lp.numel()))
        ys = torch.cat([alive[flat // V], (flat % V)[:, None]], 1)
        done = (flat % V == eos_id) & stop
        finished += [(ys[i], float(top[i].detach())) for i in range(len(ys)) if done[i]]
        alive, scores = ys[~done], top[~done]
        if len(alive) == 0 or len(finished) >= beam_size:
            break
    n0 = prefix.numel()
    key = (lambda c: c[1] / (len(c[0]) - n0) ** alpha) if normalise else (lambda c: c[1])
    best = max(finished + list(zip(alive, scores.tolist())), key=key)
    return best[0], float(key(best))


def beam_no_norm(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    return _beam(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha, normalise=False)  # bug: alpha ignored


def beam_never_stops(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    return _beam(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha, stop=False)  # bug: EOS beams go on


def softmax_backward_diagonal(y, grad_y, dim=-1):
    return y * (1 - y) * grad_y  # bug: only the Jacobian's diagonal


def softmax_backward_last_axis(y, grad_y, dim=-1):
    return y * (grad_y - (grad_y * y).sum(-1, keepdim=True))  # bug: ignores dim


def layer_norm_backward_no_means(x, weight, grad_out, eps=1e-5):
    sigma = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    d = x.size(-1)
    grad_x = grad_out * weight / sigma  # bug: as if mean and variance were constants
    return grad_x, (grad_out * x_hat).reshape(-1, d).sum(0), grad_out.reshape(-1, d).sum(0)


def layer_norm_backward_no_variance_term(x, weight, grad_out, eps=1e-5):
    sigma = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    g, d = grad_out * weight, x.size(-1)
    grad_x = (g - g.mean(-1, keepdim=True)) / sigma  # bug: the variance term is missing
    return grad_x, (grad_out * x_hat).reshape(-1, d).sum(0), grad_out.reshape(-1, d).sum(0)


def cross_entropy_rest(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.size(-1)
    logp, t = logits.reshape(-1, C).log_softmax(-1), target.reshape(-1)
    keep = t != ignore_index
    nll = -logp.gather(1, t.clamp(min=0).masked_fill(~keep, 0)[:, None]).squeeze(1)
    rest = (-logp.sum(-1) - nll) / (C - 1)  # bug: eps over the other C - 1 classes
    return ((1 - label_smoothing) * nll + label_smoothing * rest)[keep].mean()


def cross_entropy_mean_all(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.size(-1)
    logp, t = logits.reshape(-1, C).log_softmax(-1), target.reshape(-1)
    keep = t != ignore_index
    nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)
    loss = (1 - label_smoothing) * nll - label_smoothing * logp.mean(-1)
    return (loss * keep).sum() / t.numel()  # bug: ignored positions in the denominator


def cross_entropy_no_smoothing(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.size(-1)
    logp, t = logits.reshape(-1, C).log_softmax(-1), target.reshape(-1)
    keep = t != ignore_index
    nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return nll[keep].mean()  # bug: label_smoothing never read


def cross_entropy_summed(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.size(-1)
    logp, t = logits.reshape(-1, C).log_softmax(-1), target.reshape(-1)
    keep = t != ignore_index
    nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return ((1 - label_smoothing) * nll - label_smoothing * logp.mean(-1))[keep].sum()  # bug: sum, not mean


def cross_entropy_naive_logsumexp(logits, target, ignore_index=-100, label_smoothing=0.0):
    C = logits.size(-1)
    z, t = logits.reshape(-1, C), target.reshape(-1)
    logp = z - z.exp().sum(-1, keepdim=True).log()  # bug: exp(1000) overflows
    keep = t != ignore_index
    nll = -logp.gather(1, t.masked_fill(~keep, 0)[:, None]).squeeze(1)
    return ((1 - label_smoothing) * nll - label_smoothing * logp.mean(-1))[keep].mean()


def sliding_window_one_more(T, window, device=None):
    return torch.tril(torch.ones(T, T, dtype=torch.bool)).triu(-window)[None, None]  # bug: window + 1 keys


def sliding_window_symmetric(T, window, device=None):
    i = torch.arange(T)
    return ((i[:, None] - i[None, :]).abs() < window)[None, None]  # bug: future keys visible


def flops_macs(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    G, d_k = num_kv_heads or H, d // H
    return batch * (n * d * (2 * d + 2 * G * d_k) + 2 * n * n * d), batch * H * n * n * bytes_per_element  # bug: MACs


def flops_one_head_memory(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    G, d_k = num_kv_heads or H, d // H
    return batch * (2 * n * d * (2 * d + 2 * G * d_k) + 4 * n * n * d), batch * n * n * bytes_per_element  # bug: no H


def kv_bytes_only_k(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch * bytes_per_element  # bug: V forgotten


def kv_bytes_one_layer(num_layers, num_kv_heads, head_dim, seq_len=1, batch=1, bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch * bytes_per_element  # bug: one layer


class SwiGLUSiluAfter(SwiGLUUpActivated):
    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x) * self.up_proj(x)))  # bug: SiLU of the product


def top_k_one_more(logits, k):
    if k is None or k >= logits.size(-1):
        return logits
    kth = logits.sort(-1, descending=True).values[..., k:k + 1]  # bug: index k is the (k+1)-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def beam_prefix_counted(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    alive, scores, finished = prefix[None], torch.zeros(1, dtype=torch.float64), []
    for _ in range(max_new_tokens):
        lp = step_fn(alive).double()
        V = lp.size(-1)
        top, flat = (scores[:, None] + lp).flatten().topk(min(beam_size, lp.numel()))
        ys = torch.cat([alive[flat // V], (flat % V)[:, None]], 1)
        done = flat % V == eos_id
        finished += [(ys[i], float(top[i])) for i in range(len(ys)) if done[i]]
        alive, scores = ys[~done], top[~done]
        if len(alive) == 0 or len(finished) >= beam_size:
            break
    key = lambda c: c[1] / len(c[0]) ** alpha  # bug: the prefix counts in the length  # noqa: E731
    best = max(finished + list(zip(alive, scores.tolist())), key=key)
    return best[0], float(key(best))


def layer_norm_backward_no_weight(x, weight, grad_out, eps=1e-5):
    sigma = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    g, d = grad_out, x.size(-1)  # bug: the weight is forgotten
    grad_x = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / sigma
    return grad_x, (grad_out * x_hat).reshape(-1, d).sum(0), grad_out.reshape(-1, d).sum(0)


def flops_scores_only(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    return batch * 4 * n * n * d, batch * H * n * n * bytes_per_element  # bug: no projections


def flops_mha_projections(n, d, H, num_kv_heads=None, batch=1, bytes_per_element=4):
    return batch * (8 * n * d * d + 4 * n * n * d), batch * H * n * n * bytes_per_element  # bug: K, V as in MHA



class GQAScaledByDModel(_GQA):
    def forward(self, x, mask=None, cache=None):
        B, T, d = x.shape
        H, G, d_k = self.num_heads, self.num_kv_heads, self.d_k
        q = self.W_q(x).view(B, T, H, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, G, d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, G, d_k).transpose(1, 2)
        T_past = 0 if cache is None else cache[0].size(2)
        if self.rope:
            pos = self.positions(T_past, T)
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        s = q @ self.expand(k).transpose(-2, -1) / math.sqrt(d)  # bug: sqrt(d_model)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, -1).nan_to_num(0.0)
        out = w @ self.expand(v)
        return self.W_o(out.transpose(1, 2).reshape(B, T, d)), (k, v)

class GQAMaskInverted(_GQA):
    def forward(self, x, mask=None, cache=None):
        return super().forward(x, None if mask is None else ~mask, cache)  # bug: True = blocked

class GQACacheNone(_GQA):
    def forward(self, x, mask=None, cache=None):
        out, _ = super().forward(x, mask, cache)
        return out, None  # bug: the cache is not returned


class BlockNoAttnResidual(Block):
    def forward(self, x, mask=None, cache=None):
        a, cache = self.attn(self.norm1(x), mask, cache)
        h = self.dropout(a)  # bug: no x +
        return h + self.dropout(self.ffn(self.norm2(h))), cache

class BlockSharedNorm(Block):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.norm2 = self.norm1  # bug: one norm twice

class BlockCacheNone(Block):
    def forward(self, x, mask=None, cache=None):
        out, _ = super().forward(x, mask, cache)
        return out, None  # bug: the cache is not returned

def generate_first_position(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                            use_cache=True):
    model.eval()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(idx)
            nxt = R["sample_next_token"](logits[:, 0], temperature, top_k, top_p, generator)  # bug: position 0
            idx = torch.cat([idx, nxt[:, None]], 1)
    return idx

def generate_always_cached(model, idx, max_new_tokens, temperature=0.0, top_k=None, top_p=None, generator=None,
                           use_cache=True):
    model.eval()
    with torch.no_grad():
        logits, caches = model.forward_cached(idx)  # bug: use_cache ignored, always cached
        for _ in range(max_new_tokens):
            nxt = R["sample_next_token"](logits[:, -1], temperature, top_k, top_p, generator)
            idx = torch.cat([idx, nxt[:, None]], 1)
            logits, caches = model.forward_cached(nxt[:, None], caches)
    return idx

def beam_length_without_eos(step_fn, prefix, beam_size, max_new_tokens, eos_id, alpha=0.0):
    alive, scores, finished = prefix[None], torch.zeros(1, dtype=torch.float64), []
    for _ in range(max_new_tokens):
        lp = step_fn(alive).double()
        V = lp.size(-1)
        top, flat = (scores[:, None] + lp).flatten().topk(min(beam_size, lp.numel()))
        ys = torch.cat([alive[flat // V], (flat % V)[:, None]], 1)
        done = flat % V == eos_id
        finished += [(ys[i], float(top[i])) for i in range(len(ys)) if done[i]]
        alive, scores = ys[~done], top[~done]
        if len(alive) == 0 or len(finished) >= beam_size:
            break
    n0 = prefix.numel()
    def key(c):
        n = len(c[0]) - n0 - (1 if int(c[0][-1]) == eos_id else 0)  # bug: EOS not counted
        return c[1] / max(n, 1) ** alpha
    best = max(finished + list(zip(alive, scores.tolist())), key=key)
    return best[0], float(key(best))

def _ln_backward(x, weight, grad_out, eps=1e-5, unbiased=False, eps_out=False, no_mean_g=False):
    var = x.var(-1, keepdim=True, unbiased=unbiased)
    sigma = var.sqrt() + eps if eps_out else torch.sqrt(var + eps)
    x_hat = (x - x.mean(-1, keepdim=True)) / sigma
    g, d = grad_out * weight, x.size(-1)
    mg = 0 if no_mean_g else g.mean(-1, keepdim=True)
    grad_x = (g - mg - x_hat * (g * x_hat).mean(-1, keepdim=True)) / sigma
    return grad_x, (grad_out * x_hat).reshape(-1, d).sum(0), grad_out.reshape(-1, d).sum(0)

def layer_norm_backward_unbiased(x, weight, grad_out, eps=1e-5):
    return _ln_backward(x, weight, grad_out, eps, unbiased=True)  # bug: var / (d - 1)


def layer_norm_backward_eps_outside(x, weight, grad_out, eps=1e-5):
    return _ln_backward(x, weight, grad_out, eps, eps_out=True)  # bug: sqrt(var) + eps


def layer_norm_backward_no_mean_g(x, weight, grad_out, eps=1e-5):
    return _ln_backward(x, weight, grad_out, eps, no_mean_g=True)  # bug: g - x_hat * mean(g * x_hat) only


CASES = [
    ("GroupedQueryAttention", GQAScaledByDModel, "scale_by_d_model"),
    ("GroupedQueryAttention", GQAMaskInverted, "mask_inverted"),
    ("GroupedQueryAttention", GQACacheNone, "kv_cache_not_returned"),
    ("GPTBlock", BlockNoAttnResidual, "missing_residual"),
    ("GPTBlock", BlockSharedNorm, "shared_norm"),
    ("GPTBlock", BlockCacheNone, "kv_cache_not_returned"),
    ("generate", generate_first_position, "generate_wrong_position"),
    ("generate", generate_always_cached, "generate_use_cache_ignored"),
    ("beam_search", beam_length_without_eos, "beam_length_excludes_eos"),
    ("layer_norm_backward", layer_norm_backward_unbiased, "ln_unbiased_var"),
    ("layer_norm_backward", layer_norm_backward_eps_outside, "ln_eps_outside_sqrt"),
    ("layer_norm_backward", layer_norm_backward_no_mean_g, "ln_backward_no_mean_g"),
    ("repeat_kv", repeat_kv_cycled, "gqa_repeat_not_interleave"),
    ("GroupedQueryAttention", GQARepeat, "gqa_repeat_not_interleave"),
    ("GroupedQueryAttention", GQAHalfSplitRope, "rope_half_split"),
    ("GroupedQueryAttention", GQACachePositionsReset, "kv_cache_positions_reset"),
    ("GroupedQueryAttention", GQARopeOnValues, "rope_on_values"),
    ("GroupedQueryAttention", GQACacheBeforeRope, "kv_cache_before_rope"),
    ("SwiGLU", SwiGLUUpActivated, "swiglu_gate_wrong_branch"),
    ("SwiGLU", SwiGLUSigmoid, "swiglu_sigmoid_gate"),
    ("GPTBlock", BlockPostLN, "post_ln_instead_of_pre"),
    ("GPT", GPTNoFinalNorm, "gpt_no_final_norm"),
    ("GPT", GPTNotCausal, "causal_missing"),
    ("generate", generate_refeeds_prefix, "generate_cache_refeeds_prefix"),
    ("top_k_filter", top_k_exactly_k, "top_k_ties_dropped"),
    ("top_k_filter", top_k_zero_fill, "top_k_fill_zero"),
    ("top_p_filter", top_p_drops_crossing, "top_p_drops_crossing_token"),
    ("top_p_filter", top_p_unsorted, "top_p_not_sorted"),
    ("sampling_probs", sampling_probs_temperature_after, "temperature_after_softmax"),
    ("sampling_probs", sampling_probs_order_swapped, "filters_order_swapped"),
    ("sample_next_token", sample_argmax, "sample_argmax"),
    ("sample_next_token", sample_temperature_after, "temperature_after_softmax"),
    ("beam_search", beam_no_norm, "beam_no_length_norm"),
    ("beam_search", beam_never_stops, "beam_finished_extended"),
    ("softmax_backward", softmax_backward_diagonal, "softmax_backward_missing_sum"),
    ("softmax_backward", softmax_backward_last_axis, "backward_sum_wrong_axis"),
    ("layer_norm_backward", layer_norm_backward_no_means, "ln_backward_missing_mean_terms"),
    ("layer_norm_backward", layer_norm_backward_no_variance_term, "ln_backward_missing_variance_term"),
    ("cross_entropy", cross_entropy_rest, "ls_over_v_minus_1"),
    ("cross_entropy", cross_entropy_mean_all, "ce_ignored_in_mean"),
    ("cross_entropy", cross_entropy_no_smoothing, "ce_no_label_smoothing"),
    ("cross_entropy", cross_entropy_summed, "ce_sum_not_mean"),
    ("cross_entropy", cross_entropy_naive_logsumexp, "ce_no_max_subtraction"),
    ("top_p_filter", top_p_strict, "top_p_strict_tie"),
    ("top_p_filter", top_p_one_minus_p, "top_p_one_minus_p"),
    ("sampling_probs", sampling_probs_exactly_k, "top_k_ties_dropped"),
    ("sample_next_token", sample_next_token_exactly_k, "top_k_ties_dropped"),
    ("make_sliding_window_mask", sliding_window_one_more, "window_off_by_one"),
    ("make_sliding_window_mask", sliding_window_symmetric, "window_not_causal"),
    ("attention_flops_and_memory", flops_macs, "flops_macs_not_doubled"),
    ("attention_flops_and_memory", flops_one_head_memory, "attn_memory_one_head"),
    ("kv_cache_bytes", kv_bytes_only_k, "kv_cache_only_k"),
    ("kv_cache_bytes", kv_bytes_one_layer, "kv_cache_one_layer"),
    ("SwiGLU", SwiGLUSiluAfter, "swiglu_silu_after_product"),
    ("top_k_filter", top_k_one_more, "top_k_off_by_one"),
    ("beam_search", beam_prefix_counted, "beam_norm_counts_prefix"),
    ("layer_norm_backward", layer_norm_backward_no_weight, "ln_backward_no_weight"),
    ("attention_flops_and_memory", flops_scores_only, "flops_missing_projections"),
    ("attention_flops_and_memory", flops_mha_projections, "flops_kv_heads_ignored"),
]
