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
``--sandbox both`` (serial) grades two identical classes, with the grading sandbox (grader/sandbox.py)
and without it (``c.ResilientExecute.sandbox = False``); ``--findings both`` the same with and without
the class report's recording (``RecordFindings``, grader/findings.py; ``c.RecordFindings.enabled =
False``, and the class graded without it is checked to have recorded nothing). Both print a line for
each class and, last, their ratio. With ``--rounds R`` the two classes are graded R times in turns
(ABBA: on, off, off, on, ...; rounds after the first with ``--force``), so that both meet the same
load; the ratio is of the summed times.
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


# what turns each part off, in the course's nbgrader_config.py
OFF = {"sandbox": "c.ResilientExecute.sandbox = False", "findings": "c.RecordFindings.enabled = False"}


def make_course(course, assignments, students, off=(), mix=MIX):
    """A course with ``students`` students who handed in every assignment (submission kinds of the
    harness in turn from ``mix``), the parts ``off`` (keys of ``OFF``) turned off; returns their ids."""
    course.mkdir(parents=True)
    sim.setup_course(course, assignments, sim.ROOT / "source", config=[OFF[part] for part in off])
    infos = {a: sim.analyse(a, sim.ROOT / "source") for a in assignments}
    ids = [f"s{i:03d}_{mix[i % len(mix)]}" for i in range(students)]
    for student in ids:
        for a in assignments:
            sim.hand_in(course, student, a, sim.make_submission(student.split("_", 1)[1], infos[a]))
    return ids


def grade_serially(course, assignments, per_chapter=False, again=False):
    """``nbgrader autograde "*"`` (the course holds only ``assignments``), or one call per chapter;
    ``again``: ``--force`` (a class graded before); returns {chapter, or "*": wall seconds}."""
    seconds = {}
    for a in assignments if per_chapter else ["*"]:
        t0 = time.perf_counter()
        sim.nbgrader(course, "autograde", a, *(["--force"] if again else []))
        seconds[a] = time.perf_counter() - t0
    return seconds


def recorded_anything(course):
    """True when the course's gradebook holds the class report's table (``RecordFindings`` ran)."""
    from sqlalchemy import create_engine, inspect

    from grader.findings import TABLE

    engine = create_engine(f"sqlite:///{course / 'gradebook.db'}")
    try:
        return inspect(engine).has_table(TABLE.name)
    finally:
        engine.dispose()


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
    for part, what in (("sandbox", "grading kernels in the sandbox"), ("findings", "the class report's recording")):
        parser.add_argument(f"--{part}", choices=["on", "off", "both"], default="on",
                            help=f"{what} (default), without it, or both classes in turn (serial)")
    parser.add_argument("--rounds", type=int, default=1, help="with 'both': grade the two classes this many times")
    parser.add_argument("--mix", default=",".join(MIX),
                        help=f"submission kinds of tools/simulate_class.py, in turn (default {','.join(MIX)})")
    args = parser.parse_args(argv)
    compared = [part for part in OFF if getattr(args, part) == "both"]
    if len(compared) > 1 or (compared and args.workers):
        parser.error("'both' is for one part at a time, serially")
    assignments = args.assignments or cluster.graded_assignments(ROOT)
    mix = args.mix.split(",")
    n = args.students
    fixed = tuple(part for part in OFF if getattr(args, part) == "off")
    modes = [{**{p: "off" if p in fixed else "on" for p in OFF}, **({compared[0]: m} if compared else {})}
             for m in (["on", "off"] if compared else ["-"])]
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()}, chapters: {' '.join(assignments)}")
    with tempfile.TemporaryDirectory() as tmp:
        label = [" ".join(f"{p}={m[p]}" for p in OFF) for m in modes]
        courses = [Path(tmp) / f"class-{i}" for i in range(len(modes))]
        walls = [0.0] * len(modes)
        if args.workers:
            with sim.private_postgres() as db_url:
                make_course(courses[0], assignments, n, fixed, mix)
                walls[0] = grade_on_cluster(courses[0], assignments, args.workers, db_url)
        else:
            for course, mode in zip(courses, modes):
                make_course(course, assignments, n, [p for p in OFF if mode[p] == "off"], mix)
            for r in range(args.rounds if compared else 1):
                for i in (range(len(modes)) if r % 2 == 0 else reversed(range(len(modes)))):
                    seconds = grade_serially(courses[i], assignments, args.per_chapter, again=r > 0)
                    walls[i] += sum(seconds.values())
                    if args.per_chapter:
                        for a, t in seconds.items():
                            print(f"  {a:<20s} {label[i]} {t / n:5.1f} s per student")
            if compared == ["findings"] and recorded_anything(courses[1]):
                raise SystemExit("the class graded with c.RecordFindings.enabled = False recorded findings")
    rounds = args.rounds if compared else 1
    for i in range(len(modes)):
        per_student = walls[i] / (n * rounds)
        print(f"grade: workers={args.workers} students={n} per_student_s={per_student:.1f} "
              f"students_per_hour={3600 / per_student:.0f} load={os.getloadavg()[0]:.1f} {label[i]}")
    if compared:
        print(f"{compared[0]} cost: {walls[0] / walls[1]:.3f}x the time without it ({rounds} rounds of "
              f"{n} students, {walls[0]:.0f} s against {walls[1]:.0f} s, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
