"""The reference package honours the public contract (COURSE_DESIGN §4): signatures and attribute
names, formulas, parameter counts, masks, decoding, clear errors, bonus pieces, and the nbgrader
solution markers the build relies on."""
import ast
import builtins
import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn as nn

import contract
import solutions
from solutions import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    PositionalEncoding,
    PreLNResidual,
    ResidualLayerNorm,
    ScaledDotProductAttention,
    Transformer,
    apply_rope,
    greedy_decode_cached,
    make_pad_mask,
    make_subsequent_mask,
    rope_frequencies,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
    softmax,
)

# The contract's signatures, from the registry: callable -> its parameters as "name" or
# "name=default" ("*" before keyword-only ones), methods as "Class.method".
SIGNATURES = {**{c.name: c.signature for c in contract.COMPONENTS if c.kind != "constant"},
              **{f"{c.name}.{m}": sig for c in contract.COMPONENTS for m, sig in c.methods.items()}}


def _params(obj):
    params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
    shown, star = [], False
    for p in params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            shown.append("*")
            star = True
        shown.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}")
    return ", ".join(shown)


@pytest.mark.parametrize("qualname", sorted(SIGNATURES))
def test_signature_matches_contract(qualname):
    owner, _, method = qualname.partition(".")
    obj = getattr(solutions, owner)
    obj = getattr(obj, method) if method else obj
    assert _params(obj) == SIGNATURES[qualname]


def test_every_public_method_has_a_registered_signature():
    """A class's public methods are part of the contract: each must be in its registry entry."""
    for c in contract.COMPONENTS:
        obj = getattr(solutions, c.name)
        if inspect.isclass(obj):
            public = {m for m, f in vars(obj).items() if not m.startswith("_") and callable(f)}
            assert public == set(c.methods), f"{c.name}: methods {sorted(public)}, registry {sorted(c.methods)}"


def test_contract_attribute_names():
    mha = MultiHeadAttention(8, 2)
    assert [n for n, _ in mha.named_children()] == ["W_q", "W_k", "W_v", "W_o"]
    assert all(isinstance(m, nn.Linear) and m.weight.shape == (8, 8) for m in mha.children())
    assert set(dict(FeedForward(8, 16).named_children())) >= {"fc1", "fc2"}
    assert [n for n, _ in LayerNorm(8).named_parameters()] == ["weight", "bias"]
    assert isinstance(ResidualLayerNorm(8).ln, LayerNorm) and isinstance(PreLNResidual(8).ln, LayerNorm)
    enc, dec = EncoderLayer(8, 2, 16), DecoderLayer(8, 2, 16)
    assert set(dict(enc.named_children())) >= {"self_attn", "ffn", "norm1", "norm2"}
    assert set(dict(dec.named_children())) >= {"self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"}
    model = Transformer(5, 6, d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=10)
    assert isinstance(model.src_embed, nn.Embedding) and isinstance(model.tgt_embed, nn.Embedding)
    assert isinstance(model.pos_enc, PositionalEncoding)
    assert isinstance(model.encoder_layers, nn.ModuleList) and len(model.encoder_layers) == 2
    assert isinstance(model.decoder_layers, nn.ModuleList) and len(model.decoder_layers) == 2
    assert isinstance(model.out_proj, nn.Linear) and model.out_proj.weight.shape == (6, 8)
    # same state_dict keys => checks can copy weights with load_state_dict
    assert "pos_enc.pe" in model.state_dict()


# ---------------------------------------------------------------- softmax
def test_softmax_is_stable_and_normalised():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]])
    y = softmax(x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(y[0], softmax(np.array([0.0, 1.0, 2.0])), atol=1e-15)
    np.testing.assert_allclose(y[1], np.full(3, 1 / 3), atol=1e-15)
    np.testing.assert_allclose(softmax(x, axis=0).sum(axis=0), 1.0, atol=1e-15)


# ---------------------------------------------------------------- dropout on the weights
def test_sdpa_dropout_only_in_training():
    g = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(2, 6, 4, generator=g) for _ in range(3))
    out, attn = scaled_dot_product_attention(Q, K, V, dropout_p=0.5, training=False)
    ref_out, ref_attn = scaled_dot_product_attention(Q, K, V)
    assert torch.equal(out, ref_out)
    torch.manual_seed(0)
    out_t, attn_t = scaled_dot_product_attention(Q, K, V, dropout_p=0.5, training=True)
    kept = attn_t != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(attn_t[kept], ref_attn[kept] / 0.5)  # inverted dropout scaling
    torch.testing.assert_close(out_t, attn_t @ V)
    module = ScaledDotProductAttention(dropout=0.5)
    module.eval()
    assert torch.equal(module(Q, K, V)[0], ref_out)
    module.train()
    assert not torch.equal(module(Q, K, V)[0], ref_out)


# ---------------------------------------------------------------- positional encodings
@pytest.mark.parametrize("d_model", [8, 7, 1])
def test_sinusoidal_pe_matches_formula(d_model, float64):
    max_len = 12
    pe = sinusoidal_positional_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float64
    for pos in range(max_len):
        for i in range(d_model):
            freq_index = i // 2  # columns 2i and 2i+1 share the frequency 1 / 10000^(2i/d_model)
            angle = pos / 10000 ** (2 * freq_index / d_model)
            expected = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, i].item() - expected) < 1e-12, (pos, i)


def test_positional_encoding_module(float64):
    module = PositionalEncoding(6, max_len=10)
    assert module.pe.shape == (1, 10, 6)
    assert "pe" in dict(module.named_buffers()) and not list(module.parameters())
    torch.testing.assert_close(module.pe[0], sinusoidal_positional_encoding(10, 6))
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(module(x), x + module.pe[:, :4])
    assert module(torch.zeros(1, 10, 6)).shape == (1, 10, 6)  # T == max_len is fine


def test_learned_positional_embedding(float64):
    module = LearnedPositionalEmbedding(6, max_len=8)
    assert isinstance(module.embed, nn.Embedding) and module.embed.weight.shape == (8, 6)
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(module(x), x + module.embed.weight[:5])
    module(x).sum().backward()
    assert module.embed.weight.grad[:5].abs().sum() > 0 and module.embed.weight.grad[5:].abs().sum() == 0


def test_rope_matches_complex_rotation(float64):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 7, 8, generator=g)  # (B, H, T, d)
    out = apply_rope(x)
    assert out.shape == x.shape
    # independent: pair (2i, 2i+1) as the complex number x_2i + j x_2i+1, times exp(j * m * theta_i)
    theta = torch.tensor([10000.0 ** (-2 * i / 8) for i in range(4)])
    torch.testing.assert_close(rope_frequencies(8), theta)
    z = torch.complex(x[..., 0::2], x[..., 1::2])
    angles = torch.arange(7.0)[:, None] * theta
    rotated = z * torch.polar(torch.ones_like(angles), angles)
    expected = torch.stack((rotated.real, rotated.imag), dim=-1).flatten(-2)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])  # position 0 is not rotated


def test_rope_scores_depend_only_on_offset(float64):
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)

    def score(m, n):
        return (apply_rope(q[None], torch.tensor([m])) @ apply_rope(k[None], torch.tensor([n])).T).item()

    assert abs(score(3, 1) - score(10, 8)) < 1e-10
    assert abs(score(5, 5) - score(0, 0)) < 1e-10
    assert abs(score(3, 1) - score(1, 3)) > 1e-6


# ---------------------------------------------------------------- FFN, norms, residuals
def test_feedforward_gelu_equals_nn_sequential(float64):
    torch.manual_seed(7)
    ffn = FeedForward(6, 10, activation="gelu")
    ref = nn.Sequential(nn.Linear(6, 10), nn.GELU(), nn.Linear(10, 6))
    ref[0].load_state_dict(ffn.fc1.state_dict())
    ref[2].load_state_dict(ffn.fc2.state_dict())
    x = torch.randn(2, 3, 6)
    torch.testing.assert_close(ffn(x), ref(x), rtol=0, atol=1e-12)
    ref[1] = nn.ReLU()
    relu_ffn = FeedForward(6, 10)
    relu_ffn.load_state_dict(ffn.state_dict())
    torch.testing.assert_close(relu_ffn(x), ref(x), rtol=0, atol=1e-12)


def test_residual_connections(float64):
    torch.manual_seed(8)
    x, s = torch.randn(2, 3, 6), torch.randn(2, 3, 6)
    post = ResidualLayerNorm(6)
    torch.testing.assert_close(post(x, s), nn.functional.layer_norm(x + s, (6,)))
    pre = PreLNResidual(6)
    torch.testing.assert_close(pre(x, torch.tanh), x + torch.tanh(nn.functional.layer_norm(x, (6,))))


# ---------------------------------------------------------------- parameter counts
@pytest.mark.parametrize("d,H,d_ff", [(16, 4, 24), (32, 8, 128)])
def test_parameter_counts_match_formulas(d, H, d_ff):
    def count(module):
        return sum(p.numel() for p in module.parameters())

    mha, ffn, ln = 4 * d * d + 4 * d, 2 * d * d_ff + d_ff + d, 2 * d
    assert count(MultiHeadAttention(d, H)) == mha
    assert count(FeedForward(d, d_ff)) == ffn
    assert count(LayerNorm(d)) == ln
    assert count(EncoderLayer(d, H, d_ff)) == mha + ffn + 2 * ln
    assert count(DecoderLayer(d, H, d_ff)) == 2 * mha + ffn + 3 * ln
    V_s, V_t, N = 11, 13, 3
    expected = V_s * d + V_t * d + N * (mha + ffn + 2 * ln) + N * (2 * mha + ffn + 3 * ln) + d * V_t + V_t
    assert count(Transformer(V_s, V_t, d, H, d_ff, N)) == expected


# ---------------------------------------------------------------- masks
def test_pad_mask_shape_and_convention():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    mask = make_pad_mask(tokens)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, True, True, False]]
    assert make_pad_mask(torch.tensor([[3, 1, 3]]), pad_id=3)[0, 0, 0].tolist() == [False, True, False]


def test_subsequent_mask_shape_and_convention():
    mask = make_subsequent_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (1, 1, 4, 4)
    assert torch.equal(mask[0, 0], torch.tensor([[i >= j for j in range(4)] for i in range(4)]))
    combined = make_pad_mask(torch.tensor([[4, 5, 0]])) & make_subsequent_mask(3)
    assert combined.shape == (1, 1, 3, 3)
    assert combined[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_transformer_masks_padding_and_future(float64):
    """Extra padding on the source changes no logit; a later target token changes no earlier logit."""
    torch.manual_seed(9)
    model = Transformer(10, 10, d_model=16, num_heads=4, d_ff=24, num_layers=2, dropout=0.0, max_len=12).eval()
    src = torch.tensor([[4, 5, 6, 0], [7, 8, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 0]])
    logits = model(src, tgt)
    more_padding = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(more_padding, tgt), logits, rtol=0, atol=1e-12)
    changed = tgt.clone()
    changed[:, 2] = 9
    out = model(src, changed)
    torch.testing.assert_close(out[:, :2], logits[:, :2], rtol=0, atol=1e-12)
    assert (out[:, 2:] - logits[:, 2:]).abs().max() > 1e-6
    assert torch.isfinite(logits).all()


# ---------------------------------------------------------------- greedy decoding
class ScriptedTransformer(Transformer):
    """A Transformer whose next token is read from a script: decode() hands the position and the
    row index to out_proj, which looks the token up. Tests greedy_decode's loop, not the network."""

    def __init__(self, script):
        super().__init__(8, 10, d_model=4, num_heads=1, d_ff=4, num_layers=1, max_len=16)
        self.script = torch.tensor(script)

        class Lookup(nn.Module):
            def forward(lookup_self, h):  # h (B, d_model): [position, row, 0, 0]
                tokens = self.script[h[:, 1].long(), h[:, 0].long()]
                return nn.functional.one_hot(tokens, 10).to(h.dtype)

        self.out_proj = Lookup()

    def decode(self, tgt_in, memory, src_mask=None):
        B, T = tgt_in.shape
        h = torch.zeros(B, T, 4)
        h[:, :, 0] = torch.arange(T)
        h[:, :, 1] = torch.arange(B)[:, None]
        return h


def test_greedy_decode_stops_when_every_row_has_emitted_eos():
    model = ScriptedTransformer([[5, 2, 7, 7, 7, 7, 7, 7], [6, 6, 6, 2, 9, 9, 9, 9], [2, 4, 4, 4, 4, 4, 4, 4]])
    src = torch.tensor([[3, 4], [5, 0], [6, 7]])
    out = model.greedy_decode(src, bos_id=1, eos_id=2, max_new_tokens=8)
    assert out.dtype == torch.long
    assert out.tolist() == [[1, 5, 2, 0, 0], [1, 6, 6, 6, 2], [1, 2, 0, 0, 0]]


def test_greedy_decode_respects_max_new_tokens():
    model = ScriptedTransformer([[5, 2, 7, 7, 7, 7, 7, 7], [6, 6, 6, 2, 9, 9, 9, 9]])
    out = model.greedy_decode(torch.tensor([[3], [4]]), bos_id=1, eos_id=2, max_new_tokens=2)
    assert out.tolist() == [[1, 5, 2], [1, 6, 6]]
    assert model.greedy_decode(torch.tensor([[3], [4]]), 1, 2, 0).tolist() == [[1], [1]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kv_cache_decode_equals_greedy_decode(seed, float64):
    torch.manual_seed(seed)
    model = Transformer(12, 12, d_model=16, num_heads=4, d_ff=32, num_layers=2, dropout=0.1, max_len=20).eval()
    with torch.no_grad():
        model.out_proj.bias[2] += 0.5 * seed  # EOS more likely: rows stop at different steps
        model.out_proj.bias[0] += 1.0  # PAD emitted by unfinished rows: the cache must hide it as a key
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 12, (5, 6), generator=g)
    src[1, 4:] = 0
    src[3, 2:] = 0
    plain = model.greedy_decode(src, 1, 2, 15)
    cached = greedy_decode_cached(model, src, 1, 2, 15)
    assert torch.equal(cached, plain)


# ---------------------------------------------------------------- clear errors
@pytest.mark.parametrize("make_error, words", [
    (lambda: MultiHeadAttention(10, 3), "divisible"),
    (lambda: MultiHeadAttention(8, 2)(torch.randn(4, 8), torch.randn(4, 8)), "3-D"),
    (lambda: PositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8)), "max_len"),
    (lambda: PositionalEncoding(8)(torch.randn(5, 8)), "3-D"),
    (lambda: LearnedPositionalEmbedding(8, max_len=4)(torch.randn(1, 5, 8)), "max_len"),
    (lambda: FeedForward(8, 16, activation="tanh"), "unknown activation"),
    (lambda: scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4),
                                          torch.ones(2, 1, 5, 5, dtype=torch.bool)), "broadcastable"),
    (lambda: scaled_dot_product_attention(torch.randn(4), torch.randn(4), torch.randn(4)), "2 dims"),
    (lambda: LayerNorm(8)(torch.randn(2, 6)), "d_model=8"),
    (lambda: make_pad_mask(torch.tensor([1, 2, 0])), "2-D"),
    (lambda: Transformer(5, 5, 8, 2, 16, 1).encode(torch.tensor([1, 2])), "2-D"),
    (lambda: Transformer(5, 5, 8, 2, 16, 1, max_len=4).eval().greedy_decode(torch.tensor([[3]]), 1, 2, 6),
     "max_len"),
    (lambda: rope_frequencies(7), "even"),
    (lambda: apply_rope(torch.randn(2, 3, 5)), "even"),
])
def test_clear_errors(make_error, words):
    with pytest.raises(ValueError, match=words):
        make_error()


# ---------------------------------------------------------------- nbgrader solution markers
ALLOWED_GLOBALS = {"math", "np", "torch", "nn", "F"} | set(dir(builtins))


def _names_loaded_but_not_bound(tree):
    bound, loaded = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return loaded - bound


@pytest.mark.parametrize("chapter,name", [(c.chapter, c.name) for c in contract.COMPONENTS if c.exercise])
def test_object_is_self_contained_and_marked(chapter, name):
    source = inspect.getsource(getattr(solutions, name))
    earlier = {c.name for c in contract.COMPONENTS if c.chapter <= chapter}
    free = _names_loaded_but_not_bound(ast.parse(source)) - ALLOWED_GLOBALS - earlier
    assert not free, f"{name} uses names a notebook cell would not have: {sorted(free)}"

    lines = [line.strip() for line in source.splitlines()]
    markers = [line for line in lines if line in ("### BEGIN SOLUTION", "### END SOLUTION")]
    assert markers and markers == ["### BEGIN SOLUTION", "### END SOLUTION"] * (len(markers) // 2)
    assert lines.index("### BEGIN SOLUTION") > max(i for i, line in enumerate(lines) if line.endswith('"""'))
    tree = ast.parse(source).body[0]
    assert ast.get_docstring(tree), f"{name} has no docstring"
    if isinstance(tree, ast.ClassDef):
        # every method the learner writes has one solution region; a method that only returns a call
        # (GPT.forward, Transformer.greedy_decode) is given, not written
        assert "__init__" in vars(getattr(solutions, name)), f"{name} defines no __init__"
        for method in tree.body:
            if not isinstance(method, ast.FunctionDef):
                continue
            body = method.body[1:] if ast.get_docstring(method) else method.body
            delegates = len(body) == 1 and isinstance(body[0], ast.Return)
            regions = ast.get_source_segment(source, method).count("### BEGIN SOLUTION")
            assert regions == 1 or (delegates and method.name != "__init__"), \
                f"{name}.{method.name}: {regions} solution regions"
