"""The grading kernel's limits and one-line errors (grader/execution.py, grader/limits.py), and the
matching of renamed hand-ins (grader/handins.py).

The kernel tests run one small notebook through ``ResilientExecute`` as ``nbgrader autograde`` does;
the whole course goes through the same code in tests/test_class_simulation.py (a memory bomb, a
hang, renamed and self-study hand-ins).
"""
import asyncio
import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader.execution import ResilientExecute
from grader.handins import match

LOOP = "def spin():\n    while True:\n        pass\n"
BOMB = "def bomb():\n    keep = []\n    while True:\n        keep.append(bytearray(10**8))\n"


@pytest.fixture(scope="module")
def graded():
    """The cells' outputs of one notebook with a memory bomb, a hang called twice, a syntax
    error and a name its failed cell never defined, under a 2.5 GiB cap and a 10 s timeout (the bomb
    writes 2.5 GB before the cap stops it)."""
    nb = new_notebook(cells=[
        new_code_cell("import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)"),
        new_code_cell(BOMB + "bomb()"),
        new_code_cell("block = bytearray(500 * 10**6)  # fits once the bomb's memory is let go\nprint(len(block))"),
        new_code_cell(LOOP + "spin()"),
        new_code_cell("spin()  # the same hanging code again"),
        new_code_cell("def answer(:\n    return 42"),
        new_code_cell("print(answer())"),
        new_code_cell("print('still alive')"),
    ])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    executor = ResilientExecute(timeout=10, timeout_after_hang=2, memory_limit_mb=2560, cpu_limit_s=300)
    executor.preprocess(nb, {"metadata": {"path": "."}})
    return [cell.outputs for cell in nb.cells]


def _error(outputs):
    errors = [o for o in outputs if o.output_type == "error"]
    assert len(errors) == 1, outputs
    assert errors[0].traceback == [errors[0].evalue], "one line, no traceback"
    return errors[0].evalue


@pytest.mark.slow  # starts a kernel
def test_the_kernel_runs_under_the_memory_cap(graded):
    outputs = graded
    assert outputs[0][0].text.strip() == "2560"


@pytest.mark.slow  # starts a kernel
def test_a_memory_bomb_costs_its_own_cell_only(graded):
    outputs = graded
    assert "Out of memory" in _error(outputs[1]) and "2560 MiB" in _error(outputs[1])
    assert outputs[2][0].text.strip() == str(500 * 10**6), "the bomb's memory was not let go"


@pytest.mark.slow  # starts a kernel
def test_a_hang_costs_one_timeout_then_fails_fast(graded):
    outputs = graded
    assert "10 s" in _error(outputs[3]) and "Timed out" in _error(outputs[3])
    assert "2 s" in _error(outputs[4]), "the second call was given the full timeout again"


@pytest.mark.slow  # starts a kernel
def test_syntax_and_name_errors_read_as_one_line(graded):
    outputs = graded
    syntax = _error(outputs[5])
    assert syntax.startswith("❌ 语法错误（第 1 行）") and "SyntaxError (line 1)" in syntax and ".py" not in syntax
    name = _error(outputs[6])
    assert "answer" in name and "cell 6 has a syntax error" in name
    assert outputs[7][0].text.strip() == "still alive"


@pytest.mark.parametrize("files, expected, renamed", [
    (["01_attention (1).ipynb"], "01_attention", "01_attention (1).ipynb"),
    (["01_attention-alice.ipynb"], "01_attention", "01_attention-alice.ipynb"),
    (["alice_01_Attention.ipynb", "notes.txt"], "01_attention", "alice_01_Attention.ipynb"),
    (["01_attention.ipynb", "01_attention (1).ipynb"], "01_attention", None),  # the right name wins
])
def test_a_renamed_notebook_is_matched(tmp_path, files, expected, renamed):
    for name in files:
        (tmp_path / name).write_text("{}")
    renames, refusals = match(tmp_path, [expected])
    assert refusals == []
    assert renames == ({tmp_path / renamed: tmp_path / f"{expected}.ipynb"} if renamed else {})


@pytest.mark.parametrize("files", [["homework.ipynb"], ["01_attention (1).ipynb", "01_attention (2).ipynb"], []])
def test_an_unrecognisable_hand_in_is_refused_in_one_line(tmp_path, files):
    for name in files:
        (tmp_path / name).write_text("{}")
    renames, refusals = match(tmp_path, ["01_attention"])
    assert renames == {} and len(refusals) == 1
    assert "01_attention.ipynb" in refusals[0] and all(name in refusals[0] for name in files)
    assert "\n" not in refusals[0]


@pytest.mark.slow  # starts kernels
def test_kernels_are_forked_fresh_from_the_warm_server():
    """Two notebooks in a row: each kernel is forked by the fork server (torch already imported,
    though no cell imported it), is the first process of its own sandbox, and the second sees
    nothing the first defined."""
    probe = "import os, sys\nprint(os.getpid() == 1, 'torch' in sys.modules, 'secret' in globals())"
    outputs = []
    for first_line in ("secret = 42", "pass"):
        nb = new_notebook(cells=[new_code_cell(first_line), new_code_cell(probe)])
        nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
        ResilientExecute(timeout=60).preprocess(nb, {"metadata": {"path": "."}})
        outputs.append(nb.cells[1].outputs[0].text.split())
    assert outputs == [["True", "True", "True"], ["True", "True", "False"]]  # nothing of kernel_info's replies


def test_grading_kernels_are_ready_without_draining_iopub():
    """The kernel manager's clients skip jupyter_client's fixed 0.2 s IOPub drain (grader/limits.py);
    nbclient reads only a cell's own messages, as the outputs above show."""
    from grader.limits import LimitedKernelManager, ReadyClient

    assert LimitedKernelManager().client_factory is ReadyClient


class _Unanswered:
    """A shell channel on which no reply ever comes."""

    async def get_msg(self, timeout=None):
        raise Empty


@pytest.mark.parametrize(("alive", "message"), [(False, "Kernel died before replying to kernel_info"),
                                                (True, "Kernel didn't respond in 0 seconds")])
def test_a_kernel_that_never_answers_is_reported_not_waited_for(alive, message):
    """ReadyClient's two ways out when kernel_info gets no reply: the kernel died, or the time ran out."""
    from grader.limits import ReadyClient

    class Client(ReadyClient):
        shell_channel = _Unanswered()

        def kernel_info(self):
            pass

        async def _async_is_alive(self):
            return alive

    with pytest.raises(RuntimeError, match=re.escape(message)):
        asyncio.run(Client().wait_for_ready(timeout=0))


@pytest.mark.slow  # starts a kernel
def test_demo_marks_come_from_the_source_notebook_only(tmp_path):
    """A demo cell of the source notebook is not run; a demo mark the submission adds to a graded
    cell, a plain cell or an unlocked one changes nothing (a learner cannot skip a test)."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Configurable

    from grader.execution import DEMO_SKIPPED

    def cell(code, grade_id, locked=True, grade=False, demo=False):
        meta = {"nbgrader": {"grade_id": grade_id, "locked": locked, "grade": grade, "solution": False}}
        return new_code_cell(code, metadata=dict(meta, **({"demo": True} if demo else {})))

    source = new_notebook(cells=[cell("print('demo ran')", "demo_a", demo=True), cell("print('ran')", "test_b")])
    (tmp_path / "source" / "ch").mkdir(parents=True)
    (tmp_path / "source" / "ch" / "ch.ipynb").write_text(nbformat.writes(source))
    submission = new_notebook(cells=[cell("print('demo ran')", "demo_a", demo=True),
                                     cell("print('ran')", "test_b", grade=True, demo=True),
                                     cell("print('ran')", "plain_c", demo=True),
                                     cell("print('ran')", "demo_a", locked=False)])
    submission.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    converter = Configurable()
    converter.coursedir = CourseDirectory(root=str(tmp_path))
    ResilientExecute(parent=Configurable(parent=converter), timeout=30).preprocess(
        submission, {"metadata": {"path": str(tmp_path)}, "nbgrader": {"assignment": "ch", "notebook": "ch"}})
    texts = [[o.get("text") for o in c.outputs] for c in submission.cells]
    assert texts == [[DEMO_SKIPPED], ["ran\n"], ["ran\n"], ["ran\n"]]


def test_cell_metadata_validation_still_refuses_bad_metadata():
    """grader.hardening builds nbgrader's metadata validator once; a bad cell is still refused, with
    jsonschema's own error, and good metadata still passes."""
    from jsonschema import ValidationError
    from nbgrader.nbgraderformat import MetadataValidator

    good = {"grade": True, "grade_id": "g", "locked": True, "points": 2, "schema_version": 3, "solution": False,
            "task": False}
    nb = new_notebook(cells=[new_code_cell("1", metadata={"nbgrader": good})])
    with nbgrader_as_configured():
        MetadataValidator().validate_nb(nb)
        nb.cells[0].metadata["nbgrader"]["points"] = "two"
        with pytest.raises(ValidationError, match="'two' is not of type 'number'"):
            MetadataValidator().validate_nb(nb)


@contextlib.contextmanager
def nbgrader_as_configured():
    """nbgrader as ``grader.hardening.configure`` leaves it in an nbgrader process; put back after."""
    from nbgrader import api
    from nbgrader.nbgraderformat import common
    from traitlets.config import Config

    from grader import hardening

    with pytest.MonkeyPatch.context() as mp:
        for owner, name in ((common, "jsonschema"), (api.Gradebook, "__init__"), (api.Gradebook, "close")):
            mp.setattr(owner, name, getattr(owner, name))  # restored on exit
        hardening.configure(Config())
        yield


def test_gradebooks_share_one_engine_per_database_and_folder(tmp_path, monkeypatch):
    """Every Gradebook of a process on one database (a relative SQLite URL: in one folder) uses one
    engine, left open by close(); what one writes, the next reads; another folder gets its own."""
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # runs alembic
    with nbgrader_as_configured():
        engines = []
        for folder in ("a", "a", "b"):
            (tmp_path / folder).mkdir(exist_ok=True)
            monkeypatch.chdir(tmp_path / folder)
            with Gradebook("sqlite:///gradebook.db", course_id="c") as gb:
                gb.update_or_create_student(f"s{len(engines)}")
                engines.append(gb.engine)
                students = sorted(s.id for s in gb.students)
        assert engines[0] is engines[1] and engines[2] is not engines[0]
        assert engines[0].pool._pre_ping  # a connection the server dropped is replaced, not reused
        assert students == ["s2"]  # folder b's own database
        monkeypatch.chdir(tmp_path / "a")
        with Gradebook("sqlite:///gradebook.db", course_id="c") as gb:
            assert sorted(s.id for s in gb.students) == ["s0", "s1"]


@pytest.mark.slow  # starts a kernel
def test_the_cpu_cap_ends_a_kernel_that_burns_cpu():
    """Past ``cpu_limit_s`` CPU seconds the kernel is killed (SIGXCPU): the burning cell and every
    later one get the lost-kernel line, well before the cell's own timeout."""
    from grader.execution import KERNEL_LOST

    nb = new_notebook(cells=[new_code_cell("print('started')"), new_code_cell(LOOP + "spin()"),
                             new_code_cell("print('after')")])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ResilientExecute(timeout=120, cpu_limit_s=3).preprocess(nb, {"metadata": {"path": "."}})
    assert nb.cells[0].outputs[0].text.strip() == "started"
    for cell in nb.cells[1:]:
        assert any(o.output_type == "error" and o.evalue == KERNEL_LOST for o in cell.outputs), cell.outputs


@pytest.mark.slow  # starts a kernel
def test_without_a_fork_server_the_kernel_starts_directly_in_its_sandbox(monkeypatch, tmp_path):
    """The launcher falls back to starting the kernel itself when no fork server answers (a stale
    socket path): nothing is preloaded, and the kernel is still the first process of its sandbox."""
    from grader.limits import FORKSERVER_ENV

    monkeypatch.setenv(FORKSERVER_ENV, str(tmp_path / "gone.sock"))
    nb = new_notebook(cells=[new_code_cell("import os, sys\nprint(os.getpid(), 'torch' in sys.modules)")])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ResilientExecute(timeout=60).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert nb.cells[0].outputs[0].text.split() == ["1", "False"]


def test_the_cluster_command_says_what_is_missing():
    """`python -m grader.cluster grade` without a gradebook URL: one bilingual line and exit 1; no
    subcommand: argparse's usage and exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_DB_URL"}
    proc = subprocess.run([sys.executable, "-m", "grader.cluster", "grade"], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "请先设置 NBGRADER_DB_URL" in proc.stderr and "set NBGRADER_DB_URL" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grader.cluster"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.slow  # starts a task server (imports nbgrader)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the task server forks: Linux only")
def test_a_task_server_runs_nbgrader_and_reports_its_exit_code(tmp_path):
    """grader/taskserver.py on its own: a forked nbgrader writes to the task's log and its exit code
    comes back: 0 for a command that works, 1 for an assignment that does not exist."""
    from grader import taskserver

    server = taskserver.start_server(str(tmp_path))
    log = tmp_path / "task.log"
    assert taskserver.run(server, ["--version"], tmp_path, dict(os.environ), log) == 0
    assert log.read_text().strip()
    assert taskserver.run(server, ["autograde", "no_such_assignment"], tmp_path, dict(os.environ), log) == 1
