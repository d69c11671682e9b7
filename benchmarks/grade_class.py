"""Wall time to autograde the course with nbgrader: one student's full course, then a class.

    .venv/bin/python -m benchmarks.grade_class                  # 1 student, then a class of 10, all chapters
    .venv/bin/python -m benchmarks.grade_class --students 30 01_attention 02_multihead
    .venv/bin/python -m benchmarks.grade_class --jobs 2         # the class once more, in parallel

Students cycle through perfect / partial / untouched submissions (what a real class hands in;
failing checks cost a little more than passing ones). Uses the repository's nbgrader_config.py
unchanged (its per-cell timeout included) in a temporary course directory: SQLite and one
``nbgrader autograde <chapter>`` per chapter, as docs/INSTRUCTOR.md section 4 grades. ``--jobs N``
grades the same class again the parallel way (section 6): a private PostgreSQL server
(tools/postgres.sh) as the gradebook and N ``nbgrader autograde "*" --student <id>`` processes at
a time, and prints the speed-up. Prints the machine's load average, because the numbers mean
little without it, and the CPU time (user + system) of nbgrader and its kernels, which a busy
machine inflates much less than the wall time.
"""
import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools import simulate_class as sim

ROOT = Path(__file__).resolve().parents[1]
MIX = ["perfect", "partial", "untouched"]


def make_course(course, assignments, students):
    """A course with ``students`` students who handed in every assignment; returns their ids."""
    course.mkdir(parents=True)
    sim.setup_course(course, assignments, sim.ROOT / "source")
    infos = {a: sim.analyse(a, sim.ROOT / "source") for a in assignments}
    ids = [f"s{i:03d}_{MIX[i % len(MIX)]}" for i in range(students)]
    for student in ids:
        for a in assignments:
            sim.hand_in(course, student, a, sim.make_submission(student.split("_")[1], infos[a]))
    return ids


def cpu_seconds():
    """User + system time of the finished child processes (nbgrader and the kernels it started)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade_by_chapter(course, assignments):
    """One ``nbgrader autograde <chapter>`` after the other; returns {chapter: (wall s, CPU s)}."""
    seconds = {}
    for a in assignments:
        t0, c0 = time.perf_counter(), cpu_seconds()
        sim.nbgrader(course, "autograde", a)
        seconds[a] = (time.perf_counter() - t0, cpu_seconds() - c0)
    return seconds


def grade_by_student(course, students, jobs):
    """``jobs`` processes of ``nbgrader autograde "*" --student <id>`` at a time; returns (wall s, CPU s)."""
    t0, c0 = time.perf_counter(), cpu_seconds()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: sim.nbgrader(course, "autograde", "*", "--student", s), students))
    return time.perf_counter() - t0, cpu_seconds() - c0


@contextlib.contextmanager
def private_postgres():
    """A PostgreSQL server of its own (tools/postgres.sh) in a short, world-readable folder;
    NBGRADER_DB_URL points nbgrader_config.py at it while the block runs."""
    folder = tempfile.mkdtemp(prefix="pg", dir="/tmp")
    os.chmod(folder, 0o755)  # as root the server runs as `postgres`, which must reach it
    env = dict(os.environ, POSTGRES_DIR=folder)
    script = str(ROOT / "tools" / "postgres.sh")
    subprocess.run([script, "start"], env=env, check=True)
    os.environ["NBGRADER_DB_URL"] = subprocess.run([script, "url"], env=env, check=True, capture_output=True,
                                                   text=True).stdout.strip()
    try:
        yield
    finally:
        del os.environ["NBGRADER_DB_URL"]
        subprocess.run([script, "stop"], env=env)
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every chapter in source/")
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=0,
                        help="also grade the class with this many parallel processes against PostgreSQL")
    args = parser.parse_args(argv)
    assignments = args.assignments or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        make_course(Path(tmp) / "one", assignments, 1)
        one = grade_by_chapter(Path(tmp) / "one", assignments)
        print(f"one student, whole course ({len(assignments)} chapters): {sum(w for w, _ in one.values()):.1f} s "
              f"(CPU {sum(c for _, c in one.values()):.1f} s; each chapter starts nbgrader once)")
        students = make_course(Path(tmp) / "class", assignments, args.students)
        many = grade_by_chapter(Path(tmp) / "class", assignments)
        n = args.students
        print(f"class of {n}, one autograde per chapter, SQLite (per student: wall, CPU; alone: wall):")
        for a, (wall, cpu) in many.items():
            print(f"  {a:<20s} {wall / n:5.1f} s  {cpu / n:5.1f} s   alone: {one[a][0]:5.1f} s")
        wall, cpu = sum(w for w, _ in many.values()), sum(c for _, c in many.values())
        print(f"  whole course: {wall:.1f} s, {wall / n:.1f} s per student (CPU {cpu / n:.1f} s per student)")
        print(f"load average: {os.getloadavg()}")
        if args.jobs:
            with private_postgres():
                students = make_course(Path(tmp) / "parallel", assignments, n)
                p_wall, p_cpu = grade_by_student(Path(tmp) / "parallel", students, args.jobs)
            print(f"class of {n}, {args.jobs} processes at a time, PostgreSQL: {p_wall:.1f} s, "
                  f"{p_wall / n:.1f} s per student (CPU {p_cpu / n:.1f} s per student), "
                  f"speed-up {wall / p_wall:.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
