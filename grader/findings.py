"""``RecordFindings`` (autograde, after ``AuditSubmission``): what each graded cell found, kept for the
class report (``python -m grader.insight``).

Per graded cell of a submission it records: the grade_id, passed or not, the kind of result
(``grader.feedback.KINDS``, plus ``voided`` where ``AuditSubmission`` voided the cell), the ids of the
known mistakes the check named, the label of the failing case (``用例 case 2/4 「label」`` in the
check's report), and the score and maximum score (``nbgrader.utils.determine_grade``, the function
``SaveAutoGrades`` scores the cell with). It runs in the nbgrader process, as every preprocessor of
``grader.hardening.configure`` does, so plain ``nbgrader autograde``, the Formgrader's button and a
cluster worker all record the same way; the learner's kernel has ended before it runs.

Where it is kept: a table of its own, ``insight_finding``, in the gradebook database (SQLite or the
PostgreSQL of tools/postgres.sh: whatever ``db_url`` the autograde uses), beside nbgrader's tables and
without changing them. Why not a JSON file beside each autograded notebook: ``generate_feedback``
copies every file of ``autograded/<student>/<assignment>/`` that is not a notebook into
``feedback/<student>/<assignment>/`` (``BaseConverter.init_assignment`` in nbgrader 0.9.6; only
``CourseDirectory.ignore`` is left out), the folder an instructor hands back, and the failing case
and mistake ids are for the staff. The gradebook is already out of every student's and every grading
kernel's reach (docs/INSTRUCTOR.md section 5), a cluster's workers already share it, and a
submission's rows are replaced in one transaction (its primary key is student, assignment, notebook,
grade_id), so re-grading never doubles them.
"""
import re
from typing import NamedTuple

from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, Text, delete, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from grader.feedback import classify

TABLE = Table(
    "insight_finding", MetaData(),
    Column("student", String(128), primary_key=True),
    Column("assignment", String(128), primary_key=True),
    Column("notebook", String(128), primary_key=True),
    Column("grade_id", String(128), primary_key=True),
    Column("position", Integer, nullable=False),  # the cell's place among the notebook's graded cells
    Column("passed", Boolean, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("mistakes", Text, nullable=False),  # mistake ids, space-separated
    Column("failing_case", Text),
    Column("score", Float),
    Column("max_score", Float, nullable=False),
)
VOIDED = "voided"
CASE_LABEL = re.compile(r"用例 (?:/ )?case(?: \d+/\d+)? 「([^」\n]*)」")


class Finding(NamedTuple):
    """One graded cell of one submission, as the report reads it (``TABLE``'s columns)."""
    student: str
    assignment: str
    notebook: str
    grade_id: str
    position: int
    passed: bool
    kind: str
    mistakes: tuple
    failing_case: str
    score: float
    max_score: float


def failing_case(outputs):
    """The label of the case a check's report (a ``TestFailure`` error) names in ``outputs``, or None."""
    for output in outputs:
        if output.output_type == "error" and output.ename == "TestFailure":
            if match := CASE_LABEL.search(output.evalue):
                return match.group(1)
    return None


def cell_findings(nb, voided, student, assignment, notebook):
    """``Finding`` of every graded code cell of graded notebook ``nb``; ``voided``: the grade_ids
    ``AuditSubmission`` voided."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_grade(cell):
            continue
        grade_id = cell.metadata.nbgrader.grade_id
        verdict = classify(cell.outputs)
        kind = VOIDED if grade_id in voided else verdict.kind
        score, max_score = utils.determine_grade(cell)
        found.append(Finding(student, assignment, notebook, grade_id, len(found), kind == "passed", kind,
                             verdict.mistakes, None if kind == "passed" else failing_case(cell.outputs),
                             score, max_score))
    return found


def _ensure_table(engine):
    """Create the table unless it exists (checked every time: a gradebook may be replaced while a
    long-lived process, JupyterLab's Formgrader, keeps its engine)."""
    try:
        TABLE.create(engine, checkfirst=True)
    except SQLAlchemyError:  # another process (a cluster worker) created it in between
        if not inspect(engine).has_table(TABLE.name):
            raise


def record(engine, student, assignment, notebook, found):
    """Replace what is kept for one submitted notebook by ``found``, in one transaction."""
    _ensure_table(engine)
    with engine.begin() as connection:
        connection.execute(delete(TABLE).where(TABLE.c.student == student, TABLE.c.assignment == assignment,
                                               TABLE.c.notebook == notebook))
        if found:
            connection.execute(TABLE.insert(), [{**f._asdict(), "mistakes": " ".join(f.mistakes)} for f in found])


def read(engine):
    """Every ``Finding`` kept in the database of ``engine`` (none when nothing was recorded yet)."""
    if not inspect(engine).has_table(TABLE.name):
        return []
    with engine.connect() as connection:
        rows = connection.execute(select(TABLE).order_by(TABLE.c.assignment, TABLE.c.notebook, TABLE.c.position,
                                                         TABLE.c.student)).mappings().all()
    return [Finding(**{**row, "mistakes": tuple(row["mistakes"].split())}) for row in rows]


class RecordFindings(NbGraderPreprocessor):
    """Record the ``Finding`` of each graded cell of the notebook being autograded in the gradebook."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        found = cell_findings(nb, resources.get("voided", {}), info["student"], info["assignment"], info["notebook"])
        with Gradebook(info["db_url"]) as gradebook:  # the process's shared engine (grader.hardening)
            record(gradebook.engine, info["student"], info["assignment"], info["notebook"], found)
        return nb, resources
