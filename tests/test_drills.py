"""The 手撕 drill bank (lessons/10_drills.py, tutor/drills.py): every drill is a course check with a
blank cell, named mistakes proven by the catalogue, and a practice mode that never shows a solution
before an attempt."""
import json
import re
import sys

import nbformat
import pytest

import catalogue
from pipeline_helpers import OVERFLOWS_ON_PURPOSE
from tools import build
from tools.paths import ROOT
from tutor import checks, drills, mistakes, store

LESSON = drills.LESSON


def lesson_drill_cells():
    return [c for c in build.read_lesson(LESSON) if c.metadata.get("drill")]


# ---------------------------------------------------------------- the bank

def test_every_drill_is_a_course_check_with_explained_mistakes():
    assert len({d.name for d in drills.DRILLS}) == len(drills.DRILLS) >= 25  # issue 17: at least 25 drills
    for d in drills.DRILLS:
        assert d.name in checks.CHECKS, d.name
        assert d.mistakes, f"{d.name}: a drill needs at least one named mistake"
        for mid in d.mistakes:
            zh, en = mistakes.MISTAKES[mid]
            assert zh and en


def test_lesson_has_one_blank_cell_and_one_graded_check_per_drill_in_order():
    cells = build.read_lesson(LESSON)
    exercised = [tuple(build.split_names(c.metadata["exercise"], "exercise", LESSON)) for c in lesson_drill_cells()]
    assert exercised == [d.objects for d in drills.DRILLS]
    assert all("exercise" not in c.metadata or c.metadata.get("drill") for c in cells), "every exercise is a drill"
    graded = [build.parse_check(c.metadata["check"], LESSON) for c in cells if "grade_id" in c.metadata]
    assert graded == [(d.name, d.name) for d in drills.DRILLS]
    grade_ids = [c.metadata["grade_id"] for c in cells if "grade_id" in c.metadata]
    assert grade_ids == [f"drill_{d.name}" for d in drills.DRILLS]


HINT = re.compile(r"\bHints?\b|提示|BEGIN SOLUTION")


@pytest.mark.parametrize("edition", ["notebooks", "release", "notebooks/en"])
def test_blank_cells_hold_only_signature_docstring_and_stub(edition):
    folder = ROOT / edition if edition.startswith("notebooks") else ROOT / "release" / LESSON
    path = folder / f"{LESSON}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    blanks = [c for c in nb.cells if c.get("id", "").startswith("impl_")]
    assert len(blanks) == len(drills.DRILLS)
    for cell in blanks:
        assert not HINT.search(cell.source), f"{cell.id}: a hint or solution reached the drill"
        assert "# YOUR CODE HERE" in cell.source, cell.id
        if edition.endswith("en"):  # the English edition: English stub and docstrings only
            assert not re.search(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]", cell.source), cell.id
        else:
            assert "中文" in cell.source, cell.id


def test_drill_docstrings_must_replace_every_reference_docstring():
    code = 'def f(x):\n    """Hint: the answer."""\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION'
    assert '"""Shapes only."""' in build.drill_source(code, 'def f(x):\n    """Shapes only."""', "t")
    with pytest.raises(build.LessonError, match="missing"):
        build.drill_source(code, 'def g(x):\n    """Shapes only."""', "t")


# ---------------------------------------------------------------- practice mode

@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A clean practice state with the learner's record (tutor.store) in tmp_path."""
    monkeypatch.setattr(drills, "_STARTED", {})
    monkeypatch.setattr(drills, "_UNLOCKED", set())
    monkeypatch.setenv(store.VARIABLE, str(tmp_path / store.FILE))
    return tmp_path / store.FILE


def _drills(path):
    return json.loads(path.read_text(encoding="utf-8"))["drills"]


def _reference_softmax():
    from catalogue.reference import load

    return load()["softmax"]


@OVERFLOWS_ON_PURPOSE
def test_reveal_is_locked_before_an_attempt_and_after_a_failed_one(fresh, capsys):
    drills.reveal("softmax")
    drills.start("softmax")
    wrong = next(obj for check, obj, _ in catalogue.cases("wrong") if check == "softmax")
    drills.finish("softmax", checks.run_check("softmax", wrong))
    drills.reveal("softmax")
    out = capsys.readouterr().out
    assert out.count("🔒") == 2 and "np.max" not in out and "未通过 / not yet" in out
    assert _drills(fresh)["softmax"] == {**_drills(fresh)["softmax"], "passed": False, "attempts": 1,
                                         "best_seconds": None}


def test_a_pass_records_time_and_unlocks_the_reference_and_its_mistakes(fresh, capsys):
    drills.start("softmax")
    drills.finish("softmax", checks.run_check("softmax", _reference_softmax()))
    drills.reveal("softmax")
    out = capsys.readouterr().out
    assert "通过 / passed" in out and re.search(r"time taken \d+\.\d s", out)
    assert "np.max(x, axis=axis, keepdims=True)" in out  # the reference source
    for mid in drills.BY_NAME["softmax"].mistakes:
        assert f"- {mid}: {mistakes.MISTAKES[mid][0]}" in out
    entry = _drills(fresh)["softmax"]
    assert entry["passed"] and entry["attempts"] == 1 and entry["best_seconds"] >= 0


def test_a_pass_in_the_progress_file_unlocks_a_new_session(fresh, capsys):
    fresh.write_text(json.dumps({"drills": {"LayerNorm": {"passed": True, "attempts": 2, "best_seconds": 90.0}}}))
    drills.reveal("LayerNorm")
    assert "📖" in capsys.readouterr().out


def test_the_drill_banks_older_file_is_read_as_the_drills_part(fresh, capsys):
    """A learner's drills_progress.json from before the record: its passes still unlock, and the next
    write keeps them in progress.json."""
    fresh.with_name(store.OLD_DRILLS_FILE).write_text(json.dumps({"LayerNorm": {"passed": True, "attempts": 2}}))
    drills.reveal("LayerNorm")
    assert "📖" in capsys.readouterr().out
    drills.give_up("softmax")
    assert set(_drills(fresh)) == {"LayerNorm", "softmax"}


def test_give_up_unlocks_and_is_recorded(fresh, capsys):
    drills.give_up("make_pad_mask")
    out = capsys.readouterr().out
    assert "📖" in out and "pad_mask_queries" in out
    assert _drills(fresh)["make_pad_mask"]["gave_up"] is True


def test_reveal_without_the_reference_package_says_so(fresh, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "solutions", None)  # a self-study image without solutions
    drills.give_up("softmax")
    out = capsys.readouterr().out
    assert "solutions is not installed" in out and "softmax_unstable" in out


def test_nothing_is_written_outside_the_workspace(monkeypatch, tmp_path):
    monkeypatch.delenv(store.VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    assert store.path() is None
    (tmp_path / "workspace").mkdir()
    monkeypatch.chdir(tmp_path / "workspace")
    assert store.path() == tmp_path / "workspace" / store.FILE
    (tmp_path / "workspace" / "en").mkdir()
    monkeypatch.chdir(tmp_path / "workspace" / "en")  # the English edition (make lab COURSE_LANG=en)
    assert store.path() == tmp_path / "workspace" / "en" / store.FILE
    (tmp_path / "en").mkdir()
    monkeypatch.chdir(tmp_path / "en")
    assert store.path() is None
    monkeypatch.chdir(tmp_path / "workspace")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert store.path() is None


def test_progress_lists_every_drill(fresh, capsys):
    drills.progress()
    out = capsys.readouterr().out
    assert all(d.name in out for d in drills.DRILLS)


def test_reset_restores_the_blank_cell_and_keeps_a_backup(tmp_path, capsys):
    pristine = nbformat.read(str(drills.pristine_notebook_path()), as_version=4)
    work = tmp_path / f"{LESSON}.ipynb"
    cell = next(c for c in pristine.cells if c.get("id") == "impl_softmax")
    blank = cell.source
    cell.source = "def softmax(x, axis=-1):\n    return x  # my attempt"
    nbformat.write(pristine, str(work))
    drills.reset("softmax", notebook=work)
    restored = nbformat.read(str(work), as_version=4)
    assert next(c for c in restored.cells if c.get("id") == "impl_softmax").source == blank
    backups = list((tmp_path / "backup").glob("*.ipynb"))
    assert len(backups) == 1 and "my attempt" in backups[0].read_text(encoding="utf-8")


def test_mock_interview_draws_three_drills_with_what_they_build_on(tmp_path):
    path = drills.mock_interview(3, seed=0, folder=tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    blanks = [c.id for c in nb.cells if c.get("id", "").startswith("impl_")]
    assert len(blanks) == 3
    assert sum(c.get("id", "").startswith("drill_") for c in nb.cells) == 0  # no nbgrader cells in self-study
    names = [d.name for d in drills.DRILLS if "impl_" + "_".join(d.objects) in blanks]
    defined = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for name in names:  # each drill's check and reveal come along
        assert f"report({name!r}, {name})" in defined and f"reveal({name!r})" in defined
    seeds = {tuple(sorted(c.id for c in nbformat.read(str(drills.mock_interview(3, seed=s, folder=tmp_path / str(s))),
                                                       as_version=4).cells if c.get("id", "").startswith("impl_")))
             for s in range(1, 6) if (tmp_path / str(s)).mkdir() is None}
    assert len(seeds) > 1, "the draw is random"


def test_a_drill_that_builds_on_others_gets_them_provided():
    nb = nbformat.read(str(drills.pristine_notebook_path()), as_version=4)
    needs = drills._needs(nb, drills._groups(nb), "EncoderLayer", drills._provided_definitions())
    assert needs is not None and {"MultiHeadAttention", "scaled_dot_product_attention", "FeedForward",
                                  "ResidualLayerNorm", "LayerNorm"} <= set(needs)
    assert needs.index("scaled_dot_product_attention") < needs.index("MultiHeadAttention")


def test_mock_interview_draws_one_drill_per_difficulty_tier(tmp_path):
    for seed in range(5):
        (tmp_path / str(seed)).mkdir()
        nb = nbformat.read(str(drills.mock_interview(3, seed=seed, folder=tmp_path / str(seed))), as_version=4)
        blanks = {c.id for c in nb.cells if c.get("id", "").startswith("impl_")}
        minutes = [d.minutes for d in drills.DRILLS if "impl_" + "_".join(d.objects) in blanks]
        tiers = sorted(next(i for i, (lo, hi) in enumerate(drills.TIERS) if lo <= m <= hi) for m in minutes)
        assert tiers == [0, 1, 2], f"seed {seed}: one easy, one medium, one hard drill, got minutes {minutes}"


def test_the_english_edition_groups_the_same_drills(monkeypatch, tmp_path):
    """In workspace/en/ (make lab COURSE_LANG=en) resets and mock interviews read notebooks/en/, whose drill
    headers are English: the same drills, the same cells."""
    chinese = nbformat.read(str(drills.pristine_notebook_path()), as_version=4)
    (tmp_path / "workspace" / "en").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "workspace" / "en")
    path = drills.pristine_notebook_path()
    assert path.parent.name == "en"
    english = nbformat.read(str(path), as_version=4)
    assert drills._groups(english) == drills._groups(chinese) and len(drills._groups(english)) == len(drills.DRILLS)
    mock = nbformat.read(str(drills.mock_interview(3, seed=0, folder=tmp_path)), as_version=4)
    assert any(c.source.startswith("## Drill ") for c in mock.cells if c.cell_type == "markdown")
