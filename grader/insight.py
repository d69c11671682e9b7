"""What did the class get wrong? A class report from what autograde recorded (``grader.findings``).

    python -m grader.insight [ASSIGNMENT...] [--html FILE] [--csv FILE] [--anonymous] [--lang zh|en]

Run it in the course directory (it reads the gradebook that ``nbgrader_config.py`` names: SQLite or
PostgreSQL). For each exercise (a graded cell) it gives the pass rate, the distribution of scores, the
named mistakes with their counts and shares and one failing case each, and the students whose kernel
timed out, hit the memory cap or was lost, or whose exercise the audit voided; and, for the class, a
heat map of students x exercises. It prints a text summary; ``--html`` writes the page
(``grader.insight_html``: offline, figures embedded), ``--csv`` one row per student and graded cell.
Both files are for the course staff: they are written inside the course directory, readable by the
owner (and the group, where the course directory is group readable), never by everyone.
``--anonymous`` leaves out every student id and name (students become ``#1``, ``#2``… in the order
of their total score, ties in random order), so the page can be shown to the class.
"""
import argparse
import csv
import io
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from grader.findings import read
from tutor.lang import bilingual, english

TROUBLE = ("timeout", "memory", "kernel_lost", "voided")  # the kinds whose students the report lists
TEXT = {  # key -> (中文, English)
    "title": ("课堂报告", "Class report"),
    "students": ("{n} 名学生", "{n} students"),
    "assignments": ("{n} 个作业", "{n} assignments"),
    "submissions": ("{n} 份提交", "{n} submissions"),
    "passed_of": ("通过 {k}/{n}（{rate:.0f} %）", "passed {k}/{n} ({rate:.0f} %)"),
    "top_mistakes": ("最常见的错误", "top mistakes"),
    "example": ("例", "e.g."),
    "no_mistakes": ("没有识别出已知错误", "no known mistake named"),
    "passed": ("通过", "passed"),
    "failed": ("答案不对或运行出错", "wrong answer or an error"),
    "not_implemented": ("尚未实现", "not implemented"),
    "timeout": ("超时", "timed out"),
    "memory": ("内存超限", "out of memory"),
    "kernel_lost": ("内核退出", "kernel lost"),
    "voided": ("审计作废", "voided by the audit"),
    "written": ("已写入", "written"),
    "overview": ("全班一览", "The class at a glance"),
    "legend": ("每格是该评分单元得分的比例；T 超时，M 内存超限，K 内核退出，V 审计作废；"
               "空白：没有评分记录（没有提交，或 nbgrader 读不了）",
               "each cell is the share of that graded cell's points; T timed out, M out of memory, K kernel "
               "lost, V voided by the audit; blank: nothing recorded (not handed in, or nbgrader could not read it)"),
    "pass_rates": ("各评分单元的通过率", "pass rate of each graded cell"),
    "mistake": ("错误", "mistake"),
    "students_col": ("学生数", "students"),
    "share": ("占比", "share"),
    "failing_case": ("未通过的用例（例）", "failing case (example)"),
    "scores": ("得分分布", "score distribution"),
    "named": ("识别出的错误", "named mistakes"),
    "no_findings": ("还没有自动评分的提交：请先运行 nbgrader autograde",
                    "no autograded submissions yet: run nbgrader autograde first"),
    "no_findings_of": ("作业 {name} 还没有自动评分的提交", "no autograded submissions of {name} yet"),
    "unknown": ("未知的作业 {name}（已有：{known}）", "unknown assignment {name} (known: {known})"),
    "no_course": ("这里没有 nbgrader_config.py：请在课程目录里运行",
                  "no nbgrader_config.py here: run this in the course directory"),
    "no_gradebook": ("无法读取成绩册 {url}：{error}", "cannot read the gradebook {url}: {error}"),
    "outside": ("报告只写在课程目录里：{path} 不在 {course} 之内",
                "reports are written inside the course directory only: {path} is not inside {course}"),
    "cannot_write": ("无法写入 {path}：{error}", "cannot write {path}: {error}"),
}


def say(key, lang, **values):
    """``TEXT[key]`` in ``lang``: "中文 / English" for zh (the course's bilingual edition), English for en."""
    zh, en = TEXT[key]
    return (bilingual(zh, en) if lang == "zh" else en).format(**values)


def mistake_text(mistake_id, lang):
    from tutor.mistakes import MISTAKES

    zh, en = MISTAKES.get(mistake_id, (mistake_id, mistake_id))
    return bilingual(zh, en) if lang == "zh" else en


class ReportError(Exception):
    """A problem the instructor can fix, said in one bilingual line."""


class Exercise(NamedTuple):
    """One graded cell across the class: a ``Finding`` per student who handed it in."""
    assignment: str
    grade_id: str
    max_score: float
    findings: tuple

    @property
    def passed(self):
        return sum(f.passed for f in self.findings)

    @property
    def rate(self):
        return self.passed / len(self.findings)


class Mistake(NamedTuple):
    """A named mistake: how many students it was found in, and one failing case that showed it."""
    id: str
    count: int
    example: str


def exercises(findings):
    """The ``Exercise`` of each graded cell, in the order of assignments and of their notebooks' cells."""
    groups = {}
    for f in findings:
        groups.setdefault((f.assignment, f.notebook, f.grade_id), []).append(f)
    order = sorted(groups, key=lambda key: (key[0], key[1], min(f.position for f in groups[key])))
    return [Exercise(a, g, max(f.max_score for f in groups[(a, n, g)]), tuple(groups[(a, n, g)]))
            for a, n, g in order]


def mistakes(findings):
    """The ``Mistake``s named in ``findings``, most students first; a student counts once per mistake."""
    students, examples = {}, {}
    for f in sorted(findings, key=lambda f: (f.student, f.position)):
        for mid in f.mistakes:
            students.setdefault(mid, set()).add(f.student)
            if f.failing_case and mid not in examples:
                examples[mid] = f.failing_case
    return [Mistake(mid, len(who), examples.get(mid, "")) for mid, who in
            sorted(students.items(), key=lambda item: (-len(item[1]), item[0]))]


def troubled(findings):
    """{kind: sorted students} for the kinds of ``TROUBLE`` found in ``findings``."""
    found = {}
    for f in findings:
        if f.kind in TROUBLE:
            found.setdefault(f.kind, set()).add(f.student)
    return {kind: sorted(found[kind]) for kind in TROUBLE if kind in found}


def pseudonyms(findings, anonymous):
    """{student id: label}: the id itself, or with ``anonymous`` ``#1``, ``#2``… by total score
    (highest first), ties in random order, so neither the ids nor their order can be read back."""
    totals = Counter()
    for f in findings:
        totals[f.student] += f.score or 0.0
    if not anonymous:
        return {s: s for s in sorted(totals)}
    shuffled = random.SystemRandom().sample(sorted(totals), len(totals))
    ranked = sorted(shuffled, key=lambda s: -totals[s])  # sorted() is stable: ties stay shuffled
    return {s: f"#{i + 1}" for i, s in enumerate(ranked)}


def text_summary(findings, names, lang):
    """The report as plain lines for the terminal."""
    chosen = exercises(findings)
    assignments = sorted({f.assignment for f in findings})
    lines = [f"{say('title', lang)}: {say('students', lang, n=len(names))}, "
             f"{say('assignments', lang, n=len(assignments))}"]
    for assignment in assignments:
        own = [f for f in findings if f.assignment == assignment]
        students = len({f.student for f in own})
        lines.append(f"{assignment} ({say('submissions', lang, n=students)})")
        top = mistakes(own)[:3]
        lines.append(f"  {say('top_mistakes', lang)}: " + (", ".join(
            f"{m.id} {m.count} ({100 * m.count / students:.0f} %)" for m in top) if top else say("no_mistakes", lang)))
        for exercise in (e for e in chosen if e.assignment == assignment):
            n = len(exercise.findings)
            lines.append(f"  {exercise.grade_id:<36s} "
                         f"{say('passed_of', lang, k=exercise.passed, n=n, rate=100 * exercise.rate)}")
            for m in mistakes(exercise.findings):
                example = f" — {say('example', lang)} 「{m.example}」" if m.example else ""
                lines.append(f"      [{m.id}] {m.count} ({100 * m.count / n:.0f} %): "
                             f"{mistake_text(m.id, lang)}{example}")
            for kind, students in troubled(exercise.findings).items():
                lines.append(f"      {say(kind, lang)}: {', '.join(names[s] for s in students)}")
    return lines


CSV_COLUMNS = ["student", "assignment", "notebook", "grade_id", "passed", "kind", "mistakes", "failing_case",
               "score", "max_score"]


def csv_text(findings, names):
    """One row per student and graded cell (the student as ``names`` labels them)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for f in sorted(findings, key=lambda f: (f.assignment, f.notebook, f.position, names[f.student])):
        writer.writerow({**{c: getattr(f, c) for c in CSV_COLUMNS}, "student": names[f.student],
                         "mistakes": " ".join(f.mistakes), "failing_case": f.failing_case or ""})
    return out.getvalue()


def write_private(path, text, course, lang):
    """Write ``text`` to ``path`` (inside ``course``) as one replacement, mode 0600, or 0640 where the
    course directory is group-readable: never readable by everyone."""
    path = Path(path).resolve()
    if not path.is_relative_to(course):
        raise ReportError(say("outside", lang, path=path, course=course))
    mode = 0o600 | (course.stat().st_mode & 0o040)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(temporary, path)
    except OSError as error:
        raise ReportError(say("cannot_write", lang, path=path, error=error.strerror or error)) from None
    return path


def load(course, chosen, lang):
    """The ``Finding``s of the assignments ``chosen`` (all when empty) of the students on the roster,
    from the gradebook of the course directory ``course`` (rows of a student or an assignment since
    removed with ``nbgrader db ... remove`` are left out); ``ReportError`` when there are none."""
    from nbgrader import api
    from nbgrader.coursedir import CourseDirectory
    from sqlalchemy import create_engine, inspect, select
    from sqlalchemy.exc import SQLAlchemyError
    from traitlets.config.loader import PyFileConfigLoader

    if not (course / "nbgrader_config.py").exists():
        raise ReportError(say("no_course", lang))
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    # the class's own folder: en/ for the English class (COURSE_LANG=en, nbgrader_config.py), else the course's
    url = CourseDirectory(config=config, root=config.CourseDirectory.get("root", str(course))).db_url
    try:
        engine = create_engine(url)
    except (SQLAlchemyError, ImportError) as error:  # a malformed URL, a database driver not installed
        raise ReportError(say("no_gradebook", lang, url=url.split("@")[-1], error=error)) from None
    if engine.url.get_backend_name() == "sqlite" and not Path(engine.url.database or "").exists():
        raise ReportError(say("no_findings", lang))  # opening it would create an empty gradebook
    try:
        if not inspect(engine).has_table(api.Assignment.__tablename__):
            raise ReportError(say("no_findings", lang))
        with engine.connect() as connection:
            known = connection.execute(select(api.Assignment.name)).scalars().all()
            roster = set(connection.execute(select(api.Student.id)).scalars().all())
        findings = [f for f in read(engine) if f.student in roster and f.assignment in known]
    except SQLAlchemyError as error:
        raise ReportError(say("no_gradebook", lang, url=engine.url.render_as_string(hide_password=True),
                              error=str(error).splitlines()[0])) from None
    finally:
        engine.dispose()
    for name in chosen:
        if name not in known:
            raise ReportError(say("unknown", lang, name=name, known=", ".join(sorted(known))))
        if not any(f.assignment == name for f in findings):
            raise ReportError(say("no_findings_of", lang, name=name))
    findings = [f for f in findings if not chosen or f.assignment in chosen]
    if not findings:
        raise ReportError(say("no_findings", lang))
    return findings


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader.insight", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: every graded assignment")
    parser.add_argument("--html", metavar="FILE", help="write the report as one offline HTML page")
    parser.add_argument("--csv", metavar="FILE", help="write one row per student and graded cell")
    parser.add_argument("--anonymous", action="store_true", help="no student ids or names (to show the class)")
    parser.add_argument("--lang", choices=("zh", "en"), default="en" if english() else "zh",
                        help="zh: 中文 / English; en: English (default in the English class, COURSE_LANG=en)")
    args = parser.parse_args(argv)
    course = Path.cwd().resolve()
    try:
        findings = load(course, args.assignments, args.lang)
        names = pseudonyms(findings, args.anonymous)
        print("\n".join(text_summary(findings, names, args.lang)))
        if args.csv:
            path = write_private(args.csv, csv_text(findings, names), course, args.lang)
            print(f"{say('written', args.lang)}: {path}")
        if args.html:
            from grader.insight_html import page

            path = write_private(args.html, page(findings, names, args.lang), course, args.lang)
            print(f"{say('written', args.lang)}: {path}")
    except ReportError as error:
        print(f"insight: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
