"""The reference package equals PyTorch's own modules in float64, after copying weights by the
contract's attribute names. The largest difference per module is printed in the test summary."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions import (
    DecoderLayer,
    EncoderLayer,
    LayerNorm,
    MultiHeadAttention,
    RMSNorm,
    Transformer,
    attention_numpy,
    make_pad_mask,
    make_subsequent_mask,
    scaled_dot_product_attention,
)

pytestmark = pytest.mark.usefixtures("float64")


# ---------------------------------------------------------------- weight copying (contract names)
def copy_mha(ours, theirs):
    """Our ``W_q, W_k, W_v, W_o`` -> ``nn.MultiheadAttention``'s packed ``in_proj`` and ``out_proj``."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)


def copy_ln(ours, theirs):
    with torch.no_grad():
        theirs.weight.copy_(ours.weight)
        theirs.bias.copy_(ours.bias)


def copy_ffn(ours, theirs):
    with torch.no_grad():
        theirs.linear1.load_state_dict(ours.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.fc2.state_dict())


def randomize_norms(module):
    """Non-default LayerNorm weights, so a swapped or missing weight/bias cannot hide."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def nn_encoder_layer(ours, d_model, num_heads, d_ff):
    theirs = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                        batch_first=True, norm_first=False)
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_ffn(ours.ffn, theirs)
    copy_ln(ours.norm1.ln, theirs.norm1)
    copy_ln(ours.norm2.ln, theirs.norm2)
    return theirs


def nn_decoder_layer(ours, d_model, num_heads, d_ff):
    theirs = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                        batch_first=True, norm_first=False)
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_mha(ours.cross_attn, theirs.multihead_attn)
    copy_ffn(ours.ffn, theirs)
    copy_ln(ours.norm1.ln, theirs.norm1)
    copy_ln(ours.norm2.ln, theirs.norm2)
    copy_ln(ours.norm3.ln, theirs.norm3)
    return theirs


def tokens_with_padding(lengths, T, vocab, generator, pad_id=0):
    """LongTensor (B, T): random content ids >= 3, then ``pad_id`` after each row's length."""
    tokens = torch.randint(3, vocab, (len(lengths), T), generator=generator)
    for b, n in enumerate(lengths):
        tokens[b, n:] = pad_id
    return tokens


# ---------------------------------------------------------------- scaled dot-product attention
def sdpa_masks(B, H, T_q, T_k, g):
    """Masks of several shapes; every row keeps at least one key except the explicit fully-masked case."""
    pad = torch.ones(B, 1, 1, T_k, dtype=torch.bool)
    pad[0, ..., T_k - 2:] = False
    random = torch.rand(B, H, T_q, T_k, generator=g) > 0.4
    random[..., 0] = True
    fully_masked_row = torch.ones(B, H, T_q, T_k, dtype=torch.bool)
    fully_masked_row[0, 1, T_q - 1] = False
    return {
        "none": None,
        "pad (B,1,1,T_k)": pad,
        "random (B,H,T_q,T_k)": random,
        "2-D (T_q,T_k)": torch.rand(T_q, T_k, generator=g) > 0.5,  # may hide whole rows too
        "fully masked row": fully_masked_row,
    }


@pytest.mark.parametrize("T_q,T_k,d_k,d_v", [(5, 5, 8, 8), (4, 7, 8, 3), (1, 6, 4, 6)])
def test_sdpa_equals_torch(T_q, T_k, d_k, d_v, max_diff):
    g = torch.Generator().manual_seed(T_q * 100 + T_k)
    B, H = 2, 3
    Q = torch.randn(B, H, T_q, d_k, generator=g)
    K = torch.randn(B, H, T_k, d_k, generator=g)
    V = torch.randn(B, H, T_k, d_v, generator=g)
    for name, mask in sdpa_masks(B, H, T_q, T_k, g).items():
        out, attn = scaled_dot_product_attention(Q, K, V, mask)
        expected = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
        max_diff("scaled_dot_product_attention", out, expected)
        assert attn.shape == (B, H, T_q, T_k), name
        if mask is not None:
            assert not attn.masked_select(~mask.expand_as(attn)).any(), f"{name}: blocked key got weight"


def test_sdpa_causal_equals_torch_is_causal(max_diff):
    g = torch.Generator().manual_seed(1)
    Q, K, V = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))
    out, _ = scaled_dot_product_attention(Q, K, V, make_subsequent_mask(6))
    max_diff("scaled_dot_product_attention", out, F.scaled_dot_product_attention(Q, K, V, is_causal=True))


def test_sdpa_fully_masked_row_gives_zeros_and_finite_gradients():
    g = torch.Generator().manual_seed(2)
    Q = torch.randn(1, 2, 3, 4, generator=g, requires_grad=True)
    K = torch.randn(1, 2, 5, 4, generator=g, requires_grad=True)
    V = torch.randn(1, 2, 5, 4, generator=g, requires_grad=True)
    mask = torch.ones(1, 2, 3, 5, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of head 0 may attend to nothing
    out, attn = scaled_dot_product_attention(Q, K, V, mask)
    assert torch.equal(attn[0, 0, 1], torch.zeros(5))
    assert torch.equal(out[0, 0, 1], torch.zeros(4))
    assert torch.isfinite(out).all()
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    for name, t in (("Q", Q), ("K", K), ("V", V)):
        assert torch.isfinite(t.grad).all(), f"NaN/inf in d{name}"
    assert torch.equal(Q.grad[0, 0, 1], torch.zeros(4))


def test_sdpa_accepts_0_1_masks():
    g = torch.Generator().manual_seed(3)
    Q, K, V = (torch.randn(2, 4, 3, generator=g) for _ in range(3))
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 1]])
    out_int, attn_int = scaled_dot_product_attention(Q, K, V, mask)
    out_bool, attn_bool = scaled_dot_product_attention(Q, K, V, mask.bool())
    assert torch.equal(out_int, out_bool) and torch.equal(attn_int, attn_bool)


def test_numpy_attention_equals_torch_attention(max_diff):
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 6, 8)), rng.normal(size=(2, 3, 6, 5))
    mask = rng.random((2, 1, 4, 6)) > 0.5
    mask[0, 0, 1] = False  # a fully masked row
    for m in (None, mask):
        out_np, w_np = attention_numpy(Q, K, V, m)
        out_t, w_t = scaled_dot_product_attention(*(torch.from_numpy(a) for a in (Q, K, V)),
                                                  None if m is None else torch.from_numpy(m))
        max_diff("attention_numpy vs torch", torch.from_numpy(out_np), out_t)
        max_diff("attention_numpy vs torch", torch.from_numpy(w_np), w_t)


def test_seed_worked_example_three_2d_tokens():
    """Seed 004: x1=(1,0), x2=(0,1), x3=(1,1), Q=K=V=X. The seed prints 0.751 for the third
    output, the sum of its rounded weights (0.248 + 0.503); the exact value is 0.7518 -> 0.752."""
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out, weights = attention_numpy(X, X, X)
    # independent hand computation: scores = X X^T / sqrt(2), row-wise softmax
    s = X @ X.T / math.sqrt(2)
    hand = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights, hand, rtol=0, atol=1e-15)
    np.testing.assert_allclose(weights, [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401], [0.248, 0.248, 0.503]],
                               atol=5e-4)
    np.testing.assert_allclose(out, [[0.802, 0.599], [0.599, 0.802], [0.752, 0.752]], atol=5e-4)
    out_t, w_t = scaled_dot_product_attention(*(torch.from_numpy(X),) * 3)
    np.testing.assert_allclose(out_t.numpy(), out, atol=1e-15)
    np.testing.assert_allclose(w_t.numpy(), weights, atol=1e-15)


# ---------------------------------------------------------------- multi-head attention
@pytest.mark.parametrize("num_heads", [1, 4])
def test_mha_equals_nn_multihead_attention(num_heads, max_diff):
    torch.manual_seed(10 + num_heads)
    d_model, B, T_q, T_k = 16, 3, 5, 7
    ours = MultiHeadAttention(d_model, num_heads)
    theirs = nn.MultiheadAttention(d_model, num_heads, dropout=0.0, batch_first=True)
    copy_mha(ours, theirs)
    g = torch.Generator().manual_seed(num_heads)
    x = torch.randn(B, T_q, d_model, generator=g)
    mem = torch.randn(B, T_k, d_model, generator=g)
    pad_q = tokens_with_padding([5, 3, 4], T_q, 10, g)
    pad_k = tokens_with_padding([7, 2, 5], T_k, 10, g)
    combined = make_pad_mask(pad_q) & make_subsequent_mask(T_q)  # (B, 1, T_q, T_q)
    cases = {
        "self, no mask": (x, x, None, {}),
        "self, key padding": (x, x, make_pad_mask(pad_q), {"key_padding_mask": pad_q == 0}),
        "self, causal": (x, x, make_subsequent_mask(T_q), {"attn_mask": ~make_subsequent_mask(T_q)[0, 0]}),
        "self, causal & padding": (x, x, combined, {
            "attn_mask": (~combined).expand(B, num_heads, T_q, T_q).reshape(B * num_heads, T_q, T_q)}),
        "cross, no mask": (x, mem, None, {}),
        "cross, key padding": (x, mem, make_pad_mask(pad_k), {"key_padding_mask": pad_k == 0}),
    }
    for q_in, kv_in, mask, nn_kwargs in cases.values():
        q_in = q_in.clone().requires_grad_()
        kv_in = q_in if kv_in is x else kv_in.clone().requires_grad_()
        out, attn = ours(q_in, kv_in, mask)
        q2 = q_in.detach().clone().requires_grad_()
        kv2 = q2 if kv_in is q_in else kv_in.detach().clone().requires_grad_()
        ref_out, ref_attn = theirs(q2, kv2, kv2, need_weights=True, average_attn_weights=False, **nn_kwargs)
        max_diff("MultiHeadAttention vs nn.MultiheadAttention", out, ref_out)
        max_diff("MultiHeadAttention vs nn.MultiheadAttention", attn, ref_attn)
        grad = torch.randn(out.shape, generator=g)
        out.backward(grad)
        ref_out.backward(grad)
        max_diff("MultiHeadAttention grads", q_in.grad, q2.grad)
        if kv_in is not q_in:
            max_diff("MultiHeadAttention grads", kv_in.grad, kv2.grad)
        ours_w_grad = torch.cat([ours.W_q.weight.grad, ours.W_k.weight.grad, ours.W_v.weight.grad])
        max_diff("MultiHeadAttention grads", ours_w_grad, theirs.in_proj_weight.grad)
        max_diff("MultiHeadAttention grads", ours.W_o.weight.grad, theirs.out_proj.weight.grad)
        ours.zero_grad()
        theirs.zero_grad()


# ---------------------------------------------------------------- normalisation
def test_layernorm_equals_nn_layernorm(max_diff):
    torch.manual_seed(20)
    for eps in (1e-5, 1e-3):
        ours = LayerNorm(12, eps=eps)
        randomize_norms(ours)
        theirs = nn.LayerNorm(12, eps=eps)
        copy_ln(ours, theirs)
        for x in (torch.randn(3, 5, 12) * 4 + 2, torch.randn(2, 12) * 1e-3):  # small variance: eps placement
            x = x.requires_grad_()
            x2 = x.detach().clone().requires_grad_()
            y, y_ref = ours(x), theirs(x2)
            max_diff("LayerNorm vs nn.LayerNorm", y, y_ref)
            y.sum().backward()
            (y_ref.sum()).backward()
            max_diff("LayerNorm vs nn.LayerNorm grads", x.grad, x2.grad)


def test_rmsnorm_equals_nn_rmsnorm(max_diff):
    torch.manual_seed(21)
    ours = RMSNorm(12)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
    theirs = nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 12) * 3
    max_diff("RMSNorm vs nn.RMSNorm", ours(x), theirs(x))


# ---------------------------------------------------------------- encoder and decoder layers
def test_encoder_layer_equals_nn_transformer_encoder_layer(max_diff):
    torch.manual_seed(30)
    d_model, H, d_ff, B, T = 16, 4, 24, 3, 6
    ours = EncoderLayer(d_model, H, d_ff, dropout=0.0)
    randomize_norms(ours)
    theirs = nn_encoder_layer(ours, d_model, H, d_ff)  # both in train mode (no nn fast path), dropout 0
    g = torch.Generator().manual_seed(30)
    x = torch.randn(B, T, d_model, generator=g)
    src = tokens_with_padding([6, 4, 2], T, 10, g)
    for mask, kwargs in ((None, {}),
                         (make_pad_mask(src), {"src_key_padding_mask": src == 0}),
                         (make_subsequent_mask(T), {"src_mask": ~make_subsequent_mask(T)[0, 0]})):
        x1 = x.clone().requires_grad_()
        x2 = x.clone().requires_grad_()
        y, attn = ours(x1, mask)
        y_ref = theirs(x2, **kwargs)
        max_diff("EncoderLayer vs nn.TransformerEncoderLayer", y, y_ref)
        assert attn.shape == (B, H, T, T)
        grad = torch.randn(y.shape, generator=g)
        y.backward(grad)
        y_ref.backward(grad)
        max_diff("EncoderLayer grads", x1.grad, x2.grad)


def test_decoder_layer_equals_nn_transformer_decoder_layer(max_diff):
    torch.manual_seed(31)
    d_model, H, d_ff, B, T_t, T_s = 16, 4, 24, 3, 5, 7
    ours = DecoderLayer(d_model, H, d_ff, dropout=0.0)
    randomize_norms(ours)
    theirs = nn_decoder_layer(ours, d_model, H, d_ff)
    g = torch.Generator().manual_seed(31)
    y = torch.randn(B, T_t, d_model, generator=g)
    memory = torch.randn(B, T_s, d_model, generator=g)
    src = tokens_with_padding([7, 3, 5], T_s, 10, g)
    tgt = tokens_with_padding([5, 5, 2], T_t, 10, g)
    tgt_mask = make_pad_mask(tgt) & make_subsequent_mask(T_t)  # (B, 1, T_t, T_t)
    y1, m1 = y.clone().requires_grad_(), memory.clone().requires_grad_()
    y2, m2 = y.clone().requires_grad_(), memory.clone().requires_grad_()
    out, (self_w, cross_w) = ours(y1, m1, tgt_mask, make_pad_mask(src))
    ref = theirs(y2, m2, tgt_mask=~make_subsequent_mask(T_t)[0, 0], tgt_key_padding_mask=tgt == 0,
                 memory_key_padding_mask=src == 0)
    max_diff("DecoderLayer vs nn.TransformerDecoderLayer", out, ref)
    assert self_w.shape == (B, H, T_t, T_t) and cross_w.shape == (B, H, T_t, T_s)
    grad = torch.randn(out.shape, generator=g)
    out.backward(grad)
    ref.backward(grad)
    max_diff("DecoderLayer grads", y1.grad, y2.grad)
    max_diff("DecoderLayer grads", m1.grad, m2.grad)
    out_nomask, _ = ours(y, memory)
    max_diff("DecoderLayer vs nn.TransformerDecoderLayer", out_nomask, theirs(y, memory))


# ---------------------------------------------------------------- whole model
def independent_pe(T, d_model):
    pe = torch.zeros(T, d_model)
    for pos in range(T):
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def test_transformer_equals_composition_of_pytorch_layers(max_diff):
    """forward == embeddings * sqrt(d_model) + PE -> nn encoder/decoder layers (masks from pad_id)
    -> out_proj: checks the scale, the positions and which mask goes where."""
    torch.manual_seed(40)
    d_model, H, d_ff, N, V_s, V_t = 16, 4, 24, 2, 11, 13
    model = Transformer(V_s, V_t, d_model, H, d_ff, N, dropout=0.0, max_len=20)
    randomize_norms(model)
    enc = [nn_encoder_layer(layer, d_model, H, d_ff) for layer in model.encoder_layers]
    dec = [nn_decoder_layer(layer, d_model, H, d_ff) for layer in model.decoder_layers]
    g = torch.Generator().manual_seed(40)
    src = tokens_with_padding([7, 4, 6], 7, V_s, g)
    tgt = tokens_with_padding([5, 3, 5], 5, V_t, g)
    tgt[:, 0] = 1  # BOS

    logits = model(src, tgt)

    pe = independent_pe(7, d_model)
    x = model.src_embed.weight[src] * math.sqrt(d_model) + pe[:7]
    for layer in enc:
        x = layer(x, src_key_padding_mask=src == 0)
    y = model.tgt_embed.weight[tgt] * math.sqrt(d_model) + pe[:5]
    for layer in dec:
        y = layer(y, x, tgt_mask=~make_subsequent_mask(5)[0, 0], tgt_key_padding_mask=tgt == 0,
                  memory_key_padding_mask=src == 0)
    expected = F.linear(y, model.out_proj.weight, model.out_proj.bias)
    max_diff("Transformer vs nn encoder/decoder layers", logits, expected)
