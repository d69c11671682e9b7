"""Parallel grading against PostgreSQL, as docs/INSTRUCTOR.md describes it: tools/postgres.sh starts
a private server, NBGRADER_DB_URL points nbgrader_config.py at it, and several
``nbgrader autograde --student`` processes write to one gradebook at the same time.

Skips where the PostgreSQL server programs (Debian: ``apt-get install postgresql``) or the driver
(``pip install -e ".[postgres]"``) are missing.
"""
import glob
import importlib.util
import os
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from tools import simulate_class as sim
from tools.paths import ROOT

pytestmark = pytest.mark.slow  # real nbgrader runs: `make test-fast` leaves them out

ASSIGNMENT = "01_attention"
STUDENTS = {"ada_perfect": "perfect", "bob_untouched": "untouched", "cy_perfect": "perfect"}

if not (shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")):
    pytest.skip("PostgreSQL server programs not installed (Debian/Ubuntu: apt-get install postgresql)",
                allow_module_level=True)
if importlib.util.find_spec("psycopg") is None:
    pytest.skip('PostgreSQL driver not installed (.venv/bin/pip install -e ".[postgres]")', allow_module_level=True)


@pytest.fixture(scope="module")
def db_url():
    """A private server of its own (``tools.simulate_class.private_postgres``)."""
    with sim.private_postgres() as url:
        yield url


def test_parallel_autograde_into_one_postgresql_gradebook(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("NBGRADER_DB_URL", db_url)
    course = tmp_path / "course"
    course.mkdir()
    sim.setup_course(course, [ASSIGNMENT], ROOT / "source")  # records the assignment in PostgreSQL
    info = sim.analyse(ASSIGNMENT, ROOT / "source")
    for student, kind in STUDENTS.items():
        sim.hand_in(course, student, ASSIGNMENT, sim.make_submission(kind, info))
    assert not (course / "gradebook.db").exists(), "the gradebook must be PostgreSQL, not SQLite"

    with ThreadPoolExecutor(len(STUDENTS)) as pool:  # all at once
        procs = dict(zip(STUDENTS, pool.map(
            lambda s: sim.nbgrader(course, "autograde", ASSIGNMENT, "--student", s, check=False), STUDENTS)))
    failed = {s: (proc.stdout + proc.stderr)[-3000:] for s, proc in procs.items() if proc.returncode != 0}
    assert not failed, failed

    full = sum(info.points.values())
    with Gradebook(db_url, course_id="shousi-transformer") as gb:
        scores = {s: gb.find_submission(ASSIGNMENT, s).score for s in STUDENTS}
    assert scores == {s: (full if kind == "perfect" else 0.0) for s, kind in STUDENTS.items()}, scores


def test_the_grading_role_is_no_superuser_and_runs_no_program(db_url):
    """The URL's role owns the gradebook and nothing more: ``COPY ... TO PROGRAM`` (a command run as
    the server's account) is refused."""
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).scalar() is False
        with pytest.raises(sa.exc.ProgrammingError, match="superuser|pg_execute_server_program"):
            conn.execute(sa.text("COPY (SELECT 1) TO PROGRAM 'id'"))
    engine.dispose()


@pytest.mark.skipif(os.geteuid() != 0, reason="trying another local account needs root (runuser)")
def test_another_local_account_cannot_reach_the_gradebook(db_url):
    """As `nobody` (any local account but the grader's): the socket's folder is 0700, so psql cannot
    even connect, whatever role it asks for."""
    socket_dir = db_url.split("host=")[1]
    assert stat.S_IMODE(os.stat(socket_dir).st_mode) == 0o700
    psql = shutil.which("psql") or sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1]
    for role in ("grader", "postgres"):
        proc = subprocess.run(["runuser", "-u", "nobody", "--", psql, "-h", socket_dir, "-U", role, "-d", "gradebook",
                               "-c", "SELECT 1"], capture_output=True, text=True)
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, proc.stderr


def test_the_shared_gradebook_engine_outlives_a_server_restart(db_url, monkeypatch):
    """A long-lived process (JupyterLab's formgrader) keeps one gradebook engine (grader/hardening.py);
    the server restarts under it, and the next Gradebook still works: the engine pings a pooled
    connection before reusing it, where a dead one would raise OperationalError."""
    from nbgrader import api

    from grader import hardening

    monkeypatch.setattr(api.Gradebook, "__init__", hardening._shared_engine_init)
    monkeypatch.setattr(api.Gradebook, "close", hardening._shared_engine_close)
    monkeypatch.setattr(hardening, "_ENGINES", {})
    with api.Gradebook(db_url, course_id="shousi-transformer") as gb:
        gb.update_or_create_student("restart_probe")
    env = dict(os.environ, POSTGRES_DIR=str(Path(db_url.split("host=")[1]).parent))
    script = str(ROOT / "tools" / "postgres.sh")
    subprocess.run([script, "stop"], env=env, check=True)
    subprocess.run([script, "start"], env=env, check=True, capture_output=True)
    try:
        with api.Gradebook(db_url, course_id="shousi-transformer") as gb:
            assert "restart_probe" in {s.id for s in gb.students}
        assert len(hardening._ENGINES) == 1, "the second Gradebook did not reuse the engine"
    finally:
        for engine in hardening._ENGINES.values():  # a process's shared engine lives as long as it does: here, the test
            engine.dispose()
