"""Entry points for notebooks: ``grade`` for nbgrader hidden tests, ``report`` for self-study.

    from tutor.grading import grade, report
    grade("MultiHeadAttention", MultiHeadAttention)   # prints one ✅ line, or raises AssertionError
    report("MultiHeadAttention", MultiHeadAttention)  # prints ✅ or ❌ with the diagnosis, never raises

``grade`` never writes to stderr on success (nbgrader gives 0 points to a grade cell that
does): warnings are silenced and the learner's own prints during the check are swallowed.
"""
import contextlib
import io
import sys
import types
import warnings

from . import checks, integrity

NOT_IMPLEMENTED_LINE = "❌ {name}: 尚未实现 / not implemented yet"
NO_REFERENCE_LINE = ("⚠️ {name}: 这个环境没有安装参考实现 solutions，自查无法运行（不影响评分）/ "
                     "the reference package solutions is not installed here, so this self-check cannot run "
                     "(grading is not affected)")


def _quiet_check(name, obj):
    """Run a check with warnings silenced and the learner's stdout/stderr captured."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        return checks.run_check(name, obj)


def grade(name, obj):
    """nbgrader hidden test: verify integrity, run the check, print ✅ or raise ``AssertionError``."""
    integrity.verify()
    result = _quiet_check(name, obj)
    if not result.passed:
        raise AssertionError(result.message)
    print(f"✅ {result.message}")


def report(name, obj):
    """Self-study check: print ✅ or ❌ with the message and the diagnosis; returns the ``CheckResult``."""
    try:
        result = _quiet_check(name, obj)
    except Exception as exc:  # never crash the notebook
        if isinstance(exc, ModuleNotFoundError) and exc.name == "solutions":  # a student image without it
            print(NO_REFERENCE_LINE.format(name=name))
        else:  # an unknown name or an internal error: say so
            print(f"❌ {name}: 检查无法运行 / the check could not run: {type(exc).__name__}: {exc}")
        return None
    if result.passed:
        print(f"✅ {result.message}")
    elif result.message.endswith(checks.NOT_IMPLEMENTED):
        print(NOT_IMPLEMENTED_LINE.format(name=name))
    else:
        print(f"❌ {result.message}")
    return result


class _LockedModule(types.ModuleType):
    """This module's functions cannot be replaced from a notebook (``tutor.grading.grade = ...``)."""

    def __setattr__(self, key, value):
        raise AttributeError(f"tutor.grading 是只读的 / tutor.grading is read-only ({key})")

    def __delattr__(self, key):
        raise AttributeError(f"tutor.grading 是只读的 / tutor.grading is read-only ({key})")


sys.modules[__name__].__class__ = _LockedModule
integrity.snapshot()
