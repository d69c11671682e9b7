"""nbgrader end to end, the way an instructor uses it, through the class simulation's harness
(tools/simulate_class.py) in a temporary course directory.

Every graded chapter goes into one course with a fresh gradebook, with three submissions per
chapter -- the reference answer (``perfect``: full marks), the untouched release (``untouched``:
zero, without crashing) and the chapter's classic mistake (``classic_mistake``, the harness's
``MUTATIONS``: loses exactly the points the harness computes for it) -- then one ``autograde``, one
``generate_feedback`` and one ``export`` over all of them (nbgrader starts once per command, not
once per chapter). Scores are read from the gradebook, never from the CLI's exit status.
``nbgrader.validator.Validator`` judges every autograded perfect answer (passes) and untouched
release (every graded cell fails), and runs its own execution on one chapter.
"""
import pytest
from nbgrader.preprocessors import CheckCellMetadata
from nbgrader.validator import Validator

from pipeline_helpers import LESSONS, ROOT, build, graded_cells, nbgrader_meta, read_nb
from tools import simulate_class

pytestmark = pytest.mark.slow  # real nbgrader runs: `make test-fast` leaves them out

GRADED = [n for n in LESSONS if any("grade_id" in c.metadata for c in build.read_lesson(n))]
KINDS = ["perfect", "untouched", "classic_mistake"]


def nbgrader_config():
    return build.load_nbgrader_config()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One temporary course holding every built graded chapter, graded by the harness with the
    repository's nbgrader_config.py unchanged. Returns {"root", "mismatches", "book"} (the
    gradebook: {(student, chapter): {grade_id: Grade}})."""
    built = [n for n in GRADED if (ROOT / "source" / n / f"{n}.ipynb").exists()]  # others fail in `graded`
    workdir = tmp_path_factory.mktemp("e2e") / "course"
    mismatches, _, root = simulate_class.simulate(built, KINDS, workdir=workdir, timeout=None, log=lambda *_: None)
    return {"root": root, "mismatches": mismatches, "book": simulate_class.read_gradebook(root)}


@pytest.fixture(params=GRADED)
def graded(request, course):
    name = request.param
    cells = {student: course["book"].get((student, name)) for student in KINDS}
    assert cells["perfect"], f"source/{name}/{name}.ipynb missing -- run `make build`"
    return {"name": name, "root": course["root"], "cells": cells,
            "max": sum(g.max_score for g in cells["perfect"].values()),
            "scores": {student: sum(g.score for g in grades.values()) for student, grades in cells.items()}}


def test_every_score_feedback_and_export_is_as_the_harness_computes(course):
    """Every grade cell and exported total as computed, no submission flagged for manual grading,
    every failed test's message in the feedback and the classic mistake named there."""
    assert not course["mismatches"], "\n".join(course["mismatches"])


def test_points_add_up(graded):
    source = read_nb(ROOT / "source" / graded["name"] / f"{graded['name']}.ipynb")
    assert graded["max"] == sum(nbgrader_meta(c)["points"] for c in graded_cells(source)) > 0


def test_perfect_answer_gets_full_marks(graded):
    lost = {k: v for k, v in graded["cells"]["perfect"].items() if v.score != v.max_score}
    assert not lost, f"{graded['name']}: the reference loses points in {lost}"
    assert graded["scores"]["perfect"] == graded["max"]


def test_untouched_release_gets_zero(graded):
    earned = {k: v for k, v in graded["cells"]["untouched"].items() if v.score != 0}
    assert not earned, f"{graded['name']}: the untouched stubs earn points in {earned}"
    assert graded["scores"]["untouched"] == 0
    assert len(graded["cells"]["untouched"]) == len(graded["cells"]["perfect"])


def test_untouched_release_runs_past_every_stub(graded):
    """A learner who has not started gets errors only where they must write code or where a test
    calls it: every read-only text/demo cell runs (earlier chapters' pieces are provided)."""
    path = graded["root"] / "autograded" / "untouched" / graded["name"] / f"{graded['name']}.ipynb"
    crashed = [c.metadata["nbgrader"]["grade_id"] for c in read_nb(path).cells
               if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)
               and not (nbgrader_meta(c).get("solution") or nbgrader_meta(c).get("grade"))]
    assert not crashed, f"{graded['name']}: read-only cells fail before the exercises are done: {crashed}"


def test_classic_mistake_loses_exactly_its_computed_points(graded):
    mutation = simulate_class.MUTATIONS[graded["name"]]
    expected = simulate_class.expected_failures(simulate_class.analyse(graded["name"], ROOT / "source"), mutation)
    cells = graded["cells"]["classic_mistake"]
    assert expected and expected <= set(cells), f"computed {sorted(expected)}, graded {sorted(cells)}"
    lost = {k for k, g in cells.items() if g.score != g.max_score}
    assert lost == expected, f"a wrong {mutation.component} lost {sorted(lost)}, computed {sorted(expected)}"
    assert graded["scores"]["classic_mistake"] == graded["max"] - sum(cells[k].max_score for k in expected)


def test_feedback_html_shows_the_score(graded):
    for student, score in graded["scores"].items():
        path = graded["root"] / "feedback" / student / graded["name"] / f"{graded['name']}.html"
        html = path.read_text(encoding="utf-8")
        assert f"Score: {score:.1f} / {graded['max']:.1f}" in html, f"feedback/{student}/{graded['name']}"


def validator(execute, invert=False):
    """``nbgrader.validator.Validator`` with the course config; ``execute=False`` judges the
    outputs a notebook already has (those autograde produced) instead of running it again."""
    v = Validator(config=nbgrader_config(), invert=invert)
    if not execute:
        v.preprocessors = [CheckCellMetadata]
    return v


def test_validator_passes_every_autograded_perfect_answer(graded):
    """Every perfect answer, as autograde executed it, passes the Validator."""
    path = graded["root"] / "autograded" / "perfect" / graded["name"] / f"{graded['name']}.ipynb"
    results = validator(execute=False).validate(str(path))
    assert results == {}, f"{graded['name']}: {results}"


def test_validator_fails_every_graded_cell_of_the_autograded_release(graded):
    path = graded["root"] / "autograded" / "untouched" / graded["name"] / f"{graded['name']}.ipynb"
    results = validator(execute=False, invert=True).validate(str(path))
    assert set(results) <= {"passed"}, results
    assert not results.get("passed"), f"{graded['name']}: graded cells pass on the stubs: {results['passed']}"


@pytest.mark.parametrize("name", GRADED[:1])
def test_validator_executes_source_and_release(name):
    """The Validator's own execution path (what a learner's Validate button runs), on one chapter."""
    source = ROOT / "source" / name / f"{name}.ipynb"
    assert validator(execute=True).validate(str(source)) == {}
    results = validator(execute=True, invert=True).validate(str(ROOT / "release" / name / f"{name}.ipynb"))
    assert set(results) <= {"passed"} and not results.get("passed"), results
