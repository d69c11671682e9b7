"""Code run during grading, as an attacker writes it: each attack of the threat model (docs/INSTRUCTOR.md,
"Security") tried from inside a grading kernel, and shown blocked by the sandbox (grader/sandbox.py).

One notebook of attack cells runs through ``ResilientExecute`` exactly as ``nbgrader autograde`` runs a
submission (fork server, limits, sandbox), from a folder laid out like ``autograded/<student>/<assignment>``
of a course; each cell prints one line, ``<attack>: <what happened>``. The feedback side (nothing the
code prints reaches a student) is proven end to end through nbgrader in tests/test_feedback.py.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader import sandbox
from grader.execution import ResilientExecute
from tools.paths import ROOT

pytestmark = [pytest.mark.slow,  # starts kernels
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux namespaces")]

MARK = f"sandbox-test-{uuid.uuid4().hex[:8]}"  # names the detached process this run leaves, if any
DETACHED = ["python", "-c", "import time; time.sleep(600)"]  # argv of a process that outlives the notebook, MARK last

# attack name -> cell code; the cell prints "<name>: <outcome>" (an exception's class when blocked)
ATTACKS = {
    "read_gradebook": "open({gradebook!r}, 'rb').read(16)",
    "read_hidden_tests": "sorted(os.listdir({source!r}))",
    "read_answer_keys": "sorted(os.listdir({answer_keys!r}))",
    "read_other_submission": "open({other!r}).read()",
    "read_owner_home": "sorted(os.listdir({home!r}))",
    "write_config_open": "open({config!r}, 'a').write('c.X = 1')",
    "write_config_path_open": "pathlib.Path({config!r}).open('a').write('c.X = 1')",
    "write_config_os_open": "os.write(os.open({config!r}, os.O_WRONLY | os.O_APPEND), b'c.X = 1')",
    "copy_into_course": "shutil.copyfile('attack.ipynb', {course_copy!r})",
    "write_reference": "open({reference!r}, 'a').write('# planted')",
    "plant_startup_file": ("p = pathlib.Path({startup!r})\np.parent.mkdir(parents=True, exist_ok=True)\n"
                           "p.write_text('print(\"planted\")')"),
    "sqlite_gradebook": "sqlite3.connect({gradebook!r}).execute('update grade set manual_score = 10').rowcount",
    "network": "socket.create_connection(('127.0.0.1', {port}), timeout=2).close()",
    "see_other_processes": "sorted(int(p) for p in os.listdir('/proc') if p.isdigit())",
    "environment_secrets": "sorted(k for k in os.environ if 'SECRET' in k or k.startswith('NBGRADER_DB'))",
    "detached_process": ("os.posix_spawn(sys.executable, DETACHED + [{mark!r}], os.environ, setsid=True)\n'spawned'"),
    "write_scratch": "open('scratch.txt', 'w').write('x')",
    "read_reference": "len(open({reference!r}).read()) > 0",
    "read_system_secrets": "[open(p).read() for p in ('/etc/shadow', '/etc/gshadow') if os.path.exists(p)]",
}


def _cell(name, code):
    lines = code.splitlines()
    body = "\n".join(f"    {line}" for line in lines[:-1])
    return (f"try:\n{body + chr(10) if body else ''}    outcome = repr({lines[-1]})\n"
            f"except Exception as exc:\n    outcome = type(exc).__name__\nprint('{name}:', outcome)")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """{attack: outcome} of one notebook graded in ``<course>/autograded/mallory/01_attention``, with a
    classmate's submission beside it, a listening TCP server and secrets in the grader's environment."""
    course = tmp_path_factory.mktemp("course")
    workdir = course / "autograded" / "mallory" / "01_attention"
    other = course / "autograded" / "alice" / "01_attention" / "01_attention.ipynb"
    for folder in (workdir, other.parent, course / "source" / "01_attention"):
        folder.mkdir(parents=True)
    other.write_text("alice's work")
    (course / "gradebook.db").write_bytes(b"SQLite format 3\0")
    server = socket.create_server(("127.0.0.1", 0))
    paths = dict(gradebook=str(course / "gradebook.db"), source=str(ROOT / "source"),
                 answer_keys=str(ROOT / "answer_keys"), other=str(other), home=os.path.expanduser("~"),
                 config=str(ROOT / "nbgrader_config.py"), course_copy=str(course / "planted.ipynb"),
                 reference=str(ROOT / "solutions" / "attention.py"),
                 startup=os.path.expanduser("~/.ipython/profile_default/startup/00-planted.py"),
                 port=server.getsockname()[1], mark=MARK)
    setup = new_code_cell(f"import os, pathlib, shutil, socket, sqlite3, sys\nDETACHED = {DETACHED!r}")
    nb = new_notebook(cells=[setup] + [new_code_cell(_cell(n, c.format(**paths))) for n, c in ATTACKS.items()])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    config_before = (ROOT / "nbgrader_config.py").read_bytes()
    os.environ.update(NBGRADER_DB_URL="postgresql://grader:SECRET@localhost/gradebook", HUB_SECRET_TOKEN="x")
    try:
        ResilientExecute(timeout=30).preprocess(nb, {"metadata": {"path": str(workdir)}})
    finally:
        del os.environ["NBGRADER_DB_URL"], os.environ["HUB_SECRET_TOKEN"]
        server.close()
    lines = [o.text for c in nb.cells for o in c.outputs if o.output_type == "stream"]
    outcomes = dict(line.split(": ", 1) for text in lines for line in text.splitlines()
                    if line.split(": ", 1)[0] in ATTACKS)
    errors = [f"{o.ename}: {o.evalue}" for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert set(outcomes) == set(ATTACKS), f"attacks that reported nothing: {set(ATTACKS) - set(outcomes)}; {errors}"
    return outcomes, course, workdir, config_before, paths


@pytest.mark.parametrize("attack", ["read_gradebook", "read_hidden_tests", "read_answer_keys",
                                    "read_other_submission"])
def test_a_kernel_cannot_read_what_is_not_its_own(attacked, attack):
    """The gradebook, source/ (hidden tests), answer_keys/ and a classmate's submission do not exist
    in the kernel's file system."""
    outcomes = attacked[0]
    assert outcomes[attack] == "FileNotFoundError", outcomes


def test_the_owners_home_shows_only_the_python_installed_in_it(attacked):
    """The owner's home does not exist in the kernel, but for the folders on the way to what the kernel
    must read (a Python installed under it, e.g. ~/.pyenv)."""
    outcomes, *_, paths = attacked
    home = paths["home"].rstrip("/") + "/"
    on_the_way = {p[len(home):].split("/")[0] for p in sandbox.readable_paths() if p.startswith(home)}
    if outcomes["read_owner_home"] != "FileNotFoundError":
        assert set(eval(outcomes["read_owner_home"])) <= on_the_way, outcomes  # noqa: S307 (a repr of a list of names)


@pytest.mark.parametrize("attack", ["write_config_open", "write_config_path_open", "write_config_os_open",
                                    "copy_into_course", "write_reference", "sqlite_gradebook"])
def test_a_kernel_cannot_write_into_the_course(attacked, attack):
    """nbgrader_config.py, the gradebook and the rest of the course are absent; the reference is
    read-only: every route of writing fails, and the files are unchanged."""
    outcomes, course, _, config_before, paths = attacked
    assert outcomes[attack] in ("FileNotFoundError", "OSError", "OperationalError", "PermissionError"), outcomes
    assert (ROOT / "nbgrader_config.py").read_bytes() == config_before
    assert not (course / "planted.ipynb").exists()
    assert "# planted" not in (ROOT / "solutions" / "attention.py").read_text()
    assert (course / "gradebook.db").read_bytes() == b"SQLite format 3\0"


def test_a_startup_file_planted_in_home_reaches_no_later_kernel(attacked):
    """$HOME is a fresh tmpfs: the planted IPython startup file is written there and gone with the kernel."""
    outcomes, *_, paths = attacked
    assert outcomes["plant_startup_file"] == "FileNotFoundError" or not os.path.exists(paths["startup"]), outcomes
    assert not os.path.exists(paths["startup"])


def test_a_kernel_writes_only_a_scratch_copy_that_is_thrown_away(attacked):
    outcomes, _, workdir, *_ = attacked
    assert outcomes["write_scratch"] == "1", outcomes
    assert not (workdir / "scratch.txt").exists()


def test_a_kernel_has_no_network(attacked):
    outcomes = attacked[0]
    assert outcomes["network"] == "OSError", outcomes  # ENETUNREACH: no interface is up


def test_a_kernel_sees_only_its_own_processes_and_no_secret(attacked):
    outcomes = attacked[0]
    assert outcomes["see_other_processes"].startswith("[1"), outcomes  # it is PID 1 of its namespace
    assert outcomes["environment_secrets"] == "[]", outcomes


def test_a_detached_process_dies_with_its_kernel(attacked):
    """os.posix_spawn(..., setsid=True) started a process; the notebook is over and it is gone."""
    outcomes = attacked[0]
    assert outcomes["detached_process"] == "'spawned'", outcomes
    left = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout.split()
    assert not left, f"processes left behind: {left}"


def test_the_same_detached_process_outside_the_sandbox_lives_on():
    """The control of the test above: spawned the same way outside a grading kernel, the process is still there
    for pgrep to find (so an empty pgrep above means the sandbox ended it, not that it never lived)."""
    mark = f"{MARK}-control"
    pid = os.posix_spawn(sys.executable, DETACHED + [mark], os.environ, setsid=True)
    try:
        time.sleep(1)
        found = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split()
        assert str(pid) in found, f"the control process {pid} is not found: {found}"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_the_systems_secrets_read_empty_even_when_root_grades(attacked):
    """/etc is readable, but a kernel started by root (a container, CI) owns /etc/shadow: the sandbox
    mounts an empty file over each secret of grader.sandbox.MASKED."""
    assert set(eval(attacked[0]["read_system_secrets"])) <= {""}, attacked[0]  # noqa: S307 (a repr of a list)


def test_the_checks_can_still_read_their_reference(attacked):
    """What the checks import stays readable (read-only): the reference is compared in the kernel."""
    assert attacked[0]["read_reference"] == "True"


def test_the_sandbox_probe_says_yes_here():
    assert sandbox.probe() is None
