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
- ``RecordFindings`` (``grader/findings.py``, after the audit): what each graded cell found (passed,
  the kind of failure, the named mistakes, the failing case, the score) into a table of its own in
  the gradebook, for the class report (``python -m grader.insight``).

Their settings are traitlets with help strings (``nbgrader autograde --help-all``), set in
``nbgrader_config.py``. ``configure(c)`` installs them in an nbgrader config object, with two
speed-ups of nbgrader's own work per notebook (the cell-metadata validator built once, one
database engine per process).
"""
import functools
import json
import os

import jsonschema
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader import api
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
from grader.findings import RecordFindings
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


_ENGINES = {}  # (database URL, working directory) -> the engine every Gradebook of this process shares
_gradebook_init, _gradebook_close = api.Gradebook.__init__, api.Gradebook.close


def _shared_engine_init(self, db_url, course_id="default_course", authenticator=None):
    """``Gradebook.__init__`` with one SQLAlchemy engine per database for the whole process.

    nbgrader opens a ``Gradebook`` about 11 times a notebook; each built an engine, inspected the
    tables and ran ``create_all`` (13 ms each on SQLite, 0.14 s a notebook). The first one per URL
    still does all of that; the others only open a session on its engine and check the course.
    The shared engine tests a pooled connection before reusing it (``pool_pre_ping``), so a
    long-lived process (JupyterLab's formgrader) outlives a restart of the PostgreSQL server."""
    key = (db_url, os.getcwd())  # a relative SQLite path names another file in another folder
    engine = _ENGINES.get(key)
    if engine is None:
        plain = api.create_engine
        api.create_engine = functools.partial(plain, pool_pre_ping=True)  # what nbgrader's __init__ calls
        try:
            _gradebook_init(self, db_url, course_id, authenticator)
        finally:
            api.create_engine = plain
        _ENGINES[key] = self.engine
        return
    self.engine = engine
    self.db = api.scoped_session(api.sessionmaker(autoflush=True, bind=engine, future=True))
    self.check_course(course_id=course_id)
    self.course_id, self.authenticator = course_id, authenticator


def _shared_engine_close(self):
    """``Gradebook.close``: the session ends; a shared engine stays open for the next Gradebook."""
    if self.engine in _ENGINES.values():
        self.db.remove()
    else:
        _gradebook_close(self)


def configure(c):
    """Install the preprocessors above in nbgrader config ``c`` (nbgrader 0.9.6 defaults kept),
    nbgrader's cell-metadata validation with its validator built once, and one gradebook engine
    per process (a process is one nbgrader command: a cluster task is a process of its own)."""
    nbgraderformat_common.jsonschema = _CachedSchemaValidation()
    api.Gradebook.__init__, api.Gradebook.close = _shared_engine_init, _shared_engine_close
    c.Autograde.sanitize_preprocessors = [
        ClearOutput, DeduplicateIds, OverwriteKernelspec, RepairCells, OverwriteCells,
        CheckCellMetadata]
    c.Autograde.autograde_preprocessors = [
        ResilientExecute, AuditSubmission, RecordFindings, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]

