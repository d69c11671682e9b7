"""Entry points for notebooks: ``grade`` for nbgrader hidden tests, ``check``/``test_cell`` for the
visible tests, ``report`` for the ungraded self-checks.

    from tutor.grading import grade, report, check, test_cell
    grade("MultiHeadAttention", MultiHeadAttention)   # hidden test: prints one ✅ line, or raises TestFailure
    with test_cell("mha_matches_reference"):           # every graded cell's visible tests run inside this
        check("MultiHeadAttention", MultiHeadAttention)  # the same ✅/❌ report; ❌ ends the cell
        assert ...                                       # a failing assert becomes one bilingual ❌ line
    report("RMSNorm", RMSNorm)                          # prints ✅ or ❌ with the diagnosis, never raises

Every failure a learner sees is a ``TestFailure``: IPython shows only its report (it defines
``_render_traceback_``), so no frame, file path or grader internal reaches a notebook, the
Validate button or a feedback page. ``test_cell(..., keep_going=True)`` (the self-study edition)
writes the ❌ report to stderr instead of raising, so Run All goes on while nbgrader still counts
the cell as failed (a grade cell with stderr output scores 0).

``grade`` never writes to stderr on success (nbgrader gives 0 points to a grade cell that
does): warnings are silenced and the learner's own prints during the check are swallowed.

Outside nbgrader (which has its own per-cell timeout), a check and a self-study test cell stop the
learner's code after ``CHECK_TIME_LIMIT`` seconds, and a timeout or an interrupt (■) is reported
in one bilingual line instead of a traceback through torch. ``check`` and ``report`` also notice
when the newest cell that defines the object raised (a SyntaxError, say): the kernel then still
holds an older definition, and they say so instead of checking it.

In the learner's workspace, ``check``, ``report`` and ``test_cell`` also keep their verdict (and the
mistakes a check named) in the learner's own record, ``tutor.store`` (``tutor.progress()`` shows it);
``grade`` keeps nothing.
"""
import builtins
import contextlib
import inspect
import io
import linecache
import os
import re
import signal
import sys
import threading
import types
import warnings
from pathlib import Path

from . import checks, integrity, lang, store


def print(*args, **kwargs):
    """Every line this module shows, in the course language (``tutor.lang.text``: English only in the
    English edition; the tables below stay bilingual)."""
    builtins.print(*(lang.text(a) for a in args), **kwargs)


NOT_IMPLEMENTED_LINE = "❌ {name}: 尚未实现 / not implemented yet"
FINISH_FIRST_LINE = ("❌ {name}: 尚未实现，请先完成练习 {exercise} / "
                     "not implemented yet: finish exercise {exercise} first")
CANNOT_RUN_LINE = "❌ {name}: 检查无法运行 / the check could not run: {error}"
NO_REFERENCE_LINE = ("⚠️ {name}: 这个环境没有安装参考实现 solutions，自查无法运行（不影响评分）/ "
                     "the reference package solutions is not installed here, so this self-check cannot run "
                     "(grading is not affected)")
TIMEOUT_LINE = ("❌ {name}: 运行超过 {seconds} 秒，已停止：多半是死循环，或者算的远比需要的多 / "
                "still running after {seconds} s, stopped: most likely an endless loop or far more work than needed")
INTERRUPTED_LINE = "⏹️ {name}: 已中断 / interrupted"
STALE_LINE = ("❌ {name}: 定义 {obj} 的单元格 [{latest}] 运行出错，它的定义没有生效；"
              "内核里的 {obj} 还是单元格 [{older}] 的旧定义，这里不检查它。改好单元格 [{latest}] 并重新运行，"
              "再运行这一格 / "
              "the cell [{latest}] that defines {obj} "
              "raised an error, so its definition did not take effect: the kernel still holds the older {obj} from "
              "cell [{older}], which is not checked here. Fix cell [{latest}], run it, then run this cell again")
CHECK_TIME_LIMIT = 60  # seconds (the environment variable TUTOR_CHECK_TIME_LIMIT overrides it); nbgrader has its
#                       own per-cell timeout (c.Execute.timeout)


class CheckTimeout(BaseException):
    """The learner's code ran past ``CHECK_TIME_LIMIT``. A ``BaseException``, like ``KeyboardInterrupt``,
    so that no ``except Exception`` in the learner's code or in a check turns it into a finding."""


class Interrupted(Exception):
    """An interrupt during a check or a test cell: one line instead of a traceback; the cell still
    fails, so Run All stops as after any interrupt."""

    def __init__(self, line):
        super().__init__(lang.text(line))

    def _render_traceback_(self):
        return [str(self)]


@contextlib.contextmanager
def _time_limit():
    """Raise ``CheckTimeout`` in the block after the time limit: outside nbgrader, in the main thread,
    where SIGALRM exists and no timer is running already (a check inside a timed test cell)."""
    seconds = float(os.environ.get("TUTOR_CHECK_TIME_LIMIT", CHECK_TIME_LIMIT))
    if (os.environ.get("NBGRADER_EXECUTION") or not hasattr(signal, "SIGALRM")
            or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield
        return

    def expire(signum, frame):
        raise CheckTimeout(f"{seconds:g}")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _quiet_check(name, obj):
    """Run a check with warnings silenced, the learner's stdout/stderr captured and a time limit."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
            _time_limit():
        warnings.simplefilter("ignore")
        return checks.run_check(name, obj)


def _code_file(obj):
    """The file (an IPython cell's name) that defined a function, or a class's first own method; None."""
    members = vars(obj).values() if isinstance(obj, type) else [obj]
    for member in members:
        member = getattr(member, "__func__", getattr(member, "fget", member))  # staticmethod, property
        member = inspect.unwrap(member) if callable(member) else member        # @torch.no_grad() and the like
        code = getattr(member, "__code__", None)
        if code is not None:
            return code.co_filename
    return None


def _stale_definition(obj):
    """``(latest, older)`` when ``obj`` was defined by an earlier run ``older`` of a cell that defines its
    name at top level, and the newest such run ``latest`` did not define it (it raised first, or did not
    even compile): their execution counts. None otherwise: ``obj`` from the newest run, from no cell run
    found (a module, a wrapper), or outside IPython. A run is matched to ``obj`` by the source IPython
    compiled it from (kept in ``linecache`` under the code's file name), trailing whitespace aside."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    name, filename = getattr(obj, "__name__", None), _code_file(obj)
    if shell is None or not name or filename is None:
        return None
    compiled = "".join(linecache.getlines(filename)).rstrip()
    raw = shell.history_manager.input_hist_raw
    defines = re.compile(rf"^(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.MULTILINE)
    runs = [n for n in range(1, len(raw)) if defines.search(raw[n])]  # In[n] defines it
    if not compiled or not runs or raw[runs[-1]].rstrip() == compiled:
        return None
    older = next((n for n in reversed(runs[:-1]) if raw[n].rstrip() == compiled), None)
    return None if older is None else (runs[-1], older)


def _stale_line(name, obj, stale):
    latest, older = stale
    return STALE_LINE.format(name=name, obj=obj.__name__, latest=latest, older=older)


class TestFailure(AssertionError):
    """A failed test whose report is all a learner needs: IPython displays ``_render_traceback_``
    (the report lines) instead of a traceback."""

    __test__ = False  # not a pytest test class

    def __init__(self, report):
        report = lang.text(report)
        super().__init__(report)
        self.report = report

    def _render_traceback_(self):
        return self.report.split("\n")


_PASSED = {}  # check name -> (object, result) of the grade() that just passed, for check() after it


def _failure_line(name, obj, result):
    if result.not_implemented:
        return FINISH_FIRST_LINE.format(name=name, exercise=getattr(obj, "__name__", name))
    return f"❌ {result.message}"


def grade(name, obj):
    """nbgrader hidden test: verify integrity before and after the check (the learner's code runs
    inside it), run the check, print ✅ or raise ``TestFailure``."""
    _PASSED.pop(name, None)
    try:
        integrity.verify()
        result = _quiet_check(name, obj)
        integrity.verify()
    except AssertionError as exc:
        raise TestFailure(f"❌ {exc}") from None
    if not result.passed:
        raise TestFailure(_failure_line(name, obj, result)) from None
    print(f"✅ {result.message}")
    _PASSED[name] = (obj, result)


def check(name, obj):
    """Visible test: print the check's ✅ report, or raise ``TestFailure`` with the ❌ report.

    Right after ``grade(name, obj)`` passed on the same object (autograding runs the hidden test
    first) the check is not run twice. Without the reference package (a student image) it says
    so and lets the visible tests run."""
    graded = _PASSED.pop(name, None)
    if graded is not None and graded[0] is obj:
        return graded[1]
    stale = _stale_definition(obj)
    if stale:
        raise TestFailure(_stale_line(name, obj, stale))
    try:
        result = _quiet_check(name, obj)
    except CheckTimeout as exc:
        raise TestFailure(TIMEOUT_LINE.format(name=name, seconds=exc.args[0])) from None
    except KeyboardInterrupt:
        raise Interrupted(INTERRUPTED_LINE.format(name=name)) from None
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "solutions":
            print(NO_REFERENCE_LINE.format(name=name))
            return None
        raise TestFailure(CANNOT_RUN_LINE.format(name=name, error=f"{type(exc).__name__}: {exc}")) from None
    store.record_check(name, result)
    if not result.passed:
        raise TestFailure(_failure_line(name, obj, result)) from None
    print(f"✅ {result.message}")
    return result


def report(name, obj):
    """Self-study check: print ✅ or ❌ with the message and the diagnosis; returns the ``CheckResult``."""
    stale = _stale_definition(obj)
    if stale:
        print(_stale_line(name, obj, stale))
        return None
    try:
        result = _quiet_check(name, obj)
    except CheckTimeout as exc:
        print(TIMEOUT_LINE.format(name=name, seconds=exc.args[0]))
        return None
    except KeyboardInterrupt:
        raise Interrupted(INTERRUPTED_LINE.format(name=name)) from None
    except Exception as exc:  # never crash the notebook
        if isinstance(exc, ModuleNotFoundError) and exc.name == "solutions":  # a student image without it
            print(NO_REFERENCE_LINE.format(name=name))
        else:  # an unknown name or an internal error: say so
            print(CANNOT_RUN_LINE.format(name=name, error=f"{type(exc).__name__}: {exc}"))
        return None
    store.record_check(name, result)
    if result.passed:
        print(f"✅ {result.message}")
    elif result.not_implemented:
        print(NOT_IMPLEMENTED_LINE.format(name=name))
    else:
        print(f"❌ {result.message}")
    return result


def _frames(tb):
    """(frame, line number) of each traceback entry, outermost first."""
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return frames


_LIBRARY = re.compile(r"(site-packages|dist-packages|/lib/python3|/tutor/|<frozen )")


def _where(frame, lineno):
    """'Name.method, 第 N 行 / line N: code' of a frame in a notebook cell (line numbers are the cell's)."""
    code = linecache.getline(frame.f_code.co_filename, lineno, frame.f_globals).strip()
    name = frame.f_code.co_qualname
    place = "" if name == "<module>" else f"{name}, "
    return f"{place}第 {lineno} 行 / line {lineno}: {code}"


def _short(exc):
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def explain(grade_id, exc, tb):
    """One bilingual ❌ line (plus where) for an exception raised in a test cell's body."""
    if isinstance(exc, TestFailure):
        return exc.report
    frames = _frames(tb)
    cell_frame = frames[0][0] if frames else None
    learner = [(f, n) for f, n in frames if not _LIBRARY.search(f.f_code.co_filename)]
    inner_frame, inner_line = learner[-1] if learner else (frames[-1] if frames else (None, 0))
    in_test = inner_frame is cell_frame  # raised by the test cell's own code, not by a function it called
    where = f"\n  ({_where(inner_frame, inner_line)})" if inner_frame is not None else ""
    if isinstance(exc, NameError):
        name = getattr(exc, "name", None) or _short(exc)
        chapter = Path(os.environ.get("JPY_SESSION_NAME", "")).stem or "<本章文件名 / this notebook's name>"
        return (f"❌ {grade_id}: {name} 还没有定义：请先运行定义它的单元格（或从头 Run All）。那个单元格被删掉了的话，"
                f"用 Edit → Undo Cell Operation（命令模式下按 Z）找回；找不回就在终端运行 make reset CHAPTER={chapter}"
                f"（整章恢复成空白，旧文件备份在 workspace/backup/）/ {name} is not defined yet: run the cell that "
                f"defines it first (or Run All from the top). If that cell was deleted, Edit → Undo Cell Operation (Z "
                f"in command mode) brings it back; otherwise run make reset CHAPTER={chapter} in a terminal (the whole "
                f"chapter back to blank, the old file kept in workspace/backup/)")
    if isinstance(exc, NotImplementedError) and not in_test:
        stub = inner_frame.f_code.co_qualname
        exercise = stub.split(".")[0]
        return FINISH_FIRST_LINE.format(name=grade_id, exercise=exercise) + f" ({stub} 还是占位代码 / is still a stub)"
    if isinstance(exc, AssertionError) and in_test:
        return f"❌ {grade_id}: {_short(exc) or '断言失败 / assertion failed'}{where}"
    if in_test:
        return (f"❌ {grade_id}: 可见测试无法继续 / the visible tests could not go on: "
                f"{type(exc).__name__}: {_short(exc)}{where}\n"
                f"  多半是返回值的类型或形状不对，对照上面的约定检查 / most likely a return value has the wrong "
                f"type or shape: compare it with the contract above")
    return (f"❌ {grade_id}: 你的代码出错 / your code raised {type(exc).__name__}: {_short(exc)}{where}")


class test_cell:
    """Context manager around a graded cell's visible tests.

    ``with test_cell("mha_output_shapes"):`` prints ``✅ mha_output_shapes: 可见测试通过 / visible
    tests passed`` when the body finishes, and turns any exception into one bilingual ❌ report
    (``explain``): raised as ``TestFailure`` (source and release editions: the cell fails, as nbgrader
    needs), or written to stderr with ``keep_going=True`` (self-study edition: Run All goes on, and
    Validate still sees the failure). The self-study edition's cell runs under ``CHECK_TIME_LIMIT``
    (a timeout is one more ❌ report); an interrupt becomes one ``Interrupted`` line; other
    non-``Exception`` errors pass.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, grade_id, keep_going=False):
        self.grade_id, self.keep_going = grade_id, keep_going
        self._limit = _time_limit() if keep_going else contextlib.nullcontext()

    def __enter__(self):
        self._limit.__enter__()
        return self

    def __exit__(self, etype, exc, tb):
        self._limit.__exit__(None, None, None)
        if etype is None:
            store.record_cell(self.grade_id, True)
            print(f"✅ {self.grade_id}: 可见测试通过 / visible tests passed")
            return False
        if issubclass(etype, KeyboardInterrupt):
            raise Interrupted(INTERRUPTED_LINE.format(name=self.grade_id)) from None
        if issubclass(etype, Interrupted):  # a check in the body was interrupted and said so in its one line
            return False
        if issubclass(etype, Exception) or issubclass(etype, CheckTimeout):
            store.record_cell(self.grade_id, False)
        if issubclass(etype, CheckTimeout):
            report_text = TIMEOUT_LINE.format(name=self.grade_id, seconds=exc.args[0])
        elif not issubclass(etype, Exception):
            return False
        else:
            report_text = explain(self.grade_id, exc, tb)
        if self.keep_going:
            sys.stdout.flush()
            print(report_text, file=sys.stderr, flush=True)
            return True
        if isinstance(exc, TestFailure):
            return False
        raise TestFailure(report_text) from None


class _LockedModule(types.ModuleType):
    """This module's functions cannot be replaced from a notebook (``tutor.grading.grade = ...``)."""

    def __setattr__(self, key, value):
        raise AttributeError(f"tutor.grading 是只读的 / tutor.grading is read-only ({key})")

    def __delattr__(self, key):
        raise AttributeError(f"tutor.grading 是只读的 / tutor.grading is read-only ({key})")


sys.modules[__name__].__class__ = _LockedModule
integrity.snapshot()
