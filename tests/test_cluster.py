"""Grading a class on Dask distributed (grader/cluster.py) with the real processes: a scheduler and two
workers started by ``grader.cluster.start``, a private PostgreSQL gradebook (tools/postgres.sh).

- the grades equal those of the serial ``nbgrader autograde`` (SQLite), cell by cell;
- a worker killed with SIGKILL while it grades loses nothing: its task runs again on the other
  worker, and the gradebook ends complete and equal;
- running the same command again changes nothing;
- a submission whose kernel dies is graded as it is serially (in the equality above).

Skips, saying why, where the PostgreSQL server programs, its driver or Dask are not installed
(``.ci/run`` installs them).
"""
import glob
import importlib.util
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time

import pytest

from grader import cluster
from tools import simulate_class as sim

pytestmark = pytest.mark.slow  # real nbgrader runs and processes: `make test-fast` leaves them out

ASSIGNMENT = "01_attention"
STUDENTS = ["perfect", "untouched", "classic_mistake", "kernel_dies"]

if not (shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")):
    pytest.skip("PostgreSQL server programs not installed (Debian/Ubuntu: apt-get install postgresql)",
                allow_module_level=True)
for module, extra in (("psycopg", "postgres"), ("distributed", "cluster")):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f'{module} not installed (.venv/bin/pip install -e ".[{extra}]")', allow_module_level=True)


def _hand_in_class(course):
    info = sim.analyse(ASSIGNMENT, sim.ROOT / "source")
    for student in STUDENTS:
        sim.hand_in(course, student, ASSIGNMENT, sim.make_submission(student, info))


def _scores(course, db_url=None):
    """{(student, assignment, grade_id): score} as the gradebook holds it."""
    return {(s, a, g): grade.score for (s, a), cells in sim.read_gradebook(course, db_url).items()
            for g, grade in cells.items()}


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    assert "NBGRADER_DB_URL" not in os.environ, "the serial run grades into SQLite"
    course = tmp_path_factory.mktemp("serial")
    sim.setup_course(course, [ASSIGNMENT], sim.ROOT / "source", timeout=60)
    _hand_in_class(course)
    codes = {s: sim.nbgrader(course, "autograde", ASSIGNMENT, "--student", s, check=False).returncode
             for s in STUDENTS}  # one command per hand-in, as a cluster task runs it
    return _scores(course), codes


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """(course, db url, client): a course on PostgreSQL and a cluster of two workers."""
    course = tmp_path_factory.mktemp("cluster")
    with sim.private_postgres() as db_url:
        sim.setup_course(course, [ASSIGNMENT], sim.ROOT / "source", timeout=60)
        _hand_in_class(course)
        cluster.start(course, workers=2)
        try:
            with cluster.client_for(course, workers=2) as client:
                yield course, db_url, client
        finally:
            pids = cluster.running_pids(course)
            cluster.stop(course)
        assert not [name for name, pid in pids.items() if cluster.alive(pid)], "stop left processes running"


def _grade(running):
    course, db_url, client = running
    return cluster.grade(client, course, db_url, [ASSIGNMENT], log=lambda *_: None)


def test_cluster_grades_equal_the_serial_run(serial, running):
    codes = _grade(running)
    assert set(codes) == {(ASSIGNMENT, s) for s in STUDENTS}
    assert _scores(running[0], running[1]) == serial[0]


def test_a_killed_worker_loses_nothing(serial, running):
    """From an empty gradebook (the tests before filled it): a worker is SIGKILLed mid-notebook; every
    task still ends with the exit code the serial command had, and the grades are complete and equal."""
    from nbgrader.api import Gradebook

    course, db_url, _ = running
    with Gradebook(db_url, course_id=cluster.course_id(course)) as gb:
        for student in STUDENTS:
            gb.remove_submission(ASSIGNMENT, student)
    assert cluster.incomplete(course, db_url, [(ASSIGNMENT, s) for s in STUDENTS]), "the gradebook is not empty"
    victim = cluster.running_pids(course)["worker-0"]
    done, killed = threading.Event(), []

    def kill_while_grading():
        import psutil

        def command(process):
            try:
                return " ".join(process.cmdline())
            except psutil.Error:  # gone, or a zombie not yet reaped, between listing and reading
                return ""

        while not done.is_set():
            # a grading kernel's launcher below the worker: a task is half-way through a notebook
            if any("grader.launcher" in command(p) for p in psutil.Process(victim).children(recursive=True)):
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=kill_while_grading)
    watcher.start()
    try:
        codes = _grade(running)
    finally:
        done.set()
        watcher.join()
    assert killed, "worker-0 never graded anything, so it was not killed mid-task"
    assert codes == {(ASSIGNMENT, s): code for s, code in serial[1].items()}
    assert not cluster.alive(victim)
    assert cluster.incomplete(course, db_url, [(ASSIGNMENT, s) for s in STUDENTS]) == []
    assert _scores(course, db_url) == serial[0]


def test_grading_again_changes_nothing(serial, running):
    _grade(running)
    assert _scores(running[0], running[1]) == serial[0]


def test_the_command_line_grades_with_one_task_server_per_worker(serial, running):
    """`python -m grader.cluster grade`, as INSTRUCTOR §7 runs it, twice: the grades are the serial
    ones, and each worker keeps one task server for all its tasks (the module run as __main__ once
    shipped its tasks by value, and every task started a task server of its own)."""
    import psutil

    course, db_url, _ = running
    env = dict(os.environ, NBGRADER_DB_URL=db_url)
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "grader.cluster", "grade", ASSIGNMENT], cwd=course, env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _scores(course, db_url) == serial[0]
    workers = [psutil.Process(pid) for name, pid in cluster.running_pids(course).items()
               if name != "scheduler" and cluster.alive(pid)]
    servers = [p for w in workers for p in w.children(recursive=True) if "grader.taskserver" in " ".join(p.cmdline())]
    assert len(servers) <= len(workers), [" ".join(p.cmdline()) for p in servers]


def test_only_the_certificate_holder_reaches_the_scheduler(running):
    """The scheduler speaks mutual TLS: a client without the cluster's certificate is refused, and
    the address and the certificate sit in a folder only the instructor can enter."""
    import json

    from distributed import Client

    course = running[0]
    state = course / cluster.STATE
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "scheduler.json").stat().st_mode) == 0o600
    address = json.loads((state / "scheduler.json").read_text())["address"]
    assert address.startswith("tls://"), address
    with pytest.raises((OSError, TimeoutError)):  # plain TCP to a TLS listener
        Client(address.replace("tls://", "tcp://"), timeout=3).close()
    ca = cluster.certificates(state)[0]
    context = ssl.create_default_context(cafile=str(ca))  # trusts the scheduler, shows no certificate
    context.check_hostname = False
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):  # TLS 1.3: the refusal follows the handshake
            with context.wrap_socket(raw) as tls:
                tls.recv(1)
    with Client(address, security=cluster.security(course), timeout=30) as client:  # the holder gets in
        assert client.scheduler_info()["workers"]
