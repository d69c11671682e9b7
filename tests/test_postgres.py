"""Parallel grading against PostgreSQL, as docs/INSTRUCTOR.md describes it: tools/postgres.sh starts
a private server, NBGRADER_DB_URL points nbgrader_config.py at it, and several
``nbgrader autograde --student`` processes write to one gradebook at the same time.

Skips where the PostgreSQL server programs (Debian: ``apt-get install postgresql``) or the driver
(``pip install -e ".[postgres]"``) are missing.
"""
import glob
import importlib.util
import shutil
from concurrent.futures import ThreadPoolExecutor

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
