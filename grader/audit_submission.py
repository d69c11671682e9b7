"""``AuditSubmission`` (after execution): the graded cells of an exercise whose code reaches the
grading machinery (``grader.audit``) or uses the built-in the exercise replaces score 0, with one
line saying which cell, which line and why; which graded cells it voided is also left in the
resources (``resources["voided"]``) for ``grader.findings``, where no output of the kernel can forge it."""
from typing import NamedTuple

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List, Unicode

from grader.audit import (
    CONFIG_PATHS,
    FROM_SCRATCH,
    SAFE_MAGICS,
    TAMPERED,
    TAMPERED_LATER,
    audit_source,
    builtin_uses,
    defined,
)
from grader.execution import error_output
from tutor.guard import forbidden_for


class Verdict(NamedTuple):
    """What voids an exercise's graded cells: the error output they get, and its reach."""
    ename: str
    message: str
    local: bool  # as ``Finding.local``: False voids every later exercise too


def _exercise_name(cell):
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
    return grade_id.removeprefix("impl_") or "?"



class AuditSubmission(NbGraderPreprocessor):
    """Score 0 the graded cells of an exercise whose code reaches the grading machinery or uses the
    built-in the exercise replaces; other exercises keep their points, unless the code can change
    every later test (``Finding.local`` is False), which voids the later exercises too.

    An exercise spans its solution cell, the cells the learner adds after it and its graded cells,
    up to the next solution cell (cells before the first solution cell belong to the first). Every
    code cell is read in order, so names bound by read-only cells (the setup cell's imports) are
    known; only cells the learner can edit are judged. The allow-lists are settings
    (``c.AuditSubmission.config_paths``, ``c.AuditSubmission.safe_magics`` in ``nbgrader_config.py``).
    """

    config_paths = List(Unicode(), default_value=list(CONFIG_PATHS), help=(
        "Module trees whose attributes a learner may set without voiding an exercise (plot style, progress "
        "bars, cuDNN switches, environment variables)")).tag(config=True)
    safe_magics = List(Unicode(), default_value=sorted(SAFE_MAGICS), help=(
        "IPython magics that only time or display; a cell magic's code is audited like any cell, every "
        "other magic and shell command voids the exercise")).tag(config=True)

    def preprocess(self, nb, resources):
        external = {"__builtins__": "builtins"}
        starts = [i for i, cell in enumerate(nb.cells) if utils.is_solution(cell) and cell.cell_type == "code"]
        owners = [max([s for s in starts if s <= i], default=starts[0] if starts else None)
                  for i in range(len(nb.cells))]  # cell index -> the solution cell of its exercise
        verdicts = {}  # solution cell index -> the Verdict of its exercise's worst problem
        forbidden = {s: forbidden_for(defined(nb.cells[s].source)) for s in starts}
        for index, (cell, owner) in enumerate(zip(nb.cells, owners)):
            if cell.cell_type != "code":
                continue
            before = dict(external)
            found = audit_source(cell.source, external, self.config_paths, self.safe_magics)
            settled = owner in verdicts and not verdicts[owner].local  # nothing is worse than "every later one"
            if owner is None or utils.is_locked(cell) or settled:
                continue
            exercise = _exercise_name(nb.cells[owner])
            if found:
                line, zh, en, local = min(found, key=lambda f: (f.local, f.line))  # a wide problem first
                template = TAMPERED if local else TAMPERED_LATER
                message = template.format(cell=index + 1, line=line, what=zh, what_en=en, exercise=exercise)
                if owner not in verdicts or not local:
                    verdicts[owner] = Verdict("IntegrityError", message, local)
                    self.log.warning("Tampering in cell %d: %s", index + 1, message)
            elif owner not in verdicts and (uses := builtin_uses(cell.source, before, forbidden[owner])):
                line, name = uses[0]
                verdicts[owner] = Verdict("FromScratchViolation",
                                          FROM_SCRATCH.format(cell=index + 1, line=line, name=name, exercise=exercise),
                                          True)
        voided = resources.setdefault("voided", {})  # grade_id -> ename, read by grader.findings
        for cell, owner in zip(nb.cells, owners):
            if utils.is_grade(cell) and cell.cell_type == "code":
                hits = [v for o, v in sorted(verdicts.items()) if o == owner or (not v.local and o <= owner)]
                if hits:
                    cell.outputs.append(error_output(hits[0].ename, hits[0].message))
                    voided[cell.metadata.nbgrader.grade_id] = hits[0].ename
        return nb, resources

