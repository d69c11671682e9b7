"""The class report against a simulated class with planted mistakes (issue 39, "Done when").

    .venv/bin/python -m tools.insight_class                        # 30 students, every graded chapter, both ways
    .venv/bin/python -m tools.insight_class 02_multihead --students 4 --mode serial
    .venv/bin/python -m tools.insight_class --figure docs/insight_overview.png

Each chapter gets up to ``PER_CHAPTER`` mistakes of the wrong catalogue (catalogue/wrong_*.py), each
with a mistake id of its own and a count of its own (``SHARES`` of the class: 9, 6 and 3 students of
30), planted by ``tools.simulate_class.plant`` in students drawn at random (seeded; a student carries
at most one mistake per chapter); everyone else hands in the perfect answer. A catalogue entry is
planted only where every graded cell that uses its exercise runs its check alone or no check
(``simulate_class.plantable``) and where its check names its mistake and nothing else (``names_alone``: its
notebook code run here, before any grading). A cell with visible tests only may pass or fail
the catalogue's object (it was not written for them); it must name no mistake.

The class is graded with the instructor's commands, serially (``nbgrader autograde "*"``, SQLite)
and on the Dask cluster of grader/cluster.py (a scheduler and two workers, mutual TLS, a private
PostgreSQL gradebook). Each way, what ``RecordFindings`` recorded must equal the plan cell by cell
(every graded cell of every student: passed, or failed with exactly the planted mistake), and the
report's counts per chapter (``grader.insight.mistakes``, a student once per mistake) must equal the
planted counts exactly. Then a few students are graded again (``--force``): the recorded rows must
not change. The output ends with the report's own summary of each chapter's top three mistakes
and one line per way; the exit status is 1 on any difference. ``--figure`` writes the report's
overview figure (``grader.insight_html.overview``, of the class as graded first: serially) as a PNG.
"""
import argparse
import base64
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import create_engine

from grader import findings as recorded
from grader import insight
from tools import simulate_class as sim
from tools.paths import ROOT

PER_CHAPTER = 3
SHARES = (0.3, 0.2, 0.1)  # of the class, for the chapter's first, second and third planted mistake
REGRADED = 3  # students graded a second time
VISIBLE_ONLY = "passed or failed, no mistake named"  # a cell that uses the planted exercise, visible tests only
VISIBLE_OUTCOMES = {("passed", ()), ("failed", ())}


class Plan(NamedTuple):
    """The simulated class: who hands in what, and what the report must therefore say."""
    students: list   # ids
    chapters: list   # assignments
    infos: dict      # chapter -> simulate_class.Notebook
    planted: dict    # (student, chapter) -> catalogue entry
    expected: dict   # (student, chapter, grade_id) -> (kind, mistake ids), or VISIBLE_ONLY

    def counts(self, chapter):
        """{mistake id: students} planted in ``chapter``."""
        found = {}
        for (_, where), entry in self.planted.items():
            if where == chapter:
                found[entry[2]] = found.get(entry[2], 0) + 1
        return found


def names_alone(entry):
    """True where the entry's notebook code (``simulate_class.plant`` appends it to the exercise's cell),
    run here among the reference's names (what the notebook's cells define), binds the wrong object,
    and the check fails on that object naming its mistake and nothing else."""
    from catalogue.reference import load
    from tutor.checks import run_check

    check, obj, mid, cell = entry
    namespace = dict(load())
    try:
        exec(compile(cell, f"<catalogue {obj.__name__}>", "exec"), namespace)  # noqa: S102 - the course's own code
    except Exception:  # it reads a name no notebook defines (the catalogue module's own `R`, say)
        return False
    result = run_check(check, namespace[obj.__name__])
    return bool(mid) and not result.passed and tuple(result.diagnoses) == (mid,)


def candidates(info, entries):
    """Up to ``PER_CHAPTER`` catalogue entries for chapter ``info``, one per mistake id, in catalogue order."""
    chosen, seen = [], set()
    for entry in entries:
        if entry[2] in seen or not sim.plantable(info, entry, unchecked=True) or not names_alone(entry):
            continue
        chosen.append(entry)
        seen.add(entry[2])
        if len(chosen) == PER_CHAPTER:
            break
    return chosen


def make_plan(chapters, students, seed=0):
    """The ``Plan`` of a class of ``students`` over ``chapters``."""
    rng = random.Random(seed)
    ids = [f"s{i:02d}" for i in range(1, students + 1)]
    entries = sim.catalogue_mistakes()
    infos = {c: sim.analyse(c, ROOT / "source") for c in chapters}
    planted, expected = {}, {}
    for chapter in chapters:
        chosen = candidates(infos[chapter], entries)
        counts = [max(1, round(share * students)) for share in SHARES[:len(chosen)]]
        if sum(counts) > students:
            raise ValueError(f"{students} students are too few for {len(chosen)} mistakes a chapter")
        drawn = rng.sample(ids, sum(counts))
        for entry, count in zip(chosen, counts):
            for student in drawn[:count]:
                planted[(student, chapter)] = entry
            drawn = drawn[count:]
        for student in ids:
            entry = planted.get((student, chapter))
            info = infos[chapter]
            fails = sim.plantable(info, entry, unchecked=True) if entry else set()
            unchecked = {g for g, needs in info.needs.items() if entry and entry[0] in needs} - fails
            for grade_id in info.points:
                expected[(student, chapter, grade_id)] = (
                    ("failed", (entry[2],)) if grade_id in fails else VISIBLE_ONLY if grade_id in unchecked
                    else ("passed", ()))
    return Plan(ids, list(chapters), infos, planted, expected)


def hand_in(course, plan):
    """Every student's hand-in of every chapter into ``course``, and the class roster into its gradebook."""
    roster = course / "roster.csv"
    roster.write_text("id,first_name,last_name\n" + "".join(f"{s},sim,{s}\n" for s in plan.students))
    sim.nbgrader(course, "db", "student", "import", str(roster))
    for chapter in plan.chapters:
        info = plan.infos[chapter]
        perfect = sim.make_submission("perfect", info)
        for student in plan.students:
            entry = plan.planted.get((student, chapter))
            sim.hand_in(course, student, chapter, sim.plant(info, perfect.notebook, entry) if entry else perfect)


def differences(plan, found):
    """What the recorded findings and the report's counts say that the plan does not (empty: none)."""
    got = {(f.student, f.assignment, f.grade_id): (f.kind, f.mistakes) for f in found}
    lines = [f"{key}: recorded {got.get(key)}, planted {value}" for key, value in sorted(plan.expected.items())
             if got.get(key) != value and not (value == VISIBLE_ONLY and got.get(key) in VISIBLE_OUTCOMES)]
    lines += [f"{key}: recorded {got[key]}, not planted" for key in sorted(set(got) - set(plan.expected))]
    for chapter in plan.chapters:
        counts = {m.id: m.count for m in insight.mistakes([f for f in found if f.assignment == chapter])}
        if counts != plan.counts(chapter):
            lines.append(f"{chapter}: the report counts {counts}, planted {plan.counts(chapter)}")
    return lines


def _regrade_serially(course, plan):
    for student in plan.students[:REGRADED]:
        sim.nbgrader(course, "autograde", "*", "--student", student, "--force")


def grade_serially(course, plan):
    """Grade the class with ``nbgrader autograde "*"`` into SQLite; returns (seconds, differences, findings)."""
    sim.setup_course(course, plan.chapters, ROOT / "source")
    hand_in(course, plan)
    started = time.perf_counter()
    sim.nbgrader(course, "autograde", "*")
    seconds = time.perf_counter() - started
    engine = create_engine(f"sqlite:///{course / 'gradebook.db'}")
    return seconds, *_judge(plan, engine, lambda: _regrade_serially(course, plan))


def grade_on_cluster(course, plan, workers=2):
    """Grade the class on a scheduler and ``workers`` workers into a private PostgreSQL; as ``grade_serially``."""
    from grader import cluster

    with sim.private_postgres() as db_url:
        sim.setup_course(course, plan.chapters, ROOT / "source")
        hand_in(course, plan)
        cluster.start(course, workers)
        try:
            with cluster.client_for(course, workers) as client:
                started = time.perf_counter()
                cluster.grade(client, course, db_url, plan.chapters, log=lambda *_: None)
                seconds = time.perf_counter() - started

                def again():
                    cluster.grade(client, course, db_url, plan.chapters, students=plan.students[:REGRADED],
                                  log=lambda *_: None)

                return seconds, *_judge(plan, create_engine(db_url), again)
        finally:
            cluster.stop(course)


def _judge(plan, engine, regrade):
    """(differences, findings) of the graded class, the re-grade of ``REGRADED`` students included."""
    first = recorded.read(engine)
    lines = differences(plan, first)
    regrade()
    again = recorded.read(engine)
    if sorted(again) != sorted(first):
        changed = set(again) ^ set(first)
        lines.append(f"grading {REGRADED} students again changed {len(changed)} rows, e.g. {sorted(changed)[:2]}")
    engine.dispose()
    return lines, first


def write_figure(found, path):
    """The report's overview (``grader.insight_html.overview``: students x graded cells) as a PNG file."""
    from grader.insight_html import overview

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    names = insight.pseudonyms(found, anonymous=False)
    Path(path).write_bytes(base64.b64decode(overview(insight.exercises(found), names)))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="default: every chapter with a graded cell")
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--mode", choices=["serial", "cluster", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", metavar="PNG", help="write the overview figure of the class (as graded first)")
    parser.add_argument("--workdir", help="keep the course directories here (default: a temporary folder)")
    args = parser.parse_args(argv)
    from grader import cluster

    chapters = args.chapters or cluster.graded_assignments(ROOT)
    plan = make_plan(chapters, args.students, args.seed)
    print(f"planted: {len(plan.planted)} mistakes in {args.students} students x {len(chapters)} chapters; "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    for chapter in chapters:
        print(f"  {chapter}: {plan.counts(chapter) or 'no plantable catalogue mistake'}", flush=True)
    modes = ["serial", "cluster"] if args.mode == "both" else [args.mode]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.workdir or tmp)
        results = {}
        for mode in modes:
            course = root / f"class-{mode}"
            course.mkdir(parents=True)
            grade = grade_serially if mode == "serial" else grade_on_cluster
            results[mode] = grade(course, plan)
            seconds, lines, found = results[mode]
            for line in lines:
                print(f"DIFFERENCE {mode}: {line}")
            failed |= bool(lines)
            print(f"{mode}: {len(found)} graded cells recorded in {seconds:.0f} s, "
                  + ("the report's counts equal the planted ones, and again after a re-grade" if not lines
                     else f"{len(lines)} differences") + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
        found = results[modes[0]][2]
        names = insight.pseudonyms(found, anonymous=False)
        print("\n".join(line for line in insight.text_summary(found, names, "en")  # each chapter's top three
                        if not line.startswith("  ") or line.startswith("  top mistakes")))
        if args.figure:
            print(f"figure: {write_figure(found, args.figure)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
