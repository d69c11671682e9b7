"""nbgrader preprocessors that let autograding survive broken and hostile submissions.

They run inside the ``nbgrader autograde`` process, out of reach of the learner's kernel, one
preprocessor per module:

- ``RepairCells`` (``grader/repair.py``, sanitize phase, before ``OverwriteCells``): a graded or
  read-only cell whose nbgrader metadata was edited, renamed, stripped or deleted is put back from
  the gradebook, so nbgrader's checksums restore its source instead of crashing.
- ``ResilientExecute`` (replaces ``Execute``; ``grader/execution.py``): memory and CPU caps on
  every kernel, short waits after a hang, a dead kernel survived, one-line errors.
- ``AuditSubmission`` (``grader/audit_submission.py``, after execution) applies the audit
  (``grader/audit.py``, plain code) to the cells the learner wrote: the graded cells of the
  exercise that holds code reaching the grading machinery, or the built-in it replaces, score 0.

Their settings are traitlets with help strings (``nbgrader autograde --help-all``), set in
``nbgrader_config.py``. ``configure(c)`` installs them in an nbgrader config object.
"""
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from grader.audit_submission import AuditSubmission
from grader.execution import ResilientExecute
from grader.repair import RepairCells


def configure(c):
    """Install the preprocessors above in nbgrader config ``c`` (nbgrader 0.9.6 defaults kept)."""
    c.Autograde.sanitize_preprocessors = [
        ClearOutput, DeduplicateIds, OverwriteKernelspec, RepairCells, OverwriteCells,
        CheckCellMetadata]
    c.Autograde.autograde_preprocessors = [
        ResilientExecute, AuditSubmission, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]

