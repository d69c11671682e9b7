"""Proof of the checks library (tutor.checks, tutor.mistakes, tutor.guard, tutor.grading).

- every wrong implementation in catalogue/wrong_*.py fails its check with the expected diagnosis;
- every right alternative in catalogue/right_*.py passes;
- every real-world-style implementation in catalogue/realworld.py, and every real public one in
  catalogue/realworld_llm.py, fails with every real difference named (two or more mistakes at
  once, in the part of a composite where they sit);
- the reference's own source, defined outside ``solutions``, passes every check;
- the from-scratch guard refuses built-ins and the reference package;
- grade() and report() behave as the notebooks need.
"""
import inspect
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import catalogue
from catalogue import realworld
from catalogue.reference import load
from pipeline_helpers import OVERFLOWS_ON_PURPOSE
from tools.paths import ANSWER_KEYS, ROOT
from tutor import mistakes
from tutor.checks import CHECKS, MORE, NOT_IMPLEMENTED, run_check
from tutor.engine import diagnosis, running
from tutor.engine.messages import say
from tutor.engine.report import case_numbers
from tutor.grading import grade, report

WRONG = catalogue.cases("wrong")
RIGHT = catalogue.cases("right") + catalogue.realworld_entries("RIGHT")
REALWORLD = catalogue.realworld_entries("CASES")
REFERENCE = load()
pytestmark = OVERFLOWS_ON_PURPOSE



def _label(case):
    return f"{case[0]}-{getattr(case[1], '__name__', case[1])}"


@pytest.mark.parametrize("check, obj, diagnosis", WRONG, ids=[_label(c) for c in WRONG])
def test_wrong_implementation_fails_with_its_diagnosis(check, obj, diagnosis):
    result = run_check(check, obj)
    assert not result.passed, result.message
    assert result.diagnosis == diagnosis, result.message
    assert result.case is not None
    if diagnosis is not None:
        assert f"[{diagnosis}]" in result.message and " / " in result.message
    assert "e+308" not in result.message, "-inf is shown as -inf"


@pytest.mark.parametrize("check, obj, ids, where", REALWORLD, ids=[_label(c) for c in REALWORLD])
def test_realworld_implementation_fails_with_every_difference_named(check, obj, ids, where):
    result = run_check(check, obj)
    assert not result.passed, result.message
    assert set(result.diagnoses) == ids, result.message
    assert "e+308" not in result.message
    assert result.diagnosis == result.diagnoses[0]
    for mid in ids:
        assert mistakes.explain(mid) in result.message
    if where is not None:  # the part is named on a "where" line
        where_line = rf"定位 / where: 你的 {check} 的 (\S+, )*{re.escape(where)}[,（ ]"
        assert re.search(where_line, result.message), result.message


def test_minus_inf_is_shown_as_minus_inf():
    def top_k_fill_zero(logits, k):
        return logits.masked_fill(logits < torch.topk(logits, k, -1).values[..., -1:], 0.0)

    message = run_check("top_k_filter", top_k_fill_zero).message
    assert "expected -inf, got 0" in message and "tolerance inf" in message and "e+308" not in message


def test_a_case_two_mistakes_explain_alike_names_neither():
    """sampling_probs' last case (top_k=2, top_p=0.6) gives the same probabilities without top-p and with
    the filters swapped: where no one mistake explains every case, that case is told what differs, not a
    guess between the two."""
    sampling_probs = REFERENCE["sampling_probs"]

    def two_slips(logits, temperature=1.0, top_k=None, top_p=None):
        probs = sampling_probs(logits, temperature, top_k, None if top_k == 2 else top_p)
        return probs.roll(1, -1) if top_k is None and top_p is None else probs  # no known mistake there

    result = run_check("sampling_probs", two_slips)
    assert not result.passed and result.diagnoses == (), result.message


def test_a_crash_on_a_listed_shape_says_the_contract_requires_it():
    def top_k_2d(logits, k):
        B, V = logits.shape  # written for (B, V) only
        return logits.masked_fill(logits < torch.topk(logits, k, -1).values[:, -1:], float("-inf"))

    message = run_check("top_k_filter", top_k_2d).message
    assert "the contract requires these inputs to work: logits (2, 2, 7)" in message


def test_missing_gradients_say_the_output_has_no_graph():
    from catalogue.wrong_realcode import FFNInferenceMode

    class TransformerInferenceMode(REFERENCE["Transformer"]):  # a composite: its parts are right alone
        @torch.inference_mode()
        def forward(self, src, tgt_in):
            return super().forward(src, tgt_in)

    for check, obj in (("FeedForward", FFNInferenceMode), ("Transformer", TransformerInferenceMode)):
        result = run_check(check, obj)
        assert result.diagnoses == ("no_autograd_graph",), result.message
        assert "the output has no autograd graph (no_grad / inference_mode)" in result.message


def test_a_recomputing_cache_is_told_what_was_measured():
    from catalogue.wrong_realcode import generate_recomputes, greedy_cached_calls_plain

    generate = run_check("generate", generate_recomputes).message
    assert "tokens fed per model call 3, 4, 5, 6, 7, 8" in generate and "with the cache: 3, 1, 1, 1, 1, 1" in generate
    greedy = run_check("greedy_decode_cached", greedy_cached_calls_plain)
    assert greedy.diagnoses == ("kv_cache_recomputes", "cross_kv_recomputed"), greedy.message
    assert "every output is right, but the cost breaks the contract" in greedy.message


def test_two_mistakes_each_named_only_on_the_cases_where_they_show():
    """The issue's case: no 1/sqrt(d_k) plus a bool-only mask. The first failing case has no mask,
    so it must be explained by the scale; the integer-mask error belongs to the integer-mask case."""
    result = run_check("scaled_dot_product_attention", realworld.sdpa_int_mask_unscaled)
    assert result.case.startswith("无掩码") and result.diagnosis == "no_scale", result.message
    lines = result.message.splitlines()
    assert next(line for line in lines if "[mask_not_bool]" in line).endswith(f"（{case_numbers([4])}）")
    assert next(line for line in lines if "[no_scale]" in line).endswith(f"（{case_numbers([0, 1, 2, 3])}）")
    assert lines[-2].strip() == MORE and "max error" in lines[-1]  # the diagnosis lines, then the numbers


def test_softmax_ignoring_axis_is_not_told_to_use_the_last_axis():
    result = run_check("softmax", realworld.softmax_textbook)
    assert "normalise over the last axis" not in result.message
    assert "ignores its axis argument" in result.message


def test_shared_and_eps_findings_say_where_and_what():
    eps = run_check("EncoderLayer", realworld.EncoderLayerBertEps).message
    assert "eps = 1e-12, the contract says 1e-05" in eps and "your EncoderLayer's norm1.ln, norm2.ln (LayerNorm)" in eps
    shared = run_check("Transformer", realworld.TransformerListTimesN).message
    assert "encoder_layers.0, encoder_layers.1 (EncoderLayer)" in shared
    assert "decoder_layers.0, decoder_layers.1" in shared


def test_tied_weights_are_named_only_where_the_contract_keeps_them_apart():
    GPT = REFERENCE["GPT"]

    class AlwaysTied(GPT):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "tie_weights": True})

    class WrongOnlyWhenTied(GPT):  # tie_weights=True is the contract there: the tying is not the mistake
        def forward(self, idx):
            return super().forward(idx) * (2 if idx.size(0) == 1 else 1)

    assert run_check("GPT", AlwaysTied).diagnoses == ("weights_tied",)
    result = run_check("GPT", WrongOnlyWhenTied)
    assert not result.passed and "tie_weights=True" in result.case and "weights_tied" not in result.diagnoses


def test_a_module_the_diagnosis_cannot_take_apart_keeps_the_plain_report():
    class Opaque(REFERENCE["EncoderLayer"]):
        def get_submodule(self, target):
            raise RuntimeError("not today")

        def forward(self, x, src_mask=None):
            a, attn = self.self_attn(x, x, src_mask)
            return self.norm2(self.norm1(x, a), a), attn

    result = run_check("EncoderLayer", Opaque)
    assert not result.passed and result.diagnoses == () and "max error" in result.message


@pytest.mark.parametrize("check, obj", RIGHT, ids=[_label(c) for c in RIGHT])
def test_right_alternative_passes(check, obj):
    result = run_check(check, obj)
    assert result.passed, result.message
    assert result.diagnosis is None


@pytest.mark.parametrize("check", list(CHECKS))
def test_reference_source_outside_solutions_passes(check, record_property):
    obj = REFERENCE[check]
    start = time.perf_counter()
    result = run_check(check, obj)
    record_property("seconds", round(time.perf_counter() - start, 4))
    assert result.passed, result.message


def _nameable(check):
    """Every mistake id the variants of ``check`` name on its own cases (with the reference's modules)."""
    declared = CHECKS[check]
    if declared.variants is None:
        return set()
    ids = set()
    with running.sandbox():
        for case in declared.cases():
            if hasattr(declared, "make_args"):
                args, kwargs = declared.make_args(case)
                ref = running.reference_module(check, *args, **kwargs)
            else:
                ref = declared.ref_for(case) if declared.ref_for else None
            ids |= {mid for variant in declared.variants(ref, case) for mid in variant.ids}
    return ids


@pytest.mark.parametrize("check", [name for name, c in CHECKS.items() if getattr(c, "variants", None)])
def test_every_mistake_a_check_can_name_is_explained(check):
    nameable = _nameable(check)
    assert nameable and nameable <= set(mistakes.MISTAKES), nameable - set(mistakes.MISTAKES)


def test_every_mistake_is_explained_bilingually():
    assert {mid for _, mid in diagnosis.EXCEPTIONS} <= set(mistakes.MISTAKES)
    for zh, en in mistakes.MISTAKES.values():
        assert zh and en and zh != en
    zh, en = mistakes.MISTAKES["no_scale"]
    assert mistakes.explain("no_scale") == say("diagnosis", id="no_scale", zh=zh, en=en)


@pytest.mark.parametrize("check", list(CHECKS))
def test_stub_is_reported_not_implemented(check):
    ref = REFERENCE[check]
    if inspect.isclass(ref):
        class Stub(nn.Module):
            def __init__(self, *args, **kwargs):
                super().__init__()
                raise NotImplementedError("写你的代码 / write your code")
        stub = Stub
    else:
        def stub(*args, **kwargs):
            raise NotImplementedError("写你的代码 / write your code")
    result = run_check(check, stub)
    assert not result.passed and result.not_implemented and result.message.endswith(NOT_IMPLEMENTED)


# ---------------------------------------------------------------- from scratch

sdpa_alias = F.scaled_dot_product_attention  # bound to another name before any check runs


def sdpa_calls_builtin(Q, K, V, mask=None, dropout_p=0.0, training=False):
    out = sdpa_alias(Q, K, V, attn_mask=None if mask is None else mask.bool())
    return out, torch.softmax(Q @ K.transpose(-2, -1), -1)


def sdpa_swallows_the_refusal(Q, K, V, mask=None, dropout_p=0.0, training=False):
    try:
        F.scaled_dot_product_attention(Q, K, V)
    except Exception:
        pass
    return REFERENCE["scaled_dot_product_attention"](Q, K, V, mask)


class LayerNormBuiltin(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class MHABuiltin(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, num_heads, batch_first=True)


def clip_calls_builtin(parameters, max_norm):
    return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm).item()


class AdamWBuiltin(torch.optim.AdamW):
    """An Optimizer, as the contract asks, that is PyTorch's own."""


@pytest.mark.parametrize("check, obj, builtin", [
    ("clip_grad_norm", clip_calls_builtin, "torch.nn.utils.clip_grad_norm_"),
    ("AdamW", AdamWBuiltin, "torch.optim."),
    ("scaled_dot_product_attention", sdpa_calls_builtin, "F.scaled_dot_product_attention"),
    ("scaled_dot_product_attention", sdpa_swallows_the_refusal, "F.scaled_dot_product_attention"),
    ("LayerNorm", LayerNormBuiltin, "F.layer_norm"),
    ("MultiHeadAttention", MHABuiltin, "nn.MultiheadAttention"),
])
def test_builtins_are_refused(check, obj, builtin):
    result = run_check(check, obj)
    assert not result.passed
    assert f"built-in {builtin}" in result.message and "从零实现" in result.message


def test_reference_package_is_refused():
    import solutions

    class Subclass(solutions.MultiHeadAttention):
        pass

    def wrapper(Q, K, V, mask=None, dropout_p=0.0, training=False):
        return solutions.scaled_dot_product_attention(Q, K, V, mask)

    for check, obj in [("MultiHeadAttention", solutions.MultiHeadAttention), ("MultiHeadAttention", Subclass),
                       ("scaled_dot_product_attention", wrapper), ("LayerNorm", solutions.LayerNorm)]:
        result = run_check(check, obj)
        assert not result.passed and "solutions" in result.message, (check, obj, result.message)


def test_own_code_passes_with_the_working_directory_inside_solutions(monkeypatch):
    """The answer keys run in answer_keys/: code objects named "<frozen abc>" or
    "<string>" are not files there, so they must not count as reference code."""
    monkeypatch.chdir(ANSWER_KEYS)
    for check in ("MultiHeadAttention", "scaled_dot_product_attention", "FeedForward"):
        result = run_check(check, REFERENCE[check])
        assert result.passed, result.message


# ---------------------------------------------------------------- messages

def test_missing_contract_keys_are_named():
    class FusedStorage(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0):
            super().__init__()
            self.W_qkv = nn.Linear(d_model, 3 * d_model)
            self.W_o = nn.Linear(d_model, d_model)

    result = run_check("MultiHeadAttention", FusedStorage)
    assert not result.passed
    assert "W_q.weight" in result.message and "W_qkv.weight" in result.message


def test_shape_mismatch_says_expected_and_got():
    def pad_mask_2d(tokens, pad_id=0):
        return tokens != pad_id

    result = run_check("make_pad_mask", pad_mask_2d)
    assert say("wrong_shape", key="mask", expected=(2, 1, 1, 6), got=(2, 6)) in result.message, result.message


def test_failure_message_names_case_shapes_error_and_index():
    result = run_check("scaled_dot_product_attention", REFERENCE_WRONG_NO_SCALE)
    first, second, third = result.message.splitlines()
    assert "case 1/5" in first and "Q (2, 2, 3, 8)" in first
    assert "[no_scale]" in second  # the diagnosis first, then the numbers
    assert "max error" in third and " at (" in third


def REFERENCE_WRONG_NO_SCALE(Q, K, V, mask=None, dropout_p=0.0, training=False):
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), -1e30)
    attn = scores.softmax(-1)
    if mask is not None:
        attn = attn.masked_fill(~mask.bool(), 0.0)
    return attn @ V, attn


def test_the_element_shown_breaks_the_tolerance_and_its_digits_differ():
    """Largest absolute error inside the tolerance (a big value), the element that breaks it elsewhere."""
    from tutor.engine.compare import compare
    expected = torch.tensor([1000.0, 0.001], dtype=torch.float64)
    got = torch.tensor([1000.009, 0.0012], dtype=torch.float64)  # 0.009 < 1e-6 + 1e-5 * 1000; 2e-4 breaks it
    reason = compare("y", expected, got)
    assert " at (1,)" in reason and "expected 0.001, got 0.0012" in reason, reason
    close = compare("y", torch.tensor([0.1, 3.0]).double(), torch.tensor([0.1, 3.0000401]).double())
    assert "expected 3, got 3.00004" in close, close  # digits enough to see them differ


def test_mistake_texts_are_plain():
    from tutor.engine.messages import MARKDOWN, MISTAKES, define_mistakes
    assert not [mid for mid, (zh, en) in MISTAKES.items() if MARKDOWN.search(zh + en)]
    for bad in ("用 `x`", "**全局**范数"):
        with pytest.raises(ValueError, match="plain text"):
            define_mistakes({"made_up_for_the_test": (bad, "plain English")})
    assert MARKDOWN.search("sum(g ** 2) / n ** alpha") is None  # Python's power operator is plain text


def test_check_restores_rng_and_default_dtype():
    torch.manual_seed(123)
    np.random.seed(123)
    expected = torch.rand(3), np.random.rand(3)
    torch.manual_seed(123)
    np.random.seed(123)
    run_check("MultiHeadAttention", REFERENCE["MultiHeadAttention"])
    assert torch.equal(torch.rand(3), expected[0]) and np.array_equal(np.random.rand(3), expected[1])
    assert torch.get_default_dtype() == torch.float32


# ---------------------------------------------------------------- grade / report

def test_grade_prints_one_line_and_nothing_on_stderr(capsys):
    def noisy_layer_norm_forward(self, x):
        print("debug print from the learner")
        sys.stderr.write("learner stderr\n")
        return REFERENCE["LayerNorm"].forward(self, x)

    Noisy = type("LayerNorm", (REFERENCE["LayerNorm"],), {"forward": noisy_layer_norm_forward})
    grade("LayerNorm", Noisy)
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("✅ LayerNorm") and out.count("\n") == 1


def test_grade_raises_the_bilingual_message():
    with pytest.raises(AssertionError, match=r"\[no_scale\].* / "):
        grade("scaled_dot_product_attention", REFERENCE_WRONG_NO_SCALE)


def test_grade_refuses_tampered_comparison(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *args, **kwargs: True)
    with pytest.raises(AssertionError, match="torch.allclose"):
        grade("LayerNorm", REFERENCE["LayerNorm"])


def test_grading_module_is_read_only():
    import tutor.grading

    with pytest.raises(AttributeError):
        tutor.grading.grade = lambda *args: None


def test_report_never_raises(capsys):
    assert report("scaled_dot_product_attention", REFERENCE_WRONG_NO_SCALE).diagnosis == "no_scale"
    assert report("no_such_check", len) is None
    out = capsys.readouterr().out
    assert out.startswith("❌ scaled_dot_product_attention") and "[no_scale]" in out
    assert "❌ no_such_check" in out


STUDENT_IMAGE = r"""
import sys
# Only what the image copies: no editable install of the repository, no reference package.
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]


class NoReference:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "solutions":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, NoReference())
import torch
import tutor
from tutor.grading import report

assert tutor.__file__.startswith(sys.argv[1]), tutor.__file__


class RMSNorm(torch.nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


report("RMSNorm", RMSNorm)
"""


def test_report_in_the_documented_student_image(tmp_path):
    """docs/INSTRUCTOR.md's student image (its Dockerfile's COPY lines, without solutions/): the
    release notebooks' setup import works and a bonus self-check says calmly that it cannot run."""
    doc = (ROOT / "docs" / "INSTRUCTOR.md").read_text(encoding="utf-8")
    copied = re.findall(r"^\s*COPY (\w+)/ /opt/shousi/\1/$", doc, re.MULTILINE)
    assert "tutor" in copied and "solutions" not in copied, copied
    for package in copied:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-c", STUDENT_IMAGE, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path), "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, f"the student image of docs/INSTRUCTOR.md cannot run a setup cell:\n{proc.stderr}"
    assert proc.stdout.startswith("⚠️ RMSNorm:") and "grading is not affected" in proc.stdout, proc.stdout


def test_report_says_not_implemented(capsys):
    def softmax(x, axis=-1):
        raise NotImplementedError()

    report("softmax", softmax)
    assert capsys.readouterr().out.strip() == f"❌ softmax: {NOT_IMPLEMENTED}"


def test_importing_tutor_does_not_import_solutions():
    code = ("import sys, torch, numpy, tutor, tutor.grading, tutor.checks, tutor.plots\n"
            "assert 'solutions' not in sys.modules, 'solutions imported'\n"
            "assert tutor.integrity._snapshot")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_engine_names_no_component_and_no_topic_mistake():
    """tutor/engine/ is generic: no check name and no mistake a topic declares appears in its code (its
    docstrings may give examples); what one component needs is declared by its topic module."""
    import ast

    import contract

    topic_mistakes = set(mistakes.MISTAKES) - set(diagnosis.MISTAKES)
    for path in sorted((ROOT / "tutor" / "engine").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
        words = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and id(node) not in docstrings}
        words |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        named = sorted(words & (set(contract.CHECK_NAMES) | topic_mistakes))
        assert not named, f"{path.name} names {named}: declare it in the topic module instead"


def test_minor_entries_are_listed_in_docs():
    """docs/MAINTAINING.md lists every wrong entry whose check need not name it (diagnosis None), and only those."""
    text = (ROOT / "docs" / "MAINTAINING.md").read_text(encoding="utf-8")
    table = text.split("<!-- minor entries: begin -->")[1].split("<!-- minor entries: end -->")[0]
    listed = {tuple(cell.strip().strip("`") for cell in row.split("|")[1:3])
              for row in table.strip().splitlines()[2:]}
    minor = {(check, f"{obj.__module__.removeprefix('catalogue.')}.{obj.__name__}")
             for check, obj, diagnosis in WRONG if diagnosis is None}
    assert minor and listed == minor, f"listed {sorted(listed)}, catalogue {sorted(minor)}"


def test_every_explained_mistake_is_proven_by_the_catalogue():
    """One mistake, one place, and proven: every explained id is named by a wrong or real-world entry."""
    proven = {diagnosis for _, _, diagnosis in WRONG if diagnosis} | {mid for case in REALWORLD for mid in case[2]}
    assert set(mistakes.MISTAKES) <= proven, sorted(set(mistakes.MISTAKES) - proven)
