"""The check and the visible tests of each graded cell agree on every catalogue entry (issue 36, item 2).

Wrong, right, real-world and held-out entries run through the check and through the visible asserts
of the graded cells that call it (tests/agreement.py reads them from source/). A learner must never
see the check's ✅ and then a visible ❌ in the same cell; where visible tests are weaker on purpose
(tests/agreement.py: VISIBLE_WEAKER), a wrong answer may pass them: the check's ❌ comes first.
"""
import pytest
import torch

from pipeline_helpers import OVERFLOWS_ON_PURPOSE
from tests import agreement
from tutor.checks import run_check

ENTRIES = agreement.entries()
pytestmark = OVERFLOWS_ON_PURPOSE


@pytest.mark.parametrize("label, check, obj", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_check_and_visible_tests_agree(label, check, obj, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # as graded: chapters 07 and 08 train only a little
    problem = agreement.disagreement(check, obj, run_check(check, obj).passed)
    assert problem is None, f"{label}: {problem}"


def test_every_weaker_visible_test_names_a_graded_check():
    assert set(agreement.VISIBLE_WEAKER) <= set(agreement.visible_cells())


def test_a_visible_assert_stricter_than_the_check_is_caught(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    """A right top-k filter that blocks with the dtype's minimum (the contract allows it) passes the check;
    a visible assert that insists on -inf would fail it, and the agreement test says so."""
    def top_k_filter_min(logits, k):
        if k is None or k >= logits.size(-1):
            return logits
        kth = logits.topk(k, -1).values[..., -1:]
        return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)

    assert run_check("top_k_filter", top_k_filter_min).passed
    assert agreement.disagreement("top_k_filter", top_k_filter_min, True) is None
    chapter, exercise, name, sources = agreement.visible_cells()["top_k_filter"]
    stricter = "assert torch.isinf(top_k_filter(torch.tensor([[1.0, 3.0, 2.0]]), 1)).sum() == 2\n"
    monkeypatch.setattr(agreement, "_visible", lambda source, real=agreement._visible: (
        real(source)[0] + ("\n" + stricter if "top_k_filter(_z, 2)" in source else ""), real(source)[1]))
    problem = agreement.disagreement("top_k_filter", top_k_filter_min, True)
    assert problem is not None and "visible tests fail" in problem


def _char_tokenizer_cell():
    import json

    from tools.paths import SOURCE
    nb = json.loads((SOURCE / "08_gpt" / "08_gpt.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                == "tokenizer_round_trip")
    return agreement._visible("".join(cell["source"]))[0]


class _CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


class CharTokenizerUnknownToZero(_CharTokenizer):
    def encode(self, s):
        return torch.tensor([self.stoi.get(ch, 0) for ch in s], dtype=torch.long)  # bug: an unknown character is 0


class CharTokenizerIndex(_CharTokenizer):
    def encode(self, s):
        return torch.tensor([self.chars.index(ch) for ch in s], dtype=torch.long)  # bug: O(V), ValueError


class CharTokenizerRight(_CharTokenizer):
    def encode(self, s):
        return torch.tensor([self.stoi[ch] for ch in s], dtype=torch.long)


@pytest.mark.parametrize("cls, passes", [(CharTokenizerRight, True), (CharTokenizerUnknownToZero, False),
                                         (CharTokenizerIndex, False)])
def test_char_tokenizer_visible_tests_want_a_key_error(cls, passes):
    """CharTokenizer has no check: its graded cell's visible tests judge it, an unknown character included."""
    namespace = {"torch": torch, "CharTokenizer": cls}
    try:
        exec(compile(_char_tokenizer_cell(), "<08 tokenizer_round_trip>", "exec"), namespace)  # noqa: S102
    except (AssertionError, ValueError):  # any error fails a graded cell
        assert not passes
    else:
        assert passes
