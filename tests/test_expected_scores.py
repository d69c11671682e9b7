"""The part of the class simulation that predicts scores (tools/simulate_class.py), on its own and
fast: which grade cells a broken, voided or lost exercise, or a chapter's classic mistake
(``MUTATIONS``), must cost, read from the source notebooks."""
import pytest

from pipeline_helpers import ROOT, graded_chapters
from tools import simulate_class
from tutor.mistakes import MISTAKES

SOURCE = ROOT / "source"
GRADED = graded_chapters()


def test_a_broken_exercise_costs_the_cells_that_use_it_through_later_exercises():
    info = simulate_class.analyse("01_attention", SOURCE)
    # attention_numpy calls softmax: both hidden checks depend on softmax, nothing else does
    assert simulate_class._failing(info, ["softmax"]) == {"softmax_is_stable", "attention_numpy_matches_reference"}
    assert simulate_class._failing(info, ["ScaledDotProductAttention"]) == {"sdpa_module_matches_reference"}


def test_a_voided_exercise_costs_its_own_cells_or_every_later_one():
    info = simulate_class.analyse("01_attention", SOURCE)
    second, _ = info.exercises[1]
    assert simulate_class._failing(info, [], voided=second) == {"attention_numpy_matches_reference"}
    later = simulate_class._failing(info, [], voided=second, later=True)
    assert later == set(info.points) - {"softmax_is_stable"}


def test_a_lost_kernel_costs_every_cell_after_it():
    info = simulate_class.analyse("02_multihead", SOURCE)
    first = min(info.grade_index.values())
    assert simulate_class._failing(info, [], after=first) == set(info.points) - {
        g for g, i in info.grade_index.items() if i == first}


def test_hidden_checks_are_read_from_the_grade_cells():
    info = simulate_class.analyse("06_transformer", SOURCE)
    assert simulate_class._checks_in(info, "transformer_forward_matches_reference") == {"Transformer"}
    assert simulate_class._checks_in(info, "transformer_structure") == set()


@pytest.mark.parametrize("chapter", GRADED)
def test_each_classic_mistake_edits_the_reference_and_costs_a_hidden_check_of_its_exercise(chapter):
    info = simulate_class.analyse(chapter, SOURCE)
    mutation = simulate_class.MUTATIONS[chapter]
    assert mutation.mistake in MISTAKES, f"{mutation.mistake!r} is not a diagnosis id of tutor.mistakes"
    _, answer = simulate_class.reference_answer(info, mutation.component)
    for text, _ in mutation.edits:
        assert answer.count(text) == 1, f"{text!r} does not stand once in the reference {mutation.component}"
    fails = simulate_class.make_submission("classic_mistake", info).fails
    assert fails == simulate_class.expected_failures(info, mutation)
    assert any(mutation.component in simulate_class._checks_in(info, g) for g in fails), \
        f"{chapter}: the predicted failures {sorted(fails)} run no hidden check of {mutation.component}"


def test_a_silent_mistake_costs_the_hidden_checks_that_judge_what_it_built():
    """Through later exercises (a wrong SwiGLU makes a wrong GPTBlock and GPT), but not a check of
    an object that does not build on it (GPT's own mistake leaves GPTBlock's and SwiGLU's checks alone)."""
    info = simulate_class.analyse("08_gpt", SOURCE)
    silent = simulate_class.Mutation("SwiGLU", "", [])
    assert simulate_class.expected_failures(info, silent) == {
        "swiglu_matches_reference", "gpt_block_matches_reference", "gpt_matches_reference"}
    assert simulate_class.expected_failures(info, silent._replace(component="GPT")) == {"gpt_matches_reference"}


def test_a_mistake_the_visible_tests_catch_costs_every_cell_that_uses_its_exercise():
    info = simulate_class.analyse("05_layers", SOURCE)
    hidden = simulate_class.Mutation("EncoderLayer", "src_mask_missing", [])
    assert simulate_class.expected_failures(info, hidden) == {"encoder_layer_matches_reference"}
    visible = hidden._replace(visible=True)
    assert simulate_class.expected_failures(info, visible) == {"encoder_layer_ignores_padding",
                                                               "encoder_layer_matches_reference"}


def test_a_graded_chapter_without_a_classic_mistake_is_an_error_not_a_perfect_answer(monkeypatch):
    monkeypatch.delitem(simulate_class.MUTATIONS, "02_multihead")
    with pytest.raises(ValueError, match="add a MUTATIONS entry for 02_multihead"):
        simulate_class.make_submission("classic_mistake", simulate_class.analyse("02_multihead", SOURCE))
