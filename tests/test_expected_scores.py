"""The part of the class simulation that predicts scores (tools/simulate_class.py), on its own and
fast: which grade cells a broken, voided or lost exercise must cost, read from the source notebooks."""
from pathlib import Path

from tools import simulate_class

SOURCE = Path(__file__).resolve().parents[1] / "source"


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


def test_every_graded_chapter_has_a_classic_mistake_to_simulate():
    """A chapter without a ``MUTATIONS`` entry would make the simulated classic-mistake student
    quietly perfect: add one (an edit of the reference answer the visible tests do not catch)."""
    quiet = [name for name in sorted(p.name for p in SOURCE.iterdir() if p.is_dir())
             if (info := simulate_class.analyse(name, SOURCE)).points
             and not simulate_class.make_submission("classic_mistake", info).fails]
    assert not quiet, f"add a MUTATIONS entry in tools/simulate_class.py for an exercise of {quiet}"
