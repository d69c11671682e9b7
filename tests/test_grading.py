"""tutor.grading in a learner's kernel: the self-study time limit, an interrupt, a stale definition
left behind by a cell that raised, and the message for a deleted cell."""
import _thread
import os
import subprocess
import sys
import threading
import time

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from tools.paths import ROOT
from tutor.grading import INTERRUPTED_LINE, TIMEOUT_LINE, check, explain, report, test_cell


def _endless(x, axis=-1):
    while True:
        x = x + 0


def test_a_hanging_check_stops_after_the_time_limit_with_one_line(monkeypatch, capsys):
    """The check stops the endless stub itself (SIGALRM, main thread); a watchdog thread fails the test
    instead of letting it hang if it does not."""
    monkeypatch.setenv("TUTOR_CHECK_TIME_LIMIT", "0.5")
    finished = threading.Event()

    def watchdog():
        if not finished.wait(60):
            _thread.interrupt_main()  # the check did not stop: a KeyboardInterrupt ends it, and the test fails

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    try:
        assert report("softmax", _endless) is None
    finally:
        finished.set()
        guard.join(timeout=5)
    out = capsys.readouterr().out.strip()
    assert out == TIMEOUT_LINE.format(name="softmax", seconds=0.5), out  # one line


def test_a_hanging_self_study_cell_writes_one_line_to_stderr_and_goes_on(monkeypatch, capsys):
    monkeypatch.setenv("TUTOR_CHECK_TIME_LIMIT", "0.5")
    with test_cell("softmax_rows", keep_going=True):
        _endless(np.zeros(3))
    captured = capsys.readouterr()
    assert captured.err.strip().startswith(TIMEOUT_LINE.format(name="softmax_rows", seconds=0.5)), captured.err
    assert "Traceback" not in captured.err


def test_an_interrupted_check_is_one_line_and_still_fails_the_cell():
    def interrupted(x, axis=-1):
        raise KeyboardInterrupt

    with pytest.raises(Exception) as info:
        report("softmax", interrupted)
    assert info.value._render_traceback_() == [INTERRUPTED_LINE.format(name="softmax")]
    with pytest.raises(Exception) as info, test_cell("softmax_rows", keep_going=True):
        interrupted(np.zeros(3))
    assert info.value._render_traceback_() == [INTERRUPTED_LINE.format(name="softmax_rows")]
    with pytest.raises(Exception) as info, test_cell("softmax_is_stable", keep_going=True):  # a check inside
        check("softmax", interrupted)
    assert info.value._render_traceback_() == [INTERRUPTED_LINE.format(name="softmax")]


def test_no_time_limit_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("TUTOR_CHECK_TIME_LIMIT", "0.01")

    def slow_softmax(x, axis=-1):
        time.sleep(0.05)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    report("softmax", slow_softmax)
    assert capsys.readouterr().out.startswith("✅ softmax")


def test_a_deleted_cell_names_undo_and_make_reset(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", str(ROOT / "workspace" / "07_copy_task.ipynb"))
    try:
        print(make_copy_batch)  # noqa: F821 (the name a deleted exercise cell would have defined)
    except NameError as exc:
        text = explain("copy_batch_layout", exc, exc.__traceback__)
    assert "Undo Cell Operation" in text and "make reset CHAPTER=07_copy_task" in text, text


SOFTMAX = ("def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
           "    return e / e.sum(axis=axis, keepdims=True)")
STALE_NOTEBOOK = [
    "import numpy as np\nfrom tutor.grading import report, check, test_cell",
    SOFTMAX,
    "report('softmax', softmax)",
    "def softmax(x, axis=-1)\n    return x",                                     # a SyntaxError: not defined again
    "report('softmax', softmax)",
    "with test_cell('softmax_rows'):\n    check('softmax', softmax)",
    SOFTMAX + "  # fixed",
    "report('softmax', softmax)",
    "import functools\n\ndef logged(f):\n    @functools.wraps(f)\n    def wrapper(*args, **kwargs):\n"
    "        return f(*args, **kwargs)\n    return wrapper",
    "@logged\n" + SOFTMAX,                                                       # a decorated definition
    "report('softmax', softmax)",
    "@logged\ndef softmax(x, axis=-1)\n    return x",
    "report('softmax', softmax)",
    SOFTMAX + "\n",                                # the editor's last Enter: the text ends with a newline
    "report('softmax', softmax)",
    "def softmax(x, axis=-1):\n    return (x\n",     # does not compile either, and ends with a newline
    "report('softmax', softmax)",
]


@pytest.mark.slow
def test_a_cell_that_raised_leaves_the_older_definition_and_the_check_says_so(tmp_path):
    """In a real kernel (ipykernel names cells by a hash of their source): after the defining cell
    raised, report and check name that cell and the older one instead of passing the old definition."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in STALE_NOTEBOOK])
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120,  # the kernel inherits PYTHONPATH
                   resources={"metadata": {"path": tmp_path}}).execute()

    def text(i):
        return "".join(o.get("text", "") + "".join(o.get("traceback", [])) for o in nb.cells[i].outputs)

    assert text(2).startswith("✅ softmax")
    assert nb.cells[3].outputs and nb.cells[3].outputs[0].output_type == "error"      # the SyntaxError
    assert text(4).startswith("❌ softmax: 定义 softmax 的单元格 [4] 运行出错") and "cell [2]" in text(4), text(4)
    assert "✅" not in text(5) and "the cell [4] that defines softmax raised an error" in text(5), text(5)
    assert text(7).startswith("✅ softmax"), text(7)
    assert text(10).startswith("✅ softmax"), text(10)
    assert "单元格 [12] 运行出错" in text(12) and "from cell [10]" in text(12), text(12)  # through the wrapper
    assert text(14).startswith("✅ softmax"), text(14)
    assert "单元格 [16] 运行出错" in text(16) and "from cell [14]" in text(16), text(16)


def test_the_grading_module_sees_no_ipython_outside_a_kernel():
    code = ("from tutor.grading import _stale_definition\n"
            "def f(): pass\n"
            "assert _stale_definition(f) is None\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr

