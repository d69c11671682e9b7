"""nbgrader feedback pages a learner can read offline, and an autograde log without false alarms.

Runs in the nbgrader process (``configure(c)`` in ``nbgrader_config.py``), never in a learner's kernel:

- ``OfflineMath`` (``generate_feedback``): the TeX in markdown cells (``$...$``, ``$$...$$``) becomes
  MathML with ``latex2mathml``, which every current browser draws by itself; the feedback template
  ``feedback_offline`` (in ``feedback_templates/``) is nbgrader's own without the MathJax script it
  would fetch from a CDN. Math that ``latex2mathml`` cannot convert stays as TeX in a code span.
- ``QuietOverwriteCells`` (``autograde``): nbgrader's ``OverwriteCells`` warns "Attribute 'checksum'
  for cell … has changed!" for every graded cell with hidden tests, because the released cell
  (hidden tests removed) never has the checksum of the source cell it is restored from. That
  restore is how hidden tests come back, so when a submitted cell is exactly the released text
  the source is put back silently; any other change is still reported and restored by nbgrader.
"""
import re
from functools import lru_cache
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, OverwriteCells

TEMPLATES = Path(__file__).resolve().parent / "feedback_templates"
TEMPLATE_NAME = "feedback_offline"

# Fenced code blocks and code spans are left alone; then display math, then inline math.
_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<!\s)\$(?!\d)")


def _mathml(tex, display):
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display="block" if display else "inline").replace("\n", "")
    except Exception:  # an unsupported command: show the TeX itself
        return f"`{tex.strip()}`"


def tex_to_mathml(markdown):
    """``markdown`` with every ``$...$``/``$$...$$`` outside code replaced by MathML."""
    parts = _CODE.split(markdown)
    for i in range(0, len(parts), 2):  # even parts are outside code
        text = _DISPLAY.sub(lambda m: _mathml(m.group(1), True), parts[i])
        parts[i] = _INLINE.sub(lambda m: _mathml(m.group(1), False), text)
    return "".join(parts)


class OfflineMath(Preprocessor):
    """Markdown cells: TeX -> MathML, so a feedback page needs no MathJax and no network."""

    enabled = True  # nbconvert preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown":
            cell.source = tex_to_mathml(cell.source)
        return cell, resources


class QuietOverwriteCells(OverwriteCells):
    """``OverwriteCells`` without the checksum warning for a cell handed in exactly as released.

    The notebook's source cells are read from the gradebook in one query, not one query per cell
    twice (here and in ``OverwriteCells``): about 0.05 s a notebook."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not isinstance(getattr(self.gradebook, "find_source_cell", None), _SourceCells):
            self.gradebook.find_source_cell = _SourceCells(self.gradebook, self.notebook_id, self.assignment_id)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and cell.metadata.nbgrader.get("locked"):
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source_cell = None
            if source_cell is not None and source_cell.locked and cell.source == released(source_cell.source):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)


class _SourceCells:
    """``Gradebook.find_source_cell`` for one notebook, answered from its source cells read once (the
    gradebook object lives for one ``preprocess``); another notebook's cell goes to the gradebook."""

    def __init__(self, gradebook, notebook_id, assignment_id):
        self.find = type(gradebook).find_source_cell.__get__(gradebook)
        self.notebook = (notebook_id, assignment_id)
        try:
            self.cells = {c.name: c for c in gradebook.find_notebook(notebook_id, assignment_id).source_cells}
        except MissingEntry:  # then every lookup asks the gradebook, which says so as before
            self.cells = {}

    def __call__(self, name, notebook, assignment):
        if (notebook, assignment) == self.notebook and name in self.cells:
            return self.cells[name]
        return self.find(name, notebook, assignment)


@lru_cache(maxsize=4096)  # a source cell's text is the same for every submission
def released(source):
    """A source cell's text as ``generate_assignment`` releases it (hidden tests removed)."""
    from nbformat.v4 import new_code_cell

    cell = new_code_cell(source)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source


def configure(c):
    """Install the feedback template and preprocessors, and the quiet ``OverwriteCells``, in config ``c``
    (after ``grader.hardening.configure(c)``, whose sanitize preprocessors it edits)."""
    import nbgrader
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

    formgrader_templates = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    c.HTMLExporter.template_name = TEMPLATE_NAME
    c.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(formgrader_templates)]
    c.GenerateFeedback.preprocessors = [GetGrades, OfflineMath, CSSHTMLHeaderPreprocessor]
    c.Autograde.sanitize_preprocessors = [QuietOverwriteCells if p is OverwriteCells else p
                                          for p in c.Autograde.sanitize_preprocessors]
    silence_harmless_warnings()


def silence_harmless_warnings():
    """nbgrader 0.9.6's ``Gradebook.add_submission`` builds a submission's notebooks, grades and
    comments through relationships before ``session.add``; SQLAlchemy 2 no longer cascades such
    pending objects into the session by backref, warns on the autoflush it triggers ("Object of
    type <SubmittedAssignment> not in session, add operation along 'Assignment.submissions' will
    not proceed"), and the ``session.add`` + ``commit`` right after store them all the same."""
    import warnings

    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", message=r"Object of type <(Submitted\w+|Grade|Comment)> not in session",
                            category=SAWarning)
