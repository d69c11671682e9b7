"""Hand-ins the way students make them: a renamed notebook is matched to its assignment, or refused
with one line that names the file and the name it should have.

Browsers and learning platforms save a second download as ``01_attention (1).ipynb``; students add
their name (``01_attention-alice.ipynb``, ``alice_01_attention.ipynb``). nbgrader only grades
``submitted/<student>/<assignment>/<notebook>.ipynb`` under the exact name of the source notebook
and otherwise stops with "No notebooks found, did you forget to run generate_assignment?".

``CourseAutograde`` (installed by ``configure``) first looks at each submission folder: when the
expected notebook is missing and exactly one other notebook's name contains the expected one
(ignoring case, spaces and punctuation), it is renamed to the expected name and the log says so.
Anything else (no such notebook, or two candidates) is refused with one line, and the student
scores 0 for the assignment, as nbgrader does for a missing notebook; every other student is
graded as usual. The self-study copy a learner may hand in instead of the release is a separate
matter: ``RepairCells`` (``grader/hardening.py``) recognises its cells by their ids.
"""
import os
import re
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.apps import autogradeapp
from nbgrader.converters import Autograde, NbGraderException

RENAMED = "{folder}: {found} -> {expected} (改名后评分 / renamed, then graded)"
REFUSED = ("{folder}: 找到 {found}，应为 {expected}：此作业记 0 分，请学生按原名重新提交 / found {found}, expected "
           "{expected}: this assignment scores 0; ask the student to hand in the file under its original name")


def _key(name):
    return re.sub(r"[\W_]+", "", name.lower())


def match(folder, expected):
    """Decide what to do with submission ``folder`` (a Path) for the expected notebook names.

    Returns ``(renames, refusals)``: ``{found path: expected path}`` to rename, and one line per
    expected notebook that is missing and cannot be matched."""
    present = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
    names = {p.stem for p in present}
    renames, refusals = {}, []
    for stem in expected:
        if stem in names:
            continue
        candidates = [p for p in present if p.stem not in expected and _key(stem) in _key(p.stem)]
        if len(candidates) == 1 and candidates[0] not in renames:
            renames[candidates[0]] = folder / f"{stem}.ipynb"
        else:
            found = ", ".join(p.name for p in (candidates or [p for p in present if p.stem not in expected]))
            refusals.append(REFUSED.format(folder=folder, found=found or "没有 .ipynb / no .ipynb",
                                           expected=f"{stem}.ipynb"))
    return renames, refusals


class CourseAutograde(Autograde):
    """nbgrader's ``Autograde`` that matches renamed hand-ins first (see the module docstring)."""

    def init_assignment(self, assignment_id, student_id):
        folder = Path(self._format_source(assignment_id, student_id))
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            expected = [nb.name for nb in gb.find_assignment(assignment_id).notebooks]
        renames, refusals = match(folder, expected)
        for found, target in renames.items():
            os.rename(found, target)
            self.log.warning(RENAMED.format(folder=folder, found=found.name, expected=target.name))
        self.notebooks = sorted({str(renames.get(Path(nb), nb)) for nb in self.notebooks})
        for line in refusals:
            self.log.error(line)
        try:
            super().init_assignment(assignment_id, student_id)
        except NbGraderException:
            if not refusals:
                raise
            self._score_missing(assignment_id, student_id, expected)

    def _score_missing(self, assignment_id, student_id, expected):
        """0 points for each expected notebook not handed in (what nbgrader does once it found one)."""
        folder = Path(self._format_source(assignment_id, student_id))
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            for name in expected:
                if not (folder / f"{name}.ipynb").exists():
                    for grade in gb.find_submission_notebook(name, assignment_id, student_id).grades:
                        grade.auto_score, grade.needs_manual_grade = 0, False
            gb.db.commit()
        self.notebooks = []


def configure(c):
    """``nbgrader autograde`` builds its converter from the ``Autograde`` name in its own module (no
    setting chooses the class), so the course's converter is put there; ``c`` is unused and kept
    for the same call shape as the other ``configure`` functions."""
    autogradeapp.Autograde = CourseAutograde
