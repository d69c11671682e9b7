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
import json

import jsonschema
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.nbgraderformat import common as nbgraderformat_common
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


class _CachedSchemaValidation:
    """Stands in for the ``jsonschema`` module in ``nbgrader.nbgraderformat.common``, whose one use is
    ``jsonschema.validate(cell_metadata, schema)`` for every cell, twice a notebook (``CheckCellMetadata``).
    That call checks the schema itself and builds a validator each time (about 1 ms a cell, 0.1 s a
    notebook); here both happen once per schema, and the error raised is the same (``best_match``)."""

    def __init__(self):
        self._validators = {}

    def validate(self, instance, schema):
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._validators[key] = cls(schema)
        error = jsonschema.exceptions.best_match(self._validators[key].iter_errors(instance))
        if error is not None:
            raise error


def configure(c):
    """Install the preprocessors above in nbgrader config ``c`` (nbgrader 0.9.6 defaults kept), and
    nbgrader's cell-metadata validation with its validator built once."""
    nbgraderformat_common.jsonschema = _CachedSchemaValidation()
    c.Autograde.sanitize_preprocessors = [
        ClearOutput, DeduplicateIds, OverwriteKernelspec, RepairCells, OverwriteCells,
        CheckCellMetadata]
    c.Autograde.autograde_preprocessors = [
        ResilientExecute, AuditSubmission, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]

