"""Chapter 13's references (``solutions/efficiency.py``) equal PyTorch or a brute-force version:
``torch.softmax``, ``F.scaled_dot_product_attention`` and chapter 01's attention, a dense mixture of
experts that runs every expert on every token, the Switch/Mixtral loss written from its definition
with one-hot counts, an element-by-element INT8 quantization, and MLA as multi-head attention whose key and
value projections are the products of its low-rank factors."""
import math

import pytest
import torch
import torch.nn.functional as F

from solutions import (
    MoELayer,
    MultiHeadLatentAttention,
    TopKRouter,
    dequantize_int8,
    load_balancing_loss,
    online_softmax,
    quantize_int8,
    scaled_dot_product_attention,
    tiled_attention,
)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 4, 9), (2, 1, 3, 1)])
def test_online_softmax_equals_torch_softmax(shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 5
    torch.testing.assert_close(online_softmax(x), torch.softmax(x, -1), rtol=0, atol=1e-12)


def test_online_softmax_is_stable_for_large_and_decreasing_inputs():
    x = torch.tensor([[1000.0, 999.0, -1000.0, 1001.0], [-5.0, -6.0, -7.0, -8.0]], dtype=torch.float64)
    torch.testing.assert_close(online_softmax(x), torch.softmax(x, -1), rtol=0, atol=1e-12)
    x32 = torch.randn(4, 33, generator=torch.Generator().manual_seed(1)) * 30
    torch.testing.assert_close(online_softmax(x32), torch.softmax(x32, -1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("T_q, T_k, block", [(10, 10, 3), (8, 13, 4), (16, 16, 16), (5, 7, 64), (33, 33, 8)])
def test_tiled_attention_equals_course_and_pytorch_attention(T_q, T_k, block):
    g = torch.Generator().manual_seed(T_q * 100 + T_k)
    q = torch.randn(2, 3, T_q, 8, generator=g, dtype=torch.float64) * 2
    k = torch.randn(2, 3, T_k, 8, generator=g, dtype=torch.float64) * 2
    v = torch.randn(2, 3, T_k, 5, generator=g, dtype=torch.float64)
    out = tiled_attention(q, k, v, block_size=block)
    course, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, course, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-12)


@pytest.mark.parametrize("T, block", [(10, 3), (12, 4), (9, 16), (17, 5)])
def test_causal_tiled_attention_equals_masked_attention(T, block):
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(2, 2, T, 6, generator=g, dtype=torch.float64) for _ in range(3))
    out = tiled_attention(q, k, v, block_size=block, causal=True)
    course, _ = scaled_dot_product_attention(q, k, v, torch.tril(torch.ones(T, T, dtype=torch.bool)))
    torch.testing.assert_close(out, course, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0, atol=1e-12)


def test_tiled_attention_float32_within_1e6():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 4, 200, 16, generator=g) for _ in range(3))
    course, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=32), course, rtol=0, atol=1e-6)


def test_tiled_attention_never_builds_a_T_by_T_tensor():
    """Every tensor an operation returns is at most block x block wide in its last two axes (or T x d)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    T, d, block = 64, 4, 8
    widest = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor) and t.dim() >= 2:
                    widest.append(t.shape[-2] * t.shape[-1])
            return out

    q, k, v = (torch.randn(1, 1, T, d) for _ in range(3))
    with Watch():
        tiled_attention(q, k, v, block_size=block, causal=True)
    assert max(widest) <= max(T * d, block * block) < T * T


def test_tiled_attention_rejects_bad_arguments_bilingually():
    x = torch.randn(1, 4, 2)
    with pytest.raises(ValueError, match="block_size 必须 >= 1 / block_size must be >= 1"):
        tiled_attention(x, x, x, block_size=0)
    with pytest.raises(ValueError, match="T_q == T_k / causal=True needs"):
        tiled_attention(x, torch.randn(1, 5, 2), torch.randn(1, 5, 2), causal=True)


@pytest.mark.parametrize("normalize", [True, False])
def test_router_softmax_then_top_k(normalize):
    torch.manual_seed(0)
    router = TopKRouter(6, 5, top_k=2, normalize=normalize)
    x = torch.randn(7, 6)
    weights, indices, logits = router(x)
    torch.testing.assert_close(logits, x @ router.gate.weight.T)
    probs = torch.softmax(logits, -1)
    for t in range(7):  # brute force: sort each token's probabilities
        order = sorted(range(5), key=lambda e: -probs[t, e].item())[:2]
        assert indices[t].tolist() == order
        chosen = probs[t, order]
        torch.testing.assert_close(weights[t], chosen / chosen.sum() if normalize else chosen)
    if normalize:  # Mixtral's top-k then softmax is the same thing
        torch.testing.assert_close(weights, torch.softmax(logits.gather(-1, indices), -1))


@pytest.mark.parametrize("top_k, normalize", [(1, False), (2, True), (2, False), (3, True)])
def test_moe_layer_equals_dense_brute_force(top_k, normalize):
    torch.manual_seed(1)
    moe = MoELayer(8, 12, 4, top_k=top_k, normalize=normalize)
    x = torch.randn(2, 5, 8)
    out, logits, indices = moe(x)
    tokens = x.reshape(10, 8)
    weights, _, _ = moe.router(tokens)
    dense = torch.stack([expert(tokens) for expert in moe.experts], 1)      # (N, E, d): every expert on every token
    gate = torch.zeros(10, 4).scatter(1, indices, weights)                   # (N, E): zero for experts not chosen
    expected = (gate[..., None] * dense).sum(1)
    torch.testing.assert_close(out, expected.reshape(2, 5, 8), rtol=1e-6, atol=1e-6)
    assert logits.shape == (10, 4) and indices.shape == (10, top_k)
    out.sum().backward()  # gradients reach the router through the weights and every chosen expert
    assert moe.router.gate.weight.grad.abs().sum() > 0


def test_load_balancing_loss_from_its_definition():
    g = torch.Generator().manual_seed(2)
    T, N, k = 12, 4, 2
    logits = torch.randn(T, N, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.softmax(logits, -1).topk(k, -1).indices
    loss = load_balancing_loss(logits, index, N)
    one_hot = F.one_hot(index, N).sum(1).to(torch.float64)                   # (T, N): 1 where a token went
    expected = N * sum((one_hot[:, i].mean() * torch.softmax(logits, -1)[:, i].mean()) for i in range(N))
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert logits.grad is not None and loss.dim() == 0


def test_load_balancing_loss_values_at_its_extremes():
    T, N = 8, 4
    uniform = torch.zeros(T, N)
    balanced = torch.arange(T)[:, None] % N                                  # (T, 1), two tokens each
    assert math.isclose(load_balancing_loss(uniform, balanced, N).item(), 1.0, rel_tol=1e-6)
    collapsed = torch.tensor([[10.0, 0, 0, 0]]).repeat(T, 1)                 # every token to expert 0
    value = load_balancing_loss(collapsed, torch.zeros(T, 1, dtype=torch.long), N).item()
    assert math.isclose(value, N * torch.softmax(collapsed[0], -1)[0].item(), rel_tol=1e-6) and value > 3.9
    two = torch.stack([torch.arange(T) % N, (torch.arange(T) + 1) % N], 1)   # k = 2, balanced: the f sum to 2
    assert math.isclose(load_balancing_loss(uniform, two, N).item(), 2.0, rel_tol=1e-6)


def test_quantize_int8_element_by_element():
    w = torch.randn(5, 7, generator=torch.Generator().manual_seed(3)) * torch.tensor([[0.1], [1], [10], [3], [0.5]])
    w[4] = 0.0  # a row of zeros
    q, scale = quantize_int8(w)
    assert q.dtype == torch.int8 and scale.shape == (5, 1) and scale.dtype == w.dtype
    for i in range(5):
        absmax = max(abs(x) for x in w[i].tolist())
        s = absmax / 127 if absmax else 1.0
        assert math.isclose(scale[i, 0].item(), s, rel_tol=1e-6)
        assert q[i].tolist() == [max(-127, min(127, round(x / s))) for x in w[i].tolist()]
    assert q.abs().amax(1)[:4].tolist() == [127] * 4
    err = (dequantize_int8(q, scale) - w).abs()
    assert bool((err <= scale / 2 + 1e-6).all())


def test_mla_is_attention_with_low_rank_key_and_value_projections():
    torch.manual_seed(6)
    mla = MultiHeadLatentAttention(16, 4, 6).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    out, cache = mla(x, causal)
    assert cache.shape == (2, 5, 6)
    split = lambda t: t.view(2, 5, 4, 4).transpose(1, 2)                    # noqa: E731 - (B, T, d) -> (B, H, T, d_k)
    q = split(x @ mla.W_q.weight.T)
    k = split(x @ (mla.W_uk.weight @ mla.W_dkv.weight).T)                    # W_k = W_uk W_dkv, rank <= d_latent
    v = split(x @ (mla.W_uv.weight @ mla.W_dkv.weight).T)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 16)
    torch.testing.assert_close(out, expected @ mla.W_o.weight.T)


def test_mla_cached_decoding_equals_the_whole_sequence():
    torch.manual_seed(7)
    mla = MultiHeadLatentAttention(12, 3, 4).double()
    x = torch.randn(1, 6, 12, dtype=torch.float64)
    full, _ = mla(x, torch.tril(torch.ones(6, 6, dtype=torch.bool)))
    first, cache = mla(x[:, :4], torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    rest, cache = mla(x[:, 4:], torch.ones(2, 6, dtype=torch.bool).tril(4), cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), full)
    assert cache.shape == (1, 6, 4)  # one latent a token: 4 numbers instead of 2 x 12 for K and V
