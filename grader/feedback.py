"""nbgrader feedback pages a learner can read offline, and an autograde log without false alarms.

Runs in the nbgrader process (``configure(c)`` in ``nbgrader_config.py``), never in a learner's kernel:

- ``OfflineMath`` (``generate_feedback``): the TeX in markdown cells (``$...$``, ``$$...$$``) becomes
  MathML with ``latex2mathml``, which every current browser draws by itself; the feedback template
  ``feedback_offline`` (in ``feedback_templates/``) is nbgrader's own without the MathJax script it
  would fetch from a CDN. Math that ``latex2mathml`` cannot convert stays as TeX in a code span.
- ``SealedFeedback`` (``generate_feedback``): the page keeps the scores and the course's own verdict lines,
  nothing the kernel produced; in the English class (``COURSE_LANG=en``, nbgrader_config.py) every line it
  writes is English only, through ``tutor.lang`` as in the learner's kernel.
- ``QuietOverwriteCells`` (``autograde``): nbgrader's ``OverwriteCells`` warns "Attribute 'checksum'
  for cell … has changed!" for every graded cell with hidden tests, because the released cell
  (hidden tests removed) never has the checksum of the source cell it is restored from. That
  restore is how hidden tests come back, so when a submitted cell is exactly the released text
  the source is put back silently; any other change is still reported and restored by nbgrader.
"""
import copy
import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, OverwriteCells

from tutor import lang

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


# The page's fixed lines, (中文, English): both in the Chinese class, English only in the English one (say()).
SEALED_NOTE = ("**这份反馈只显示分数和诊断。** 你的代码在评分时打印、画出或写入的内容都不会出现在这里；想看完整的诊断"
               "（哪个用例、最大误差），在自己的笔记本里运行检查单元。",
               "**This feedback shows scores and diagnoses only.** Nothing your code printed, drew or wrote while "
               "being graded appears here; for the full diagnosis (which case, the largest error), run the check "
               "cells in your own notebook.")
PASSED = ("通过", "passed")  # after ✅; the others after ❌
FAILED = ("未通过", "did not pass")
NOT_IMPLEMENTED = ("尚未实现", "not implemented yet")
TIMED_OUT_SHORT = ("超时，已被中断", "timed out and interrupted")
OUT_OF_MEMORY_SHORT = ("内存超限", "out of memory")


def say(line):
    """A line of the page: a pair ``(中文, English)`` as ``中文 / English``, or a bilingual literal of the course's
    tables as it is; English only in the English class (``tutor.lang``, ``COURSE_LANG=en``)."""
    return lang.pick(*line) if isinstance(line, tuple) else lang.text(line)


DIAGNOSIS_ID = re.compile(r"\[([a-z][a-z0-9_]*)\]")


class SealedFeedback(Preprocessor):
    """``generate_feedback``: nothing the learner's code produced while being graded reaches the page.

    The learner's code ran in the grading kernel beside the reference (the checks import it), so
    anything it printed, raised, drew or wrote could carry the reference or a hidden test out. The
    page keeps the submitted cells and the scores; every code cell's outputs are removed, and each
    graded cell gets lines made here from the course's own constants only:

    - ✅ or ❌ (from the same facts that scored the cell: an error or stderr output);
    - the kind of failure (not implemented, a timeout, the memory cap, a lost kernel, a forbidden
      built-in by its name in ``tutor.guard``'s table, the reference handed in), as fixed text;
    - each known mistake the check named (its id looked up in ``tutor.mistakes``, its text from
      there, never from the output);
    - the audit's verdict, recomputed here from the submitted source (``AuditSubmission`` on a copy
      with no outputs), so it cannot be forged by an output either.

    What can still cross from the kernel is which of these fixed lines a cell shows: a few bits per
    cell, as the score itself always is."""

    enabled = True

    def preprocess(self, nb, resources):
        from grader.audit_submission import AuditSubmission

        bare = copy.deepcopy(nb)
        for cell in bare.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        audited = AuditSubmission(parent=self.parent).preprocess(bare, resources)[0]
        for cell, trusted in zip(nb.cells, audited.cells):
            if cell.cell_type != "code":
                continue
            outputs, cell.outputs = cell.outputs, []
            if cell.metadata.get("nbgrader", {}).get("grade"):
                text = "\n".join(verdict_lines(classify(outputs), [o.evalue for o in trusted.outputs]))
                cell.outputs = [new_output("stream", name="stdout", text=text + "\n")]
        nb.cells.insert(0, new_markdown_cell(say(SEALED_NOTE)))
        return nb, resources


class Verdict(NamedTuple):
    """What one graded cell's outputs say, in the course's terms: ``kind`` is one of ``KINDS``;
    ``mistakes`` the registry ids its report named; ``forbidden`` the built-ins of ``tutor.guard``'s
    table it was caught calling; ``reference`` True when it handed in the reference itself."""
    kind: str
    mistakes: tuple = ()
    forbidden: tuple = ()
    reference: bool = False


KINDS = ("passed", "failed", "not_implemented", "timeout", "memory", "kernel_lost")


def _known_mistakes():
    """The registry's mistake ids (``tutor.mistakes``: importing it imports the checks and torch, about
    2 s, so only where a report holds a candidate id; grader/taskserver.py preloads it)."""
    from tutor.mistakes import MISTAKES

    return MISTAKES


def classify(outputs):
    """The ``Verdict`` of a graded cell from its outputs (an error or stderr output fails it, as
    nbgrader scores it). Only known names are taken, and only from its error reports (never from what
    the cell printed): ids of ``tutor.mistakes``, names of ``tutor.guard.FORBIDDEN_BUILTINS``."""
    from grader.limits import MEMORY_ERRORS
    from tutor.guard import FORBIDDEN_BUILTINS, FORBIDDEN_MESSAGE, REFERENCE_MESSAGE

    errors = [o for o in outputs if o.output_type == "error"]
    if not errors and not any(o.output_type == "stream" and o.name == "stderr" for o in outputs):
        return Verdict("passed")
    text = "\n".join(f"{o.get('ename', '')} {o.get('evalue', '')} {o.get('text', '')}" for o in outputs)
    reports = "\n".join(o.evalue for o in errors)  # a check's ❌ report; never what the cell printed
    if any(o.ename == "KernelLost" for o in errors):
        kind = "kernel_lost"
    elif any(o.ename == "TimedOut" for o in errors):
        kind = "timeout"
    elif MEMORY_ERRORS.search(text):
        kind = "memory"
    elif NOT_IMPLEMENTED[0] in text or NOT_IMPLEMENTED[1] in text or "NotImplementedError" in text:
        kind = "not_implemented"
    else:
        kind = "failed"
    # the reference's words as either edition's kernel writes them
    reference = (REFERENCE_MESSAGE.split("（")[0], lang.english_only(REFERENCE_MESSAGE).split(" (")[0])
    forbidden = tuple(n for n in FORBIDDEN_BUILTINS.values() if _reported(FORBIDDEN_MESSAGE.format(what=n), reports))
    return Verdict(kind, tuple(dict.fromkeys(m for m in DIAGNOSIS_ID.findall(reports) if m in _known_mistakes())),
                   forbidden, any(words in reports for words in reference))


def _reported(line, reports):
    """``line`` (bilingual) is in ``reports`` as the Chinese edition's kernel writes it or as the English one's."""
    return line in reports or lang.english_only(line).strip() in reports


def verdict_lines(verdict, audit_lines=()):
    """The lines a feedback page shows for a graded cell: its audit verdict (made from the source),
    then fixed texts for ``verdict``."""
    from grader.execution import KERNEL_LOST
    from tutor.guard import FORBIDDEN_MESSAGE, REFERENCE_MESSAGE
    from tutor.mistakes import explain

    if verdict.kind == "passed" and not audit_lines:
        return [f"✅ {say(PASSED)}"]
    lines = [say(line) for line in audit_lines]
    lines += [f"❌ {say(line)}" for line in {"kernel_lost": [KERNEL_LOST], "timeout": [TIMED_OUT_SHORT],
                                            "memory": [OUT_OF_MEMORY_SHORT], "not_implemented": [NOT_IMPLEMENTED],
                                            "failed": [FAILED]}.get(verdict.kind, [])]
    lines += [f"❌ {say(FORBIDDEN_MESSAGE.format(what=name))}" for name in verdict.forbidden]
    if verdict.reference:
        lines.append(f"❌ {say(REFERENCE_MESSAGE.format(what='solutions'))}")
    return lines + [explain(m) for m in verdict.mistakes]


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
    c.GenerateFeedback.preprocessors = [GetGrades, SealedFeedback, OfflineMath, CSSHTMLHeaderPreprocessor]
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
