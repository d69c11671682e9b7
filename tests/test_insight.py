"""The class report (issue 39): what autograde records per graded cell (``grader.findings``) and the
report made from it (``python -m grader.insight``).

Fast tests build graded notebooks and gradebooks by hand (no kernel); the slow ones grade a small
class of chapter 01 through the real ``nbgrader autograde`` (tools/simulate_class.py) and check the
report's counts against what each submission was built to have.
"""
import csv
import glob
import io
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from sqlalchemy import create_engine, update

from grader import findings, insight
from grader.execution import KERNEL_LOST, TIMED_OUT
from tools import insight_class, simulate_class
from tools.paths import ROOT
from tutor.engine.messages import say
from tutor.grading import FINISH_FIRST_LINE
from tutor.mistakes import explain

URL = re.compile(r"https?://", re.I)
CASE = say("case", name="MultiHeadAttention", i=2, n=4, label="padding mask, T_q=3", described=" (B=2)")


def _graded(grade_id, outputs, points=2):
    cell = new_code_cell(f'grade("{grade_id}", obj)', outputs=outputs)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "points": points, "solution": False,
                                 "locked": True, "schema_version": 3}
    return cell


def _error(ename, evalue):
    return new_output("error", ename=ename, evalue=evalue, traceback=[evalue])


def _notebook():
    """A graded notebook as autograde leaves it: one cell of each kind, and an ungraded cell."""
    return new_notebook(cells=[
        new_code_cell("import torch", outputs=[new_output("stream", name="stderr", text="a warning")]),
        _graded("passes", [new_output("stream", name="stdout", text="✅ all 4 cases passed\n")]),
        _graded("wrong", [_error("TestFailure", f"❌ {CASE}\n  max error 0.3\n  {explain('no_scale')}")], points=3),
        _graded("hangs", [_error("TimedOut", TIMED_OUT.format(seconds=5))]),
        _graded("lost", [_error("KernelLost", KERNEL_LOST)]),
        _graded("stub", [_error("TestFailure", FINISH_FIRST_LINE.format(name="X", exercise="X"))]),
        _graded("tampered", [new_output("stream", name="stdout", text="✅ passed\n"),
                             _error("IntegrityError", "评分已作废 / Not graded")]),
    ])


def test_the_failing_case_is_read_from_the_checks_report():
    assert findings.failing_case([_error("TestFailure", f"❌ {CASE}\n  reason")]) == "padding mask, T_q=3"
    other_forms = ["copy_loss: 用例 case 「greedy, T=5」: wrong",
                   "用缓存应是 / with the cache: 1（用例 / case 「one token」）"]
    assert [findings.failing_case([_error("TestFailure", t)]) for t in other_forms] == ["greedy, T=5", "one token"]
    printed = new_output("stream", name="stdout", text=f"❌ {CASE}")  # what the learner's code prints is not read
    assert findings.failing_case([printed, _error("TestFailure", "❌ shape (2, 5)")]) is None
    assert findings.failing_case([_error("TestFailure", "❌ shape (2, 5) / must be (2, 4, 5)")]) is None


def test_each_graded_cell_gets_its_kind_mistakes_case_and_score():
    found = findings.cell_findings(_notebook(), {"tampered": "IntegrityError"}, "alice", "01_x", "01_x")
    table = {f.grade_id: (f.passed, f.kind, f.mistakes, f.failing_case, f.score, f.max_score) for f in found}
    assert table == {
        "passes": (True, "passed", (), None, 2.0, 2.0),
        "wrong": (False, "failed", ("no_scale",), "padding mask, T_q=3", 0, 3.0),
        "hangs": (False, "timeout", (), None, 0, 2.0),
        "lost": (False, "kernel_lost", (), None, 0, 2.0),
        "stub": (False, "not_implemented", (), None, 0, 2.0),
        "tampered": (False, "voided", (), None, 0, 2.0),
    }
    assert [f.position for f in found] == list(range(6))


def test_an_error_named_like_the_audits_does_not_void_a_cell():
    """Only ``AuditSubmission``'s own record voids a cell: the kernel can raise any exception name."""
    nb = new_notebook(cells=[_graded("forged", [_error("IntegrityError", "评分已作废 / Not graded")])])
    assert [f.kind for f in findings.cell_findings(nb, {}, "bob", "01_x", "01_x")] == ["failed"]


def _finding(student, grade_id, kind="passed", mistakes=(), case=None, score=1.0, position=0, assignment="01_x"):
    return findings.Finding(student, assignment, assignment, grade_id, position, kind == "passed", kind,
                            tuple(mistakes), case, score if kind == "passed" else 0.0, 1.0)


def test_recording_a_submission_again_replaces_its_rows(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'gradebook.db'}")
    first = [_finding("alice", "a"), _finding("alice", "b", "failed", ["no_scale"], "case 1", position=1)]
    findings.record(engine, "alice", "01_x", "01_x", first)
    findings.record(engine, "bob", "01_x", "01_x", [_finding("bob", "a")])
    findings.record(engine, "alice", "01_x", "01_x", [_finding("alice", "a", "timeout")])
    assert sorted((f.student, f.grade_id, f.kind) for f in findings.read(engine)) == [
        ("alice", "a", "timeout"), ("bob", "a", "passed")]
    assert findings.read(create_engine(f"sqlite:///{tmp_path / 'empty.db'}")) == []


CLASS_FINDINGS = [
    _finding("ann", "attn", "failed", ["no_scale"], "no mask"), _finding("ann", "mha", "failed", ["no_scale"],
                                                                         "no mask", position=1),
    _finding("ben", "attn", "failed", ["no_scale", "softmax_wrong_dim"], "causal"),
    _finding("ben", "mha", "not_implemented", position=1),
    _finding("cy", "attn"), _finding("cy", "mha", "timeout", position=1),
    _finding("dee", "attn", "memory"), _finding("dee", "mha", "memory", position=1),
]


def test_counts_per_exercise_and_per_assignment():
    by_id = {e.grade_id: e for e in insight.exercises(CLASS_FINDINGS)}
    assert list(by_id) == ["attn", "mha"]
    assert (by_id["attn"].passed, len(by_id["attn"].findings), by_id["mha"].passed) == (1, 4, 0)
    assert insight.mistakes(by_id["attn"].findings) == [
        insight.Mistake("no_scale", 2, "no mask"), insight.Mistake("softmax_wrong_dim", 1, "causal")]
    # a student whose mistake fails two cells counts once for the assignment
    assert insight.mistakes(CLASS_FINDINGS)[0] == insight.Mistake("no_scale", 2, "no mask")
    assert insight.troubled(by_id["mha"].findings) == {"timeout": ["cy"], "memory": ["dee"]}
    assert insight.troubled(by_id["attn"].findings) == {"memory": ["dee"]}


def test_anonymous_labels_rank_students_by_total_and_hide_their_ids():
    names = insight.pseudonyms(CLASS_FINDINGS, anonymous=True)
    assert names["cy"] == "#1" and set(names.values()) == {"#1", "#2", "#3", "#4"}
    assert insight.pseudonyms(CLASS_FINDINGS, anonymous=False) == {s: s for s in ("ann", "ben", "cy", "dee")}
    text = "\n".join(insight.text_summary(CLASS_FINDINGS, names, "en")) + insight.csv_text(CLASS_FINDINGS, names)
    assert not re.search(r"\b(ann|ben|cy|dee)\b", text)


def test_the_summary_names_mistakes_with_the_registrys_text():
    lines = insight.text_summary(CLASS_FINDINGS, insight.pseudonyms(CLASS_FINDINGS, False), "zh")
    from tutor.mistakes import MISTAKES

    assert any("[no_scale] 2 (50 %)" in line and MISTAKES["no_scale"][0] in line and MISTAKES["no_scale"][1]
               in line and "「no mask」" in line for line in lines)
    assert "      超时 / timed out: cy" in lines and "      内存超限 / out of memory: dee" in lines


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course directory with a gradebook holding one assignment, three students and ``CLASS_FINDINGS``."""
    from nbgrader.api import Gradebook

    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    os.chmod(tmp_path, 0o750)
    monkeypatch.setenv("PATH", f"{simulate_class.BIN}{os.pathsep}{os.environ['PATH']}")  # nbgrader runs alembic
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment("01_x")
        gradebook.add_assignment("02_y")
        for student in ("ann", "ben", "cy", "dee"):
            gradebook.add_student(student, first_name=f"First{student}", last_name=f"Last{student}")
        engine = gradebook.engine
        for student in ("ann", "ben", "cy", "dee"):
            findings.record(engine, student, "01_x", "01_x", [f for f in CLASS_FINDINGS if f.student == student])
        # rows of a student and of an assignment no longer in the gradebook (nbgrader db ... remove)
        findings.record(engine, "gone", "01_x", "01_x", [_finding("gone", "attn")])
        findings.record(engine, "ann", "03_gone", "03_gone", [_finding("ann", "attn", assignment="03_gone")])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _main(capsys, *args):
    code = insight.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_report_files_are_offline_private_and_parse(course, capsys):
    code, out, err = _main(capsys, "--html", "class_report.html", "--csv", "reports/class_report.csv", "--lang", "en")
    assert code == 0 and not err, err
    page = (course / "class_report.html").read_text()
    assert not URL.search(page) and "<script" not in page and page.count("data:image/png;base64,") >= 5
    rows = list(csv.DictReader(io.StringIO((course / "reports" / "class_report.csv").read_text())))
    assert len(rows) == len(CLASS_FINDINGS) and rows[0].keys() == set(insight.CSV_COLUMNS)
    assert "gone" not in out + page
    assert sorted(r["student"] for r in rows if r["kind"] == "memory") == ["dee", "dee"]
    for name in ("class_report.html", "reports/class_report.csv"):
        mode = stat.S_IMODE((course / name).stat().st_mode)
        assert mode == 0o640, oct(mode)  # the course directory is 0750: group may read, others nothing
    os.chmod(course, 0o700)
    assert _main(capsys, "--html", "class_report.html")[0] == 0
    assert stat.S_IMODE((course / "class_report.html").stat().st_mode) == 0o600


def test_the_anonymous_report_holds_no_student_id_or_name(course, capsys):
    code, out, _ = _main(capsys, "--anonymous", "--html", "a.html", "--csv", "a.csv")
    assert code == 0
    text = out + (course / "a.html").read_text() + (course / "a.csv").read_text()
    assert not re.search(r"\b(ann|ben|cy|dee)\b|First|Last", text)
    assert "#1" in text


@pytest.mark.parametrize("args, message", [
    (["09_none"], "unknown assignment 09_none (known: 01_x, 02_y)"),
    (["02_y"], "no autograded submissions of 02_y yet"),
    (["--html", "../elsewhere.html"], "reports are written inside the course directory only"),
])
def test_a_mistake_of_the_instructor_is_one_bilingual_line(course, capsys, args, message):
    code, out, err = _main(capsys, *args)
    assert code == 2 and message in err and "/ " in err and len(err.strip().splitlines()) == 1
    assert not (course.parent / "elsewhere.html").exists()


def test_no_gradebook_or_no_course_is_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(capsys)
    assert code == 2 and "no nbgrader_config.py here" in err
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    code, _, err = _main(capsys)
    assert code == 2 and "no autograded submissions yet" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "gradebook.db").exists()
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.db_url = 'nosuchdb://h/x'\n")
    code, _, err = _main(capsys)
    assert code == 2 and "cannot read the gradebook nosuchdb://h/x" in err and len(err.strip().splitlines()) == 1


# --- a class graded by the real nbgrader autograde ---------------------------------------------

CHAPTER = "01_attention"
CLASS = {"u01perfect": "perfect", "u02perfect": "perfect", "u03untouched": "untouched",
         "u04classic": "classic_mistake", "u05classic": "classic_mistake", "u06loop": "infinite_loop",
         "u07bomb": "memory_bomb", "u08dies": "kernel_dies", "u09tamper": "torch_allclose"}
# what each kind of submission was built to show in its failing cells
FAILING_KIND = {"untouched": "not_implemented", "classic_mistake": "failed", "infinite_loop": "timeout",
                "memory_bomb": "memory", "kernel_dies": "kernel_lost"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("insight") / "course"
    course.mkdir()
    simulate_class.setup_course(course, [CHAPTER], ROOT / "source", timeout=15)
    info = simulate_class.analyse(CHAPTER, ROOT / "source")
    roster = course / "roster.csv"
    roster.write_text("id,first_name,last_name\n" + "".join(f"{s},Ada{s[1:3]},Lovelace{s[1:3]}\n" for s in CLASS))
    simulate_class.nbgrader(course, "db", "student", "import", str(roster))
    submissions = {}
    for student, kind in CLASS.items():
        submissions[student] = simulate_class.make_submission(kind, info)
        simulate_class.hand_in(course, student, CHAPTER, submissions[student])
    simulate_class.nbgrader(course, "autograde", CHAPTER)
    return course, info, submissions


def _recorded(course):
    return findings.read(create_engine(f"sqlite:///{course / 'gradebook.db'}"))


def _expected_kind(student, grade_id, info, submissions):
    kind = CLASS[student]
    if grade_id not in submissions[student].fails:
        return "passed"
    if kind == "torch_allclose" and grade_id in simulate_class._failing(info, [], voided=info.exercises[0][0]):
        return "voided"
    return FAILING_KIND.get(kind, "failed")


@pytest.mark.slow
def test_autograde_records_what_each_submission_was_built_to_have(graded):
    course, info, submissions = graded
    recorded = {(f.student, f.grade_id): f for f in _recorded(course)}
    assert set(recorded) == {(s, g) for s in CLASS for g in info.points}
    mistake = simulate_class.MUTATIONS[CHAPTER].mistake
    for (student, grade_id), f in sorted(recorded.items()):
        assert f.kind == _expected_kind(student, grade_id, info, submissions), (student, grade_id, f)
        points = info.points[grade_id]
        assert (f.score, f.max_score) == (points if f.passed else 0.0, points)
        assert f.mistakes == ((mistake,) if CLASS[student] == "classic_mistake" and not f.passed else ()), f
        if f.mistakes:
            assert f.failing_case, f


@pytest.mark.slow
def test_the_reports_counts_equal_the_planted_ones(graded):
    """The text summary (English) through the command line: each graded cell's pass count, the
    classic mistake's count, the students listed for a timeout, the memory cap and a lost kernel."""
    course, info, submissions = graded
    proc = subprocess.run([sys.executable, "-m", "grader.insight", CHAPTER, "--lang", "en", "--html",
                           "class_report.html", "--csv", "class_report.csv"], cwd=course, capture_output=True,
                          text=True)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    out = proc.stdout
    mistake = simulate_class.MUTATIONS[CHAPTER].mistake
    for grade_id in info.points:
        passed = sum(grade_id not in sub.fails for sub in submissions.values())
        assert re.search(rf"^  {grade_id} +passed {passed}/{len(CLASS)} ", out, re.M), (grade_id, out)
        block = re.split(r"\n(?! {6})", out.split(f"  {grade_id} ", 1)[1], maxsplit=1)[0]  # its line, sub-lines
        classic = sum(grade_id in submissions[s].fails for s in ("u04classic", "u05classic"))
        assert (f"[{mistake}] {classic} ({100 * classic / len(CLASS):.0f} %)" in block) == bool(classic), block
        for kind, student in (("timed out", "u06loop"), ("out of memory", "u07bomb"), ("kernel lost", "u08dies")):
            assert (f"{kind}: {student}" in block) == (grade_id in submissions[student].fails), (kind, block)
        voided = _expected_kind("u09tamper", grade_id, info, submissions) == "voided"
        assert ("voided by the audit: u09tamper" in block) == voided, block
    page = (course / "class_report.html").read_text()
    assert not URL.search(page) and "data:image/png;base64," in page
    rows = list(csv.DictReader(io.StringIO((course / "class_report.csv").read_text())))
    assert len(rows) == len(CLASS) * len(info.points)


@pytest.mark.slow
def test_the_anonymous_report_of_a_graded_class_names_nobody(graded):
    course, _, _ = graded
    proc = subprocess.run([sys.executable, "-m", "grader.insight", "--anonymous", "--html", "anon.html", "--csv",
                           "anon.csv"], cwd=course, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + (course / "anon.html").read_text() + (course / "anon.csv").read_text()
    leaked = [s for s in CLASS if s in text] + re.findall(r"Ada\d\d|Lovelace\d\d", text)
    assert not leaked


@pytest.mark.slow
def test_grading_again_replaces_a_submissions_record(graded):
    """A re-grade (``--force``) of one student: what was recorded for it is replaced (a row made stale
    here is gone), and no row is added."""
    course, _, _ = graded
    before = _recorded(course)
    engine = create_engine(f"sqlite:///{course / 'gradebook.db'}")
    with engine.begin() as connection:
        connection.execute(update(findings.TABLE).where(findings.TABLE.c.student == "u04classic").values(kind="stale"))
    simulate_class.nbgrader(course, "autograde", CHAPTER, "--student", "u04classic", "--force")
    assert sorted(_recorded(course)) == sorted(before)


@pytest.mark.slow
def _read(db_url):
    """The findings in the gradebook at ``db_url``, its connections closed afterwards."""
    engine = create_engine(db_url)
    try:
        return findings.read(engine)
    finally:
        engine.dispose()


def test_a_class_graded_on_the_cluster_is_recorded_in_postgresql_once(tmp_path_factory):
    """grader.cluster on two workers and a PostgreSQL gradebook: each worker's nbgrader records the
    findings (the table made by whichever worker comes first), the report reads them through the
    course's config, and grading the class again leaves the same rows."""
    pytest.importorskip("psycopg", reason='.venv/bin/pip install -e ".[postgres]"')
    pytest.importorskip("distributed", reason='.venv/bin/pip install -e ".[cluster]"')
    from grader import cluster

    course = tmp_path_factory.mktemp("pg")  # a short path: the kernels' IPC sockets live below it
    students = ["u01perfect", "u03untouched", "u04classic", "u05classic", "u08dies"]
    info = simulate_class.analyse(CHAPTER, ROOT / "source")
    submissions = {s: simulate_class.make_submission(CLASS[s], info) for s in students}
    with simulate_class.private_postgres() as db_url:
        simulate_class.setup_course(course, [CHAPTER], ROOT / "source", timeout=60)
        for student in students:
            simulate_class.hand_in(course, student, CHAPTER, submissions[student])
        cluster.start(course, workers=2)
        try:
            with cluster.client_for(course, workers=2) as client:
                cluster.grade(client, course, db_url, [CHAPTER], log=lambda *_: None)
                first = _read(db_url)
                cluster.grade(client, course, db_url, [CHAPTER], log=lambda *_: None)
                again = _read(db_url)
        finally:
            cluster.stop(course)
        proc = subprocess.run([sys.executable, "-m", "grader.insight", "--lang", "en"], cwd=course,
                              capture_output=True, text=True)
    assert sorted(again) == sorted(first)
    assert {(f.student, f.grade_id): f.kind for f in first} == {
        (s, g): _expected_kind(s, g, info, submissions) for s in students for g in info.points}
    assert proc.returncode == 0, proc.stderr
    mistake = simulate_class.MUTATIONS[CHAPTER].mistake
    assert f"top mistakes: {mistake} 2" in proc.stdout


# --- the Done-when run, small: planted catalogue mistakes (tools/insight_class.py) -----------------------

PLANTED_CHAPTER = "02_multihead"  # three catalogue mistakes of one exercise, each plantable


@pytest.fixture(scope="module")
def plan():
    return insight_class.make_plan([PLANTED_CHAPTER], students=4)


def test_a_plan_plants_distinct_mistakes_and_its_comparison_can_fail(plan):
    """Each planted student fails the cells of their exercise with exactly its mistake; the comparison
    catches a count off by one, a mistake named where none was planted, and a missing row."""
    counts = plan.counts(PLANTED_CHAPTER)
    assert len(counts) == insight_class.PER_CHAPTER and set(counts.values()) == {1}
    perfect = [(s, g) for (s, c, g), v in plan.expected.items() if v == ("passed", ())]
    planted = [k for k, v in plan.expected.items() if v not in (("passed", ()), insight_class.VISIBLE_ONLY)]
    assert perfect and planted
    right = [findings.Finding(s, c, c, g, 0, v[0] == "passed", v[0], v[1], None, 0.0, 1.0)
             for (s, c, g), v in plan.expected.items() if v != insight_class.VISIBLE_ONLY]
    right += [findings.Finding(s, c, c, g, 0, False, "failed", (), None, 0.0, 1.0)
              for (s, c, g), v in plan.expected.items() if v == insight_class.VISIBLE_ONLY]
    assert insight_class.differences(plan, right) == []
    student, chapter, grade_id = planted[0]
    unnamed = [f._replace(mistakes=()) if (f.student, f.grade_id) == (student, grade_id) else f for f in right]
    assert any("the report counts" in line for line in insight_class.differences(plan, unnamed))
    extra = [f._replace(kind="failed", passed=False, mistakes=("no_scale",))
             if (f.student, f.grade_id) == perfect[0] else f for f in right]
    assert len(insight_class.differences(plan, extra)) == 2  # the cell, and the chapter's counts
    assert insight_class.differences(plan, right[1:])


@pytest.mark.slow
@pytest.mark.parametrize("way", ["serial", "cluster"])
def test_the_reports_counts_equal_the_planted_catalogue_mistakes(plan, tmp_path_factory, way):
    """Four students, three planted mistakes, graded serially or on the cluster (two workers, mutual TLS,
    PostgreSQL): the recorded cells and the report's counts equal the plan, also after a re-grade."""
    if way == "cluster":
        pytest.importorskip("psycopg", reason='.venv/bin/pip install -e ".[postgres]"')
        pytest.importorskip("distributed", reason='.venv/bin/pip install -e ".[cluster]"')
        if not (shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")):
            pytest.skip("PostgreSQL server programs not installed")
    course = tmp_path_factory.mktemp(way)  # a short path: the kernels' IPC sockets live below it
    grade = insight_class.grade_serially if way == "serial" else insight_class.grade_on_cluster
    _, lines, found = grade(course, plan)
    assert not lines, "\n".join(lines)
    assert len(found) == len(plan.expected)
