"""Unit tests of the course's nbgrader preprocessors on small fixture notebooks, as nbgrader's own tests
do (a gradebook filled by nbgrader's ``SaveCells`` from a three-cell source notebook): ``RepairCells``
(grader/repair.py) and ``QuietOverwriteCells`` (grader/feedback.py). The other preprocessors have
theirs: ``AuditSubmission`` in test_audit.py, ``SealedFeedback`` and ``OfflineMath`` in test_feedback.py,
``ResilientExecute`` in test_grading_limits.py, ``RecordFindings`` in test_insight.py."""
import copy
import logging
import os

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ComputeChecksums, OverwriteCells, SaveCells

from grader.feedback import QuietOverwriteCells, released
from grader.repair import RepairCells
from tools.simulate_class import BIN

SETUP = "from tutor.grading import check"
ANSWER = "def answer():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
TESTS = "assert answer() == 1\n### BEGIN HIDDEN TESTS\nassert answer() + 1 == 2\n### END HIDDEN TESTS"


def _cell(source, grade_id, *, grade=False, solution=False, locked=False, points=None):
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id, "schema_version": 3}
    if points is not None:
        meta["points"] = points
    cell = new_code_cell(source, metadata={"nbgrader": meta})
    cell.id = grade_id  # the release keeps the source's cell ids (the self-study copy shares them)
    return cell


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """(source notebook, resources): a setup cell (read-only), an answer cell, a test cell worth 2 points.
    One gradebook for the module: the preprocessors under test only read it."""
    source = new_notebook(cells=[_cell(SETUP, "setup", locked=True), new_markdown_cell("## 1"),
                                 _cell(ANSWER, "answer", solution=True),
                                 _cell(TESTS, "test_answer", grade=True, locked=True, points=2)])
    db = tmp_path_factory.mktemp("course") / "gradebook.db"
    resources = {"nbgrader": {"db_url": f"sqlite:///{db}", "assignment": "ps0", "notebook": "ps0"}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")  # a new gradebook runs alembic
        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            gb.add_assignment("ps0")
    source, _ = ComputeChecksums().preprocess(source, resources)
    SaveCells().preprocess(copy.deepcopy(source), resources)
    return source, resources


def _handed_in(source):
    """The notebook as released (hidden tests removed), answered."""
    nb = copy.deepcopy(source)
    for cell in nb.cells:
        cell.source = released(cell.source).replace("### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                                                    "return 1")
    return nb


def _grade_ids(nb):
    return [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]


@pytest.fixture
def log(caplog):
    logger = logging.getLogger("test_preprocessors")
    caplog.set_level(logging.WARNING, logger="test_preprocessors")
    return logger


# ---------------------------------------------------------------- RepairCells


def test_repair_keeps_the_first_of_a_duplicated_grade_id_and_unmarks_the_copy(course, log):
    source, resources = course
    nb = _handed_in(source)
    copied = copy.deepcopy(nb.cells[3])
    copied.id = "my-copy"
    copied.source = "assert True  # the learner's copy of the test cell"
    nb.cells.append(copied)
    nb, _ = RepairCells(log=log).preprocess(nb, resources)
    assert _grade_ids(nb) == ["setup", None, "answer", "test_answer", None]
    assert "nbgrader" not in nb.cells[4].metadata  # a plain cell now: never graded, never a second score
    assert nb.cells[3].metadata.nbgrader["points"] == 2


def test_repair_unmarks_an_unknown_grade_id_and_resets_edited_points(course, log):
    source, resources = course
    nb = _handed_in(source)
    nb.cells[3].metadata.nbgrader["points"] = 100
    nb.cells[3].metadata.nbgrader["locked"] = False
    nb.cells[2].metadata.nbgrader["grade_id"] = "renamed"
    nb, _ = RepairCells(log=log).preprocess(nb, resources)
    # the renamed cell is a plain cell; the answer cell comes back after the source cell before it (setup)
    assert _grade_ids(nb) == ["setup", "answer", None, None, "test_answer"] and nb.cells[1].source == ANSWER
    meta = nb.cells[4].metadata.nbgrader
    assert (meta["points"], meta["locked"], meta["grade"]) == (2, True, True)


def test_repair_restores_a_deleted_read_only_cell_in_its_place(course, log, caplog):
    source, resources = course
    nb = _handed_in(source)
    del nb.cells[0]
    nb, _ = RepairCells(log=log).preprocess(nb, resources)
    assert _grade_ids(nb) == ["setup", None, "answer", "test_answer"] and nb.cells[0].source == SETUP
    assert "Cell setup was missing from the submission; restoring it" in caplog.text


def test_repair_takes_a_self_study_copy_by_its_cell_ids(course, log):
    source, resources = course
    nb = _handed_in(source)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    nb, _ = RepairCells(log=log).preprocess(nb, resources)
    assert _grade_ids(nb) == ["setup", None, "answer", "test_answer"]  # graded in place, nothing inserted
    assert nb.cells[3].metadata.nbgrader["grade"] and nb.cells[3].metadata.nbgrader["points"] == 2


# ---------------------------------------------------------------- QuietOverwriteCells


def test_quiet_overwrite_restores_hidden_tests_without_a_warning(course, log, caplog):
    source, resources = course
    nb, _ = QuietOverwriteCells(log=log).preprocess(_handed_in(source), resources)
    assert nb.cells[3].source == TESTS  # the hidden tests are back
    assert "has changed" not in caplog.text


def test_plain_overwrite_warns_on_the_same_notebook(course, log, caplog):
    """What the quiet version silences: nbgrader's checksum warning for every cell with hidden tests."""
    source, resources = course
    OverwriteCells(log=log).preprocess(_handed_in(source), resources)
    assert "Attribute 'checksum' for cell test_answer has changed" in caplog.text


def test_quiet_overwrite_still_warns_on_a_real_edit(course, log, caplog):
    source, resources = course
    nb = _handed_in(source)
    nb.cells[3].source = "assert True  # the learner's edit"
    nb.cells[0].source = SETUP + "\ncheck = lambda *args: None"
    nb, _ = QuietOverwriteCells(log=log).preprocess(nb, resources)
    assert (nb.cells[0].source, nb.cells[3].source) == (SETUP, TESTS)
    for grade_id in ("setup", "test_answer"):
        assert f"Attribute 'checksum' for cell {grade_id} has changed" in caplog.text
