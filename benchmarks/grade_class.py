"""Wall time to autograde the course with nbgrader: one student's full course, then a class.

    .venv/bin/python benchmarks/grade_class.py                 # 1 student, then 30, all chapters
    .venv/bin/python benchmarks/grade_class.py --students 10 01_attention 02_multihead

Students cycle through perfect / partial / untouched submissions (what a real class hands in;
failing checks cost a little more than passing ones). Uses the repository's nbgrader_config.py
unchanged (its per-cell timeout included) in a temporary course directory. Prints the machine's
load average, because the number means little without it.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import simulate_class as sim  # noqa: E402

MIX = ["perfect", "partial", "untouched"]


def grade(assignments, students, workdir):
    """Set up a course with ``students`` students and return autograde seconds per assignment."""
    course = Path(workdir)
    course.mkdir(parents=True)
    sim.setup_course(course, assignments, sim.ROOT / "source")
    infos = {a: sim.analyse(a, sim.ROOT / "source") for a in assignments}
    for i in range(students):
        kind = MIX[i % len(MIX)]
        for a in assignments:
            sim.hand_in(course, f"s{i:03d}_{kind}", a, sim.make_submission(kind, infos[a]))
    seconds = {}
    for a in assignments:
        t0 = time.perf_counter()
        sim.nbgrader(course, "autograde", a)
        seconds[a] = time.perf_counter() - t0
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every chapter in source/")
    parser.add_argument("--students", type=int, default=30)
    args = parser.parse_args(argv)
    assignments = args.assignments or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        one = grade(assignments, 1, Path(tmp) / "one")
        for a, s in one.items():
            print(f"  1 student  {a:<20s} {s:6.1f} s")
        print(f"one student, whole course ({len(assignments)} chapters): {sum(one.values()):.1f} s")
        many = grade(assignments, args.students, Path(tmp) / "class")
        total = sum(many.values())
        print(f"class of {args.students}, whole course: {total:.1f} s "
              f"({total / args.students:.1f} s per student)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
