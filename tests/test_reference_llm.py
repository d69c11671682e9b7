"""The shared LLM components (docs/CONTRACT_LLM.md) equal PyTorch where PyTorch has the operation:
``F.scaled_dot_product_attention(..., enable_gqa=True)``, ``nn.RMSNorm``, autograd, ``F.cross_entropy``,
``torch.multinomial`` with a fixed generator, ``torch.utils.flop_counter``; where it has none
(KV cache, beam search), they equal the uncached computation and an exhaustive search."""
import itertools
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from solutions import (
    GPT,
    AdamW,
    GPTBlock,
    GroupedQueryAttention,
    MultiHeadAttention,
    SwiGLU,
    Transformer,
    apply_rope,
    attention_flops_and_memory,
    batch_norm_backward,
    batch_norm_forward,
    beam_search,
    clip_grad_norm,
    cross_entropy,
    generate,
    gpt_step_fn,
    kv_cache_bytes,
    layer_norm_backward,
    make_sliding_window_mask,
    make_subsequent_mask,
    mlp_backward,
    repeat_kv,
    sample_next_token,
    sampling_probs,
    scaled_dot_product_attention,
    softmax_backward,
    top_k_filter,
    top_p_filter,
    transformer_step_fn,
    warmup_cosine_lr,
)

pytestmark = pytest.mark.usefixtures("float64")


def randomize(module, seed=0, scale=0.3):
    """Weights of moderate size (the 0.02 init makes every attention nearly uniform); norms non-default."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.copy_(1 + scale * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.size(-1)))
    return module


def pad_causal(keep):
    """(B, T) bool keep -> (B, 1, T, T): key padding & causal; no query row is fully masked when keep[:, 0]."""
    return keep[:, None, None, :] & make_subsequent_mask(keep.size(1))


def torch_gqa(m, x, mask):
    """The same attention with PyTorch's fused SDPA (enable_gqa) on our projections."""
    B, T, d = x.shape
    H, G, d_k = m.num_heads, m.num_kv_heads, m.d_k
    q = m.W_q(x).view(B, T, H, d_k).transpose(1, 2)
    k = m.W_k(x).view(B, T, G, d_k).transpose(1, 2)
    v = m.W_v(x).view(B, T, G, d_k).transpose(1, 2)
    if m.rope:
        q, k = apply_rope(q, base=m.rope_base), apply_rope(k, base=m.rope_base)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return m.W_o(out.transpose(1, 2).reshape(B, T, d))


# ---------------------------------------------------------------- grouped-query attention

@pytest.mark.parametrize("H, G", [(4, 4), (4, 2), (4, 1), (6, 3), (1, 1)])
@pytest.mark.parametrize("rope", [True, False])
def test_gqa_equals_sdpa_enable_gqa(H, G, rope, max_diff):
    torch.manual_seed(0)
    d = 8 * H
    m = randomize(GroupedQueryAttention(d, H, G, rope=rope))
    x = torch.randn(2, 6, d, requires_grad=True)
    mask = pad_causal(torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool))
    ours, cache = m(x, mask)
    theirs = torch_gqa(m, x, mask)
    max_diff(f"GQA H={H} G={G} rope={rope} vs F.sdpa(enable_gqa)", ours, theirs)
    assert cache[0].shape == cache[1].shape == (2, G, 6, 8)
    w = torch.randn(ours.shape)
    g_ours = torch.autograd.grad((ours * w).sum(), [x, m.W_k.weight])
    g_theirs = torch.autograd.grad((theirs * w).sum(), [x, m.W_k.weight])
    for a, b in zip(g_ours, g_theirs):
        max_diff("GQA gradients vs F.sdpa(enable_gqa)", a, b)


def test_gqa_fully_masked_row_is_zero_not_nan():
    m = randomize(GroupedQueryAttention(16, 4, 2))
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    mask[..., 1, :] = False
    out, _ = m(torch.randn(1, 3, 16), mask)
    assert not out.isnan().any() and torch.equal(out[0, 1], torch.zeros(16))


def test_gqa_with_all_heads_equals_chapter_02_mha(max_diff):
    """G = H without RoPE is chapter 02's MultiHeadAttention with zero biases."""
    gqa = randomize(GroupedQueryAttention(16, 4, 4, rope=False))
    mha = MultiHeadAttention(16, 4)
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_o"):
            getattr(mha, name).weight.copy_(getattr(gqa, name).weight)
            getattr(mha, name).bias.zero_()
    x, mask = torch.randn(2, 5, 16), make_subsequent_mask(5)
    max_diff("GQA(G=H, no RoPE) vs MultiHeadAttention", gqa(x, mask)[0], mha(x, x, mask)[0])


def test_repeat_kv_is_repeat_interleave_not_repeat():
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(repeat_kv(x, 2), torch.repeat_interleave(x, 2, dim=1))
    assert not torch.equal(repeat_kv(x, 2), x.repeat(1, 2, 1, 1))
    assert repeat_kv(x, 1) is x


def test_gqa_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError):
        GroupedQueryAttention(16, 4, 3)
    with pytest.raises(ValueError):
        GroupedQueryAttention(18, 4, 2)


@pytest.mark.parametrize("G", [4, 2, 1])
def test_gqa_cache_steps_equal_the_full_causal_run(G, max_diff):
    m = randomize(GroupedQueryAttention(16, 4, G), seed=G)
    x = torch.randn(2, 7, 16)
    full, (k_full, v_full) = m(x, make_subsequent_mask(7))
    out, cache = m(x[:, :3], make_subsequent_mask(3))  # prompt of 3, then one token at a time
    outs = [out]
    for t in range(3, 7):
        out, cache = m(x[:, t:t + 1], None, cache)
        outs.append(out)
    max_diff(f"GQA G={G}: cached steps vs full causal run", torch.cat(outs, dim=1), full)
    max_diff("cached keys (after RoPE) vs full run", cache[0], k_full)
    assert cache[1].shape == v_full.shape


# ---------------------------------------------------------------- SwiGLU, block, model

def test_swiglu_equals_its_formula_with_torch_ops(max_diff):
    m = randomize(SwiGLU(12, 20))
    x = torch.randn(2, 3, 12)
    theirs = F.linear(F.silu(F.linear(x, m.gate_proj.weight)) * F.linear(x, m.up_proj.weight), m.down_proj.weight)
    max_diff("SwiGLU vs F.silu/F.linear", m(x), theirs)
    assert sum(p.numel() for p in m.parameters()) == 3 * 12 * 20


def torch_block(block, x, mask):
    """The Pre-LN block from PyTorch's own pieces: nn.RMSNorm, F.sdpa(enable_gqa), F.silu."""
    d = x.size(-1)
    norm1, norm2 = nn.RMSNorm(d, eps=block.norm1.eps), nn.RMSNorm(d, eps=block.norm2.eps)
    with torch.no_grad():
        norm1.weight.copy_(block.norm1.weight)
        norm2.weight.copy_(block.norm2.weight)
    h = x + torch_gqa(block.attn, norm1(x), mask)
    f = block.ffn
    n2 = norm2(h)
    return h + F.linear(F.silu(F.linear(n2, f.gate_proj.weight)) * F.linear(n2, f.up_proj.weight), f.down_proj.weight)


def test_gpt_block_equals_pytorch_pieces(max_diff):
    block = randomize(GPTBlock(16, 4, 2, 24)).eval()
    x = torch.randn(2, 5, 16)
    mask = make_subsequent_mask(5)
    max_diff("GPTBlock vs nn.RMSNorm + F.sdpa(enable_gqa) + SiLU", block(x, mask)[0], torch_block(block, x, mask))


@pytest.mark.parametrize("tie", [False, True])
def test_gpt_forward_equals_pytorch_pieces(tie, max_diff):
    model = GPT(11, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=16, tie_weights=tie)
    randomize(model).eval()
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    x = model.tok_embed(idx)
    for block in model.blocks:
        x = torch_block(block, x, make_subsequent_mask(6))
    norm = nn.RMSNorm(16, eps=model.norm.eps)
    with torch.no_grad():
        norm.weight.copy_(model.norm.weight)
    max_diff(f"GPT(tie_weights={tie}) vs PyTorch pieces", model(idx), F.linear(norm(x), model.lm_head.weight))
    assert (model.lm_head.weight is model.tok_embed.weight) == tie
    with pytest.raises(ValueError):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_gpt_forward_cached_equals_forward(max_diff):
    model = randomize(GPT(11, d_model=16, num_heads=4, num_kv_heads=1, d_ff=24, num_layers=3, max_len=16)).eval()
    idx = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(2))
    full = model(idx)
    logits, caches = model.forward_cached(idx[:, :4])  # a prompt, then chunks of 1 and 4 tokens
    parts = [logits]
    for chunk in (idx[:, 4:5], idx[:, 5:9]):
        logits, caches = model.forward_cached(chunk, caches)
        parts.append(logits)
    max_diff("GPT.forward_cached in chunks vs forward", torch.cat(parts, dim=1), full)


# ---------------------------------------------------------------- sampling

def test_top_k_keeps_ties_at_the_boundary():
    logits = torch.tensor([[3.0, 2.0, 2.0, 1.0, 0.5]])
    kept = top_k_filter(logits, 2).isfinite()
    assert kept.tolist() == [[True, True, True, False, False]]
    assert torch.equal(top_k_filter(logits, 5), logits) and torch.equal(top_k_filter(logits, None), logits)


def hf_top_p(logits, p):
    """Hugging Face's TopPLogitsWarper (ascending sort, drop cumulative mass <= 1 - p, keep the top one)."""
    sorted_logits, order = torch.sort(logits, descending=False)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum <= (1 - p)
    drop[..., -1:] = False
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def test_top_p_keeps_the_token_that_crosses_p():
    logits = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log()  # exact binary fractions
    kept = lambda p: int(top_p_filter(logits, p).isfinite().sum())  # noqa: E731
    assert [kept(p) for p in (0.3, 0.49, 0.51, 0.74, 0.76, 0.99)] == [1, 1, 2, 2, 3, 4]
    assert kept(1e-9) == 1  # the most probable token is always kept


def test_top_p_equals_hugging_face_on_random_logits():
    g = torch.Generator().manual_seed(3)
    for p in (0.1, 0.5, 0.8, 0.95):
        logits = 2 * torch.randn(16, 30, generator=g)
        assert torch.equal(top_p_filter(logits, p).isfinite(), hf_top_p(logits, p).isfinite())


def test_sampling_probs_and_multinomial_with_a_fixed_generator():
    logits = 2 * torch.randn(5, 20, generator=torch.Generator().manual_seed(4))
    probs = sampling_probs(logits, temperature=0.7, top_k=8, top_p=0.9)
    assert torch.allclose(probs.sum(-1), torch.ones(5))
    assert ((probs > 0).sum(-1) <= 8).all()
    expected = torch.softmax(hf_top_p(top_k_filter(logits / 0.7, 8), 0.9), -1)
    assert torch.allclose(probs, expected, atol=1e-12)
    tokens = sample_next_token(logits, 0.7, 8, 0.9, generator=torch.Generator().manual_seed(5))
    assert torch.equal(tokens, torch.multinomial(expected, 1, generator=torch.Generator().manual_seed(5)).squeeze(-1))
    assert torch.equal(sample_next_token(logits, 0.0), logits.argmax(-1))


def test_temperature_divides_the_logits_before_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    assert torch.allclose(sampling_probs(logits, temperature=0.5), torch.softmax(2 * logits, -1))
    assert not torch.allclose(sampling_probs(logits, temperature=0.5), torch.softmax(logits, -1))


# ---------------------------------------------------------------- KV cache: identical tokens

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kwargs", [dict(temperature=0.0), dict(temperature=0.8, top_k=10, top_p=0.9),
                                    dict(temperature=1.3)], ids=["greedy", "top-k-top-p", "hot"])
def test_cached_generation_gives_exactly_the_uncached_tokens(dtype, kwargs):
    model = randomize(GPT(23, d_model=32, num_heads=4, num_kv_heads=2, d_ff=48, num_layers=2, max_len=64), seed=6)
    model = model.to(dtype).eval()
    prompt = torch.randint(0, 23, (3, 5), generator=torch.Generator().manual_seed(7))
    runs = [generate(model, prompt, 24, generator=torch.Generator().manual_seed(8), use_cache=c, **kwargs)
            for c in (True, False)]
    assert runs[0].shape == (3, 29)
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :5], prompt)


# ---------------------------------------------------------------- beam search

def markov_step_fn(table):
    """log-probs that depend on the last token and the length: (t, V, V) table."""
    return lambda ys: table[ys.size(1) - 1, ys[:, -1]]


def exhaustive(table, prefix, max_new, eos, alpha):
    V, best = table.size(-1), None
    for n in range(1, max_new + 1):
        for seq in itertools.product(range(V), repeat=n):
            if eos in seq[:-1] or (n < max_new and seq[-1] != eos):
                continue  # EOS ends a sequence; shorter than max_new only if it ended
            ys = list(prefix) + list(seq)
            logp = sum(float(table[len(prefix) + i - 1, ys[len(prefix) + i - 1], tok]) for i, tok in enumerate(seq))
            score = logp / n ** alpha
            if best is None or score > best[1]:
                best = (ys, score)
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
def test_wide_beam_search_equals_exhaustive_search(alpha):
    V, max_new, eos = 4, 4, 0
    g = torch.Generator().manual_seed(9)
    table = torch.log_softmax(1.5 * torch.randn(8, V, V, generator=g), -1)
    prefix = torch.tensor([2, 3])
    tokens, score = beam_search(markov_step_fn(table), prefix, V ** max_new, max_new, eos, alpha)
    expected_tokens, expected_score = exhaustive(table, prefix.tolist(), max_new, eos, alpha)
    assert tokens.tolist() == expected_tokens
    assert math.isclose(score, expected_score, rel_tol=1e-12)


def test_length_normalisation_changes_the_winner():
    """A short finished sequence wins the raw sum; length normalisation prefers the longer one."""
    table = torch.full((4, 3, 3), -20.0)
    table[0, 1] = torch.tensor([-1.0, -0.4, -20.0])  # after the prefix: EOS (0) at -1, or token 1 at -0.4
    table[1, 1] = torch.tensor([-0.8, -20.0, -20.0])  # then EOS at -0.8: total -1.2 over 2 tokens
    short, _ = beam_search(markov_step_fn(table), torch.tensor([1]), 2, 3, 0, alpha=0.0)
    longer, _ = beam_search(markov_step_fn(table), torch.tensor([1]), 2, 3, 0, alpha=1.0)
    assert short.tolist() == [1, 0] and longer.tolist() == [1, 1, 0]


def test_finished_beams_are_never_extended():
    calls = []
    table = torch.log_softmax(torch.randn(6, 5, 5, generator=torch.Generator().manual_seed(10)), -1)
    step = markov_step_fn(table)

    def spy(ys):
        calls.append(ys.clone())
        return step(ys)

    beam_search(spy, torch.tensor([1]), 3, 5, 0)
    assert all((ys[:, 1:] != 0).all() for ys in calls)  # no beam that emitted EOS is fed again


def test_beam_of_one_is_greedy_on_gpt_and_on_the_transformer():
    model = randomize(GPT(9, d_model=16, num_heads=2, num_kv_heads=1, d_ff=24, max_len=32), seed=11).eval()
    prompt = torch.tensor([3, 4, 5])
    tokens, _ = beam_search(gpt_step_fn(model), prompt, 1, 8, eos_id=0)
    greedy = generate(model, prompt[None], 8)[0]
    stop = (greedy[3:] == 0).nonzero()
    expected = greedy[: 3 + int(stop[0]) + 1] if len(stop) else greedy
    assert torch.equal(tokens, expected)

    torch.manual_seed(12)
    seq2seq = Transformer(11, 13, d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.0, max_len=32).eval()
    src = torch.tensor([[5, 3, 8, 4, 9, 2]])
    tokens, _ = beam_search(transformer_step_fn(seq2seq, src), torch.tensor([1]), 1, 10, eos_id=2)
    greedy = seq2seq.greedy_decode(src, 1, 2, 10)[0]
    assert torch.equal(tokens, greedy[: tokens.numel()]) and (tokens.numel() == greedy.numel() or tokens[-1] == 2)


# ---------------------------------------------------------------- backward passes and the loss

@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_backward_equals_autograd(dim, max_diff):
    x = torch.randn(3, 4, 5, requires_grad=True)
    y = torch.softmax(x, dim)
    grad_y = torch.randn(y.shape)
    (expected,) = torch.autograd.grad(y, x, grad_y)
    max_diff(f"softmax_backward dim={dim} vs autograd", softmax_backward(y.detach(), grad_y, dim), expected)


@pytest.mark.parametrize("shape, eps", [((2, 5, 8), 1e-5), ((4, 6), 1e-3), ((7,), 1e-5)])
def test_layer_norm_backward_equals_autograd(shape, eps, max_diff):
    d = shape[-1]
    x = (3 * torch.randn(shape) + 1).requires_grad_(True)
    weight = (1 + 0.3 * torch.randn(d)).requires_grad_(True)
    bias = torch.randn(d, requires_grad=True)
    out = F.layer_norm(x, (d,), weight, bias, eps)
    grad_out = torch.randn(out.shape)
    expected = torch.autograd.grad(out, [x, weight, bias], grad_out)
    ours = layer_norm_backward(x.detach(), weight.detach(), grad_out, eps)
    for name, a, b in zip(("grad_x", "grad_weight", "grad_bias"), ours, expected):
        max_diff(f"layer_norm_backward {name} vs autograd", a, b)


@pytest.mark.parametrize("shape, eps, scale", [((8, 5), 1e-5, 3.0), ((2, 4), 1e-3, 0.03), ((32, 3), 1e-5, 1.0)])
def test_batch_norm_forward_and_backward_equal_pytorch(shape, eps, scale, max_diff):
    """Training mode, batch statistics over dim 0: the forward equals F.batch_norm(training=True), the backward
    autograd through it (N = 2 too, where the biased and unbiased variances differ by a factor of 2)."""
    d = shape[-1]
    x = (scale * torch.randn(shape) + 1).requires_grad_(True)
    weight = (1 + 0.3 * torch.randn(d)).requires_grad_(True)
    bias = torch.randn(d, requires_grad=True)
    out = F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)
    max_diff("batch_norm_forward vs F.batch_norm", batch_norm_forward(x.detach(), weight.detach(), bias.detach(), eps),
             out)
    grad_out = torch.randn(out.shape)
    expected = torch.autograd.grad(out, [x, weight, bias], grad_out)
    ours = batch_norm_backward(x.detach(), weight.detach(), grad_out, eps)
    for name, a, b in zip(("grad_x", "grad_weight", "grad_bias"), ours, expected):
        max_diff(f"batch_norm_backward {name} vs autograd", a, b, tol=1e-10 if scale < 0.1 else 1e-12)


@pytest.mark.parametrize("lead, d_in, h, d_out", [((6,), 4, 8, 3), ((2, 5), 3, 7, 4), ((1,), 2, 5, 1)])
def test_mlp_backward_equals_autograd(lead, d_in, h, d_out, max_diff):
    x = torch.randn(*lead, d_in, requires_grad=True)
    w1, b1 = torch.randn(h, d_in, requires_grad=True), torch.randn(h, requires_grad=True)
    w2, b2 = torch.randn(d_out, h, requires_grad=True), torch.randn(d_out, requires_grad=True)
    y = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
    grad_out = torch.randn(y.shape)
    expected = torch.autograd.grad(y, [x, w1, b1, w2, b2], grad_out)
    ours = mlp_backward(*(t.detach() for t in (x, w1, b1, w2, b2)), grad_out)
    for name, a, b in zip(("grad_x", "grad_w1", "grad_b1", "grad_w2", "grad_b2"), ours, expected):
        max_diff(f"mlp_backward {name} vs autograd", a, b)


@pytest.mark.parametrize("ignore_index, smoothing", [(-100, 0.0), (0, 0.0), (0, 0.1), (-100, 0.3), (3, 0.2)])
def test_cross_entropy_equals_pytorch(ignore_index, smoothing, max_diff):
    g = torch.Generator().manual_seed(13)
    logits = (3 * torch.randn(2, 6, 7, generator=g)).requires_grad_(True)
    target = torch.randint(0, 7, (2, 6), generator=g)
    target[0, :2] = 0
    target[1, -1] = 3
    ours = cross_entropy(logits, target, ignore_index, smoothing)
    theirs = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), ignore_index=ignore_index,
                             label_smoothing=smoothing)
    max_diff(f"cross_entropy ignore={ignore_index} eps={smoothing} vs F.cross_entropy", ours, theirs)
    max_diff("cross_entropy gradient", *(torch.autograd.grad(v, logits)[0] for v in (ours, theirs)))
    big = cross_entropy(logits.detach() + 1000.0, target, ignore_index, smoothing)
    assert big.isfinite() and math.isclose(float(big), float(ours.detach()), rel_tol=1e-9)


# ---------------------------------------------------------------- masks and costs

@pytest.mark.parametrize("T, window", [(6, 1), (6, 3), (5, 5), (4, 9)])
def test_sliding_window_mask(T, window):
    mask = make_sliding_window_mask(T, window)
    expected = torch.tensor([[i - window < j <= i for j in range(T)] for i in range(T)])
    assert mask.dtype == torch.bool and torch.equal(mask, expected[None, None])
    assert (mask.sum(-1) <= window).all() and mask[..., -1, :].sum() == min(window, T)
    if window >= T:
        assert torch.equal(mask, make_subsequent_mask(T))


@pytest.mark.parametrize("n, d, H, G, batch",
                         [(16, 32, 4, None, 1), (40, 32, 4, 2, 2), (8, 24, 6, 1, 3), (64, 16, 2, 2, 1)])
def test_attention_flops_and_memory_equal_counted_ops(n, d, H, G, batch):
    m = GroupedQueryAttention(d, H, G or H, rope=False)
    x = torch.randn(batch, n, d)
    counter = FlopCounterMode(display=False)
    with counter:
        m(x)
    flops, attn_bytes = attention_flops_and_memory(n, d, H, G, batch=batch, bytes_per_element=8)
    assert flops == counter.get_total_flops()
    q = torch.randn(batch, H, n, d // H)
    _, attn = scaled_dot_product_attention(q, q, q)
    assert attn_bytes == attn.numel() * attn.element_size()


def test_kv_cache_bytes_equal_the_cache_tensors():
    model = GPT(11, d_model=32, num_heads=4, num_kv_heads=2, d_ff=48, num_layers=3, max_len=32).half()
    _, caches = model.forward_cached(torch.randint(0, 11, (2, 10)))
    held = sum(t.numel() * t.element_size() for k_v in caches for t in k_v)
    assert held == kv_cache_bytes(3, 2, 8, seq_len=10, batch=2, bytes_per_element=2)
    assert kv_cache_bytes(32, 8, 128) == 131072  # Llama-3-8B-like GQA: 128 KiB per token in fp16
    assert kv_cache_bytes(32, 32, 128) == 4 * kv_cache_bytes(32, 8, 128)


# ---------------------------------------------------------------- chapter 08's training pieces (issue 24)

@pytest.mark.parametrize("max_lr, warmup, steps, min_lr", [(0.5, 4, 12, 0.05), (5e-3, 20, 600, 5e-4), (1.0, 1, 6, 0.0)])
def test_warmup_cosine_lr_equals_pytorch_schedulers(max_lr, warmup, steps, min_lr):
    """PyTorch's own pieces: LinearLR from max_lr / warmup over the warmup, then CosineAnnealingLR to min_lr."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
    linear = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, total_iters=max(1, warmup - 1))
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - warmup, eta_min=min_lr)
    scheduler = torch.optim.lr_scheduler.SequentialLR(opt, [linear, cosine], milestones=[warmup])
    expected = []
    for _ in range(steps):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    got = [warmup_cosine_lr(s, max_lr, warmup, steps, min_lr=min_lr) for s in range(steps)]
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert got[0] == pytest.approx(max_lr / warmup) and got[warmup - 1] == pytest.approx(max_lr)


def test_clip_grad_norm_equals_pytorch():
    gen = torch.Generator().manual_seed(0)
    for scale, max_norm in ((3.0, 1.0), (0.01, 1.0), (1.0, 0.5)):
        mine = [torch.zeros(shape, requires_grad=True) for shape in ((4, 3), (5,), (2, 2, 2))]
        theirs = [torch.zeros(p.shape, requires_grad=True) for p in mine]
        for p, q in zip(mine, theirs):
            p.grad = scale * torch.randn(p.shape, generator=gen)
            q.grad = p.grad.clone()
        total = clip_grad_norm((p for p in mine), max_norm)  # a generator, as model.parameters()
        expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
        assert total == pytest.approx(expected.item(), rel=1e-6)
        for p, q in zip(mine, theirs):
            torch.testing.assert_close(p.grad, q.grad)


def test_adamw_equals_torch_optim_adamw_over_steps():
    """Several steps, float64, two settings: the learning rate set on the group between steps (as train_gpt does),
    then two param groups of different lr and weight_decay driven by a LambdaLR; a parameter left without a
    gradient on some steps keeps its own step count, as torch.optim.AdamW's."""
    gen = torch.Generator().manual_seed(1)
    for kwargs in (dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1), dict(lr=3e-3, eps=1e-6, weight_decay=0.0)):
        mine = [torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True) for shape in ((5, 4), (4,))]
        theirs = [p.detach().clone().requires_grad_(True) for p in mine]
        opt_mine, opt_theirs = AdamW(mine, **kwargs), torch.optim.AdamW(theirs, **kwargs)
        assert isinstance(opt_mine, torch.optim.Optimizer)
        for step in range(8):
            for opt in (opt_mine, opt_theirs):
                opt.param_groups[0]["lr"] = kwargs["lr"] * (1 + step % 3)
            for p, q in zip(mine, theirs):
                p.grad = torch.randn(p.shape, generator=gen, dtype=torch.float64)
                q.grad = p.grad.clone()
            opt_mine.step()
            opt_theirs.step()
            for p, q in zip(mine, theirs):
                torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
        opt_mine.zero_grad()
        assert all(p.grad is None for p in mine)

    shapes = ((4, 3), (3,), (6,))
    mine = [torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True) for shape in shapes]
    theirs = [p.detach().clone().requires_grad_(True) for p in mine]
    optimizers = [cls([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.03, "weight_decay": 0.0}], lr=0.01,
                      betas=(0.9, 0.95), weight_decay=0.1) for cls, ps in ((AdamW, mine), (torch.optim.AdamW, theirs))]
    factors = (0.5, 1.0, 0.8, 0.3, 0.1, 0.05)
    schedules = [torch.optim.lr_scheduler.LambdaLR(opt, lambda k: factors[k]) for opt in optimizers]
    for step in range(5):
        for i, (p, q) in enumerate(zip(mine, theirs)):
            frozen = i == 1 and step in (1, 2)  # no gradient on these steps: skipped, its step count waits
            p.grad = None if frozen else torch.randn(p.shape, generator=gen, dtype=torch.float64)
            q.grad = None if frozen else p.grad.clone()
        for opt, schedule in zip(optimizers, schedules):
            opt.step()
            schedule.step()
        for p, q in zip(mine, theirs):
            torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
    assert [g["lr"] for g in optimizers[0].param_groups] == [g["lr"] for g in optimizers[1].param_groups]


def test_train_gpt_uses_the_three_pieces_like_torch():
    """Three steps of train_gpt with the chapter's pieces equal the same steps with PyTorch's AdamW and clipping."""
    import solutions.gpt_data as gpt_data

    data = torch.randint(0, 11, (400,), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(3)
    mine = GPT(11, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=1, max_len=16)
    theirs = GPT(11, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=1, max_len=16)
    theirs.load_state_dict(mine.state_dict())
    gpt_data.train_gpt(mine, data, data, block_size=8, batch_size=4, max_steps=3, lr=1e-2, warmup=2, eval_every=3,
                       seed=0, progress=False)
    decay = [p for p in theirs.parameters() if p.dim() >= 2]
    rest = [p for p in theirs.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(0)
    for step in range(3):
        x, y = gpt_data.next_token_batch(data, 8, 4, gen)
        loss = F.cross_entropy(theirs(x).reshape(-1, 11), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        for group in opt.param_groups:
            group["lr"] = warmup_cosine_lr(step, 1e-2, 2, 3, min_lr=1e-3)
        opt.step()
    for (name, p), q in zip(mine.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)
