"""The idiom catalogue (catalogue/idioms/): idiomatic right answers, run as the notebook runs them.

For each idiom, the chapter's source notebook is executed with plain ``exec`` in one namespace, as
a kernel would: every code cell before the exercise (setup, provided code, the reference code of
the other exercises; the graded cells of earlier exercises are skipped), then the idiom's cells in
place of the exercise cell, then every code cell after it up to the exercise's last graded cell.
The graded cells hold the visible asserts and the hidden ``tutor.grading.grade`` call, so a pass
here means visible and hidden tests both pass. Fast (no nbgrader); the end-to-end autograde of the
same catalogue lives in the class simulation.
"""
import ast
import subprocess
import sys

import nbformat
import pytest

from catalogue.idioms import IDIOMS
from pipeline_helpers import exercise_cells, graded_exercises, run_idiom
from tools.paths import ROOT, SOURCE
from tutor import guard

MIN_IDIOMS = 36
# Built-ins the exercises replace (tutor.guard's one table), as attributes (F.layer_norm, nn.LayerNorm, ...);
# the notebook's own functions of the same names (a bare ``LayerNorm``) are the learner's and stay allowed.
FORBIDDEN_ATTRIBUTES = {path.rsplit(".", 1)[1] for path in guard.FORBIDDEN_BUILTINS}


def test_catalogue_size_and_ids():
    ids = [idiom.id for idiom in IDIOMS]
    assert len(ids) >= MIN_IDIOMS, f"only {len(ids)} idioms, need at least {MIN_IDIOMS}"
    assert len(set(ids)) == len(ids), "idiom ids must be unique"


def test_every_graded_exercise_has_an_idiom():
    """By exercise name: a component graded in two chapters (a lesson and a drill) needs one idiom."""
    covered = {idiom.exercise for idiom in IDIOMS}
    missing = [f"{chapter}/{name}" for chapter, name in graded_exercises() if name not in covered]
    assert not missing, f"graded exercises without an idiom: {', '.join(missing)}"


def test_every_idiom_names_a_graded_exercise():
    known = set(graded_exercises())
    unknown = [idiom.id for idiom in IDIOMS if (idiom.chapter, idiom.exercise) not in known]
    assert not unknown, f"idioms naming no graded exercise: {', '.join(unknown)}"


def test_idioms_stay_from_scratch():
    """No idiom imports the reference or tutor, or reaches a built-in its exercise replaces."""
    for idiom in IDIOMS:
        for k, source in enumerate(idiom.cells):
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    modules = [node.module or ""]
                else:
                    modules = []
                assert not [m for m in modules if m.split(".")[0] in ("solutions", "tutor")], \
                    f"{idiom.id} cell {k}: imports {modules}"
                if isinstance(node, ast.Attribute):
                    assert node.attr not in FORBIDDEN_ATTRIBUTES, f"{idiom.id} cell {k}: uses .{node.attr}"


@pytest.mark.parametrize("idiom", IDIOMS, ids=[idiom.id for idiom in IDIOMS])
def test_idiom_passes_visible_and_hidden_tests(idiom, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # as graded: chapters 07 and 08 train only a little
    run_idiom(idiom)


def _submission(idiom):
    """The chapter's source notebook as the learner hands it in with this idiom (nbformat node)."""
    nb = nbformat.read(SOURCE / idiom.chapter / f"{idiom.chapter}.ipynb", as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    at = code[exercise_cells(idiom.chapter)[1][idiom.exercise][0]]
    nb.cells[at].source = idiom.cells[0]
    nb.cells[at + 1:at + 1] = [nbformat.v4.new_code_cell(source) for source in idiom.cells[1:]]
    return nb


@pytest.mark.parametrize("idiom", IDIOMS, ids=[idiom.id for idiom in IDIOMS])
def test_audit_accepts_idiom(idiom):
    """The submission audit (the preprocessor nbgrader autograde runs) voids no graded cell."""
    from grader.audit_submission import AuditSubmission

    nb, _ = AuditSubmission().preprocess(_submission(idiom), {})
    voided = [(cell.metadata["nbgrader"]["grade_id"], out["evalue"]) for cell in nb.cells
              if cell.get("metadata", {}).get("nbgrader", {}).get("grade") for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not voided, f"{idiom.id}: the audit voids {voided}"


def test_an_optimizer_step_is_not_tampering():
    """torch wraps torch.manual_seed itself when torch._dynamo is first imported (the first step of
    any optimizer does it): training before a graded cell must not read as tampering, while a
    learner's own replacement of torch.manual_seed still does. Fresh process: the import happens once."""
    code = """
import functools
import torch
import tutor.grading
from tutor import integrity
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.Adam(model.parameters())
model(torch.randn(1, 2)).sum().backward()
optimizer.step()
integrity.verify()
seed = torch.manual_seed
torch.manual_seed = functools.wraps(seed)(lambda s: seed(s))
try:
    integrity.verify()
except AssertionError as exc:
    print("caught:", exc)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "caught:" in run.stdout and "manual_seed" in run.stdout, run.stdout
