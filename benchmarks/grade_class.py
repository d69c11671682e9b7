"""Wall time to autograde a class: serially with nbgrader, or on the Dask cluster of grader/cluster.py.

    .venv/bin/python -m benchmarks.grade_class                      # serial: a class of 10, every graded chapter
    .venv/bin/python -m benchmarks.grade_class --workers 2          # the same class on a scheduler + 2 workers
    .venv/bin/python -m benchmarks.grade_class --workers 2 --students 30 01_attention 02_multihead

Students cycle through perfect / partial / untouched submissions (what a real class hands in;
failing checks cost a little more than passing ones). The repository's nbgrader_config.py is used
unchanged (its limits and per-cell timeout included) in a temporary course directory. Chapters
with no graded cell (00) are left out, as docs/INSTRUCTOR.md says to.

- Serial (no ``--workers``): SQLite and one ``nbgrader autograde "*"`` for every chapter, as
  docs/INSTRUCTOR.md section 4 grades; ``--per-chapter``: one ``nbgrader autograde <chapter>``
  after the other, printing each chapter's seconds per student (each call starts nbgrader and its
  fork server anew).
- ``--workers N``: a private PostgreSQL server (tools/postgres.sh) as the gradebook, a scheduler and
  N workers as separate processes (``grader.cluster.start``), one task per (student, chapter).

Either way the last line is
``grade: workers=N students=S per_student_s=X students_per_hour=Y load=L sandbox=on`` (``workers=0``:
serial; ``load``: the one-minute load average at the end, without which the seconds mean little).
``--sandbox both`` (serial) grades two identical classes one after the other, with the grading sandbox
(grader/sandbox.py) and without it (``c.ResilientExecute.sandbox = False``), and prints a line for
each and their ratio.
"""
import argparse
import os
import tempfile
import time
from pathlib import Path

from grader import cluster
from tools import simulate_class as sim
from tools.paths import ROOT

MIX = ["perfect", "partial", "untouched"]


def make_course(course, assignments, students, sandbox=True):
    """A course with ``students`` students who handed in every assignment; returns their ids."""
    course.mkdir(parents=True)
    no_sandbox = [] if sandbox else ["c.ResilientExecute.sandbox = False"]
    sim.setup_course(course, assignments, sim.ROOT / "source", config=no_sandbox)
    infos = {a: sim.analyse(a, sim.ROOT / "source") for a in assignments}
    ids = [f"s{i:03d}_{MIX[i % len(MIX)]}" for i in range(students)]
    for student in ids:
        for a in assignments:
            sim.hand_in(course, student, a, sim.make_submission(student.split("_")[1], infos[a]))
    return ids


def grade_serially(course, assignments, per_chapter=False):
    """``nbgrader autograde "*"`` (the course holds only ``assignments``), or one call per chapter;
    returns {chapter, or "*": wall seconds}."""
    seconds = {}
    for a in assignments if per_chapter else ["*"]:
        t0 = time.perf_counter()
        sim.nbgrader(course, "autograde", a)
        seconds[a] = time.perf_counter() - t0
    return seconds


def grade_on_cluster(course, assignments, workers, db_url):
    """Start a scheduler and ``workers`` workers, grade the class on them; returns wall seconds
    (from the first task submitted to the last grade checked, the cluster's start-up left out)."""
    cluster.start(course, workers)
    try:
        with cluster.client_for(course, workers) as client:
            t0 = time.perf_counter()
            cluster.grade(client, course, db_url, assignments, log=lambda *_: None)
            return time.perf_counter() - t0
    finally:
        cluster.stop(course)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every chapter with a graded cell")
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--workers", type=int, default=0, help="grade on a Dask cluster of this many workers")
    parser.add_argument("--per-chapter", action="store_true", help="serial: one nbgrader autograde per chapter")
    parser.add_argument("--sandbox", choices=["on", "off", "both"], default="on",
                        help="grading kernels in the sandbox (default), without it, or both in turn (serial)")
    args = parser.parse_args(argv)
    assignments = args.assignments or cluster.graded_assignments(ROOT)
    n = args.students
    modes = ["on", "off"] if args.sandbox == "both" else [args.sandbox]
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()}, chapters: {' '.join(assignments)}")
    with tempfile.TemporaryDirectory() as tmp:
        courses = {m: Path(tmp) / f"class-sandbox-{m}" for m in modes}
        walls = dict.fromkeys(modes, 0.0)
        if args.workers:
            with sim.private_postgres() as db_url:
                make_course(courses[modes[0]], assignments, n, modes[0] == "on")
                walls[modes[0]] = grade_on_cluster(courses[modes[0]], assignments, args.workers, db_url)
        else:
            for m in modes:
                make_course(courses[m], assignments, n, m == "on")
            for m in modes:
                seconds = grade_serially(courses[m], assignments, args.per_chapter)
                walls[m] = sum(seconds.values())
                if args.per_chapter:
                    for a, t in seconds.items():
                        print(f"  {a:<20s} sandbox={m:<3s} {t / n:5.1f} s per student")
    for m in modes:
        per_student = walls[m] / n
        print(f"grade: workers={args.workers} students={n} per_student_s={per_student:.1f} "
              f"students_per_hour={3600 / per_student:.0f} load={os.getloadavg()[0]:.1f} sandbox={m}")
    if len(modes) > 1:
        print(f"sandbox cost: {walls['on'] / walls['off']:.2f}x the time without it")


if __name__ == "__main__":
    main()
