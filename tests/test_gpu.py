"""Devices (COURSE_DESIGN §10): training and generation on a GPU when there is one, the CPU otherwise.

``pick_device`` is tested everywhere with ``torch.cuda.is_available``/``torch.backends.mps.is_available``
monkeypatched. The rest runs once per device: on the CPU always (so the tests themselves are proven on every
machine), on CUDA and MPS where torch sees one, skipped with the reason otherwise. On a device: the reference
equals itself on the CPU, generation draws with a generator on the logits' device (cached == uncached), the
training loops move their CPU batches to the model's device, and the checks accept answers computed there.
"""
import os
import subprocess
import sys

import pytest
import torch

import solutions
from benchmarks import gpt_train as bench
from catalogue.reference import load
from solutions import (
    GPT,
    CharTokenizer,
    Transformer,
    beam_search,
    estimate_loss,
    generate,
    make_copy_batch,
    pick_device,
    sample_next_token,
    train_copy_model,
    train_gpt,
    transformer_step_fn,
)
from tools.paths import ROOT
from tutor.checks import run_check

HERE = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
DEVICES = [pytest.param(name, marks=pytest.mark.skipif(not here, reason=f"no {name} device on this machine "
                                                         f"(torch sees none): its tests run where there is one"))
           for name, here in HERE.items()]
# MPS has no float64: beam search's scores and the checks' cases are float64, so they stay on the CPU there
# (lesson 09 runs its beam searches on BEAM_DEVICE, the CPU instead of MPS).
FLOAT64_DEVICES = [param for param in DEVICES if param.values[0] != "mps"]


@pytest.fixture
def no_override(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    return monkeypatch


@pytest.mark.parametrize("cuda, mps, expected", [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"),
                                                 (False, False, "cpu")])
def test_pick_device_prefers_cuda_then_mps_then_cpu(no_override, cuda, mps, expected):
    no_override.setattr(torch.cuda, "is_available", lambda: cuda)
    no_override.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert pick_device() == torch.device(expected)


def test_course_device_overrides_the_choice(no_override):
    no_override.setattr(torch.cuda, "is_available", lambda: True)
    no_override.setenv("COURSE_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")  # how the build reproduces the CPU answer keys on a GPU machine
    no_override.setenv("COURSE_DEVICE", "cuda:1")
    assert pick_device() == torch.device("cuda:1")


@pytest.mark.parametrize("value", ["cuda", "mps", "gpu"])
def test_course_device_this_machine_lacks_is_one_bilingual_line(no_override, value):
    no_override.setattr(torch.cuda, "is_available", lambda: False)
    no_override.setattr(torch.backends.mps, "is_available", lambda: False)
    no_override.setenv("COURSE_DEVICE", value)
    with pytest.raises(ValueError) as err:
        pick_device()
    message = str(err.value)
    assert f"COURSE_DEVICE='{value}'" in message and "/ COURSE_DEVICE" in message and "it has: cpu" in message
    assert "\n" not in message


def test_benchmark_refuses_a_device_it_cannot_use_in_one_line():
    """`benchmarks/gpt_train.py --device X` for an X this machine lacks stops before training, with one line."""
    missing = next((name for name in ("cuda", "mps") if not HERE[name]), None)
    if missing is None:
        pytest.skip("this machine has both CUDA and MPS: no device to refuse")
    env = {k: v for k, v in os.environ.items() if k != "COURSE_DEVICE"}
    proc = subprocess.run([sys.executable, "benchmarks/gpt_train.py", "--device", missing], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"--device {missing}: ") and proc.stderr.count("\n") == 1, proc.stderr


def tiny_gpt(device):
    torch.manual_seed(0)
    return GPT(13, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=32).eval().to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_gpt_and_generation_on_the_device(device):
    """The same weights give the CPU's logits; generation draws with a generator on the logits' device, and the
    KV cache gives the uncached tokens there (greedy and sampled)."""
    model, on_cpu = tiny_gpt(device), tiny_gpt("cpu")
    idx = torch.randint(0, 13, (2, 5), generator=torch.Generator().manual_seed(1))  # (B, T)
    assert torch.allclose(model(idx.to(device)).cpu(), on_cpu(idx), atol=1e-4)
    prompt = idx[:, :3].to(device)  # (2, 3)
    for kwargs in ({}, {"temperature": 1.0, "top_k": 5}, {"temperature": 0.8, "top_p": 0.9}):
        runs = [generate(model, prompt, 10, generator=torch.Generator(device=device).manual_seed(3),
                         use_cache=cache, **kwargs) for cache in (False, True)]
        assert runs[0].device == prompt.device and runs[0].shape == (2, 13)
        assert torch.equal(runs[0], runs[1]), kwargs


@pytest.mark.parametrize("device", DEVICES)
def test_benchmark_samples_where_its_model_is(device):
    """benchmarks/gpt_train.py --device: the poems are sampled on the model's device, with a generator made there."""
    tokenizer = CharTokenizer("春风明月。，\n")
    torch.manual_seed(0)
    model = GPT(tokenizer.vocab_size, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=1,
                max_len=bench.MAX_POEM + len(bench.PROMPT)).eval().to(device)
    poems = bench.sample_poems(model, tokenizer, seed=0, n=3)
    assert len(poems) == 3 and poems == bench.sample_poems(model, tokenizer, seed=0, n=3)


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_draws_on_the_logits_device(device):
    logits = torch.randn(50, 7, generator=torch.Generator().manual_seed(2)).to(device)  # (B, V)
    draws = [sample_next_token(logits, 1.0, top_k=4, generator=torch.Generator(device=device).manual_seed(5))
             for _ in range(2)]
    assert draws[0].device == logits.device and torch.equal(draws[0], draws[1])
    allowed = torch.topk(logits, 4, dim=-1).indices  # (B, 4)
    assert (allowed == draws[0][:, None]).any(-1).all()
    if torch.device(device).type != "cpu":  # why the contract says where the generator lives
        with pytest.raises(RuntimeError, match="generator"):
            sample_next_token(logits, 1.0, generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("device", DEVICES)
def test_training_loops_move_their_batches_to_the_model(device):
    """train_gpt, estimate_loss and train_copy_model draw batches on the CPU (the same on every device) and
    train the model where it is."""
    data = torch.randint(0, 13, (400,), generator=torch.Generator().manual_seed(0))  # (N,)
    model = tiny_gpt(device)
    history = train_gpt(model, data, data, block_size=8, batch_size=4, max_steps=3, warmup=1, eval_every=3,
                        progress=False)
    assert all(p.device.type == torch.device(device).type for p in model.parameters())
    assert len(history["loss"]) == 3 and all(torch.isfinite(torch.tensor(history["loss"])))
    assert abs(estimate_loss(model, data, 8) - history["val_loss"]) < 1e-4
    torch.manual_seed(0)
    copy_model = Transformer(8, 8, d_model=16, num_heads=2, d_ff=32, num_layers=1, dropout=0.0).to(device)
    eval_src, _, eval_tgt = make_copy_batch(16, 8, 3, 3, torch.Generator().manual_seed(1))  # on the CPU
    result = train_copy_model(copy_model, vocab_size=8, min_len=1, max_len=3, eval_src=eval_src, eval_tgt=eval_tgt,
                              batch_size=8, max_steps=3, eval_every=3, progress=False)
    assert result["steps"] == 3 and 0.0 <= result["exact_match"] <= 1.0


@pytest.mark.parametrize("device", FLOAT64_DEVICES)
def test_encoder_decoder_decoding_and_beam_search_on_the_device(device):
    torch.manual_seed(0)
    model = Transformer(9, 9, d_model=16, num_heads=2, d_ff=32, num_layers=1, dropout=0.0).eval()
    src = torch.tensor([[3, 4, 5, 2, 0]])  # (1, T_s)
    on_cpu = model.greedy_decode(src, 1, 2, 6)
    model = model.to(device)
    assert torch.equal(model.greedy_decode(src.to(device), 1, 2, 6).cpu(), on_cpu)
    tokens, score = beam_search(transformer_step_fn(model, src.to(device)), torch.tensor([1], device=device), 3, 6, 2)
    cpu_tokens, cpu_score = beam_search(transformer_step_fn(model.cpu(), src), torch.tensor([1]), 3, 6, 2)
    assert tokens.device.type == torch.device(device).type
    assert torch.equal(tokens.cpu(), cpu_tokens) and abs(score - cpu_score) < 1e-4


FUNCTION_CHECKS = ["top_k_filter", "top_p_filter", "sampling_probs", "repeat_kv", "softmax_backward",
                   "batch_norm_forward", "batch_norm_backward", "mlp_backward", "cross_entropy",
                   "scaled_dot_product_attention", "copy_loss"]


@pytest.mark.parametrize("device", FLOAT64_DEVICES)
def test_checks_accept_answers_computed_on_the_device(device):
    """A right answer that moves its inputs to the device and returns tensors there passes its check."""
    reference = load()

    def on_device(fn):
        def answer(*args, **kwargs):
            move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v
            return fn(*map(move, args), **{k: move(v) for k, v in kwargs.items()})
        return answer

    for name in FUNCTION_CHECKS:
        assert name in solutions.__all__
        result = run_check(name, on_device(reference[name]))
        assert result.passed, f"{name} on {device}: {result.message}"
