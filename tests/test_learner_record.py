"""The learner's own record (tutor/store.py, issue 39 part 4): the graded cells' and checks' verdicts
and the mistakes named over time, kept in the workspace with the drill bank's progress (one file),
shown by ``tutor.progress()`` in the course language; nothing written outside the workspace or under
nbgrader, and nothing sent anywhere."""
import ast
import json
from pathlib import Path

import pytest

import catalogue
import tutor
from tutor import drills, lang, store
from tutor.grading import TestFailure, check, report, test_cell
from tutor.lang import HAN
from tutor.mistakes import MISTAKES


@pytest.fixture
def record(monkeypatch, tmp_path):
    monkeypatch.setenv(store.VARIABLE, str(tmp_path / store.FILE))
    monkeypatch.delenv(lang.VARIABLE, raising=False)
    return tmp_path / store.FILE


def _wrong(check_name, mistake):
    return next(obj for name, obj, mid in catalogue.cases("wrong") if name == check_name and mid == mistake)


def _reference(name):
    from catalogue.reference import load

    return load()[name]


def _read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_graded_cell_keeps_its_last_verdict_and_a_check_its_mistakes(record):
    with pytest.raises(TestFailure):
        with test_cell("sdpa_matches_reference"):
            check("scaled_dot_product_attention", _wrong("scaled_dot_product_attention", "no_scale"))
    with test_cell("softmax_is_stable", keep_going=True):  # the self-study edition: ❌ to stderr, no raise
        raise AssertionError("not yet")
    with test_cell("softmax_is_stable", keep_going=True):
        check("softmax", _reference("softmax"))
    data = _read(record)
    assert {g: (e["passed"], e["runs"]) for g, e in data["cells"].items()} == {
        "sdpa_matches_reference": (False, 1), "softmax_is_stable": (True, 2)}
    assert {c: e["passed"] for c, e in data["checks"].items()} == {"scaled_dot_product_attention": False,
                                                                   "softmax": True}
    assert [(m["check"], m["mistakes"]) for m in data["mistakes"]] == [("scaled_dot_product_attention", ["no_scale"])]


def test_progress_shows_each_chapter_the_drills_and_the_mistakes_over_time(record, capsys):
    report("scaled_dot_product_attention", _wrong("scaled_dot_product_attention", "no_scale"))
    report("scaled_dot_product_attention", _wrong("scaled_dot_product_attention", "no_scale"))
    report("softmax", _wrong("softmax", "softmax_unstable"))
    report("softmax", _reference("softmax"))  # fixed since
    with test_cell("softmax_is_stable", keep_going=True):
        pass
    drills.give_up("make_pad_mask")
    capsys.readouterr()
    tutor.progress()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"学习进度 / progress ({store.FILE})"
    chapter = next(line for line in lines if line.startswith("01_attention"))
    assert chapter.startswith("01_attention  1/5  ✅ softmax_is_stable, · attention_numpy_matches_reference")
    assert any(line.startswith("02_multihead  0/3  · 还没运行 / not run yet") for line in lines)
    assert f"手撕练习 / drills  0/{len(drills.DRILLS)}  (tutor.drills.progress())" in lines
    named = {line.split()[1]: line for line in lines if line.startswith("  ")}
    assert list(named) == ["no_scale", "softmax_unstable"]  # in the order first named
    assert named["no_scale"].startswith("  ❌ no_scale ×2 (") and "还没改好 / not fixed yet" in named["no_scale"]
    assert named["softmax_unstable"].startswith("  ✅ softmax_unstable ×1 (") and "现在通过 / passes now" in \
        named["softmax_unstable"]
    assert MISTAKES["no_scale"][0] in named["no_scale"] and MISTAKES["no_scale"][1] in named["no_scale"]


def test_progress_speaks_english_in_the_english_edition(record, capsys, monkeypatch):
    monkeypatch.setenv(lang.VARIABLE, "en")
    report("softmax", _wrong("softmax", "softmax_unstable"))
    capsys.readouterr()
    tutor.progress()
    out = capsys.readouterr().out
    assert out.startswith(f"progress ({store.FILE})") and "softmax_unstable ×1" in out and "not fixed yet" in out
    assert not HAN.search(out), out


def test_nothing_is_kept_outside_the_workspace_or_under_nbgrader(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(store.VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)  # notebooks/ or a class's hub: not a workspace
    report("softmax", _reference("softmax"))
    with test_cell("softmax_is_stable", keep_going=True):
        pass
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "workspace").mkdir()
    monkeypatch.chdir(tmp_path / "workspace")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    report("softmax", _reference("softmax"))
    assert list((tmp_path / "workspace").iterdir()) == []
    monkeypatch.delenv("NBGRADER_EXECUTION")
    report("softmax", _reference("softmax"))
    assert [p.name for p in (tmp_path / "workspace").iterdir()] == [store.FILE]
    capsys.readouterr()
    tutor.progress()
    assert "progress (progress.json)" in capsys.readouterr().out


def test_an_unwritable_or_damaged_record_never_stops_a_check(record, capsys):
    record.write_text("{ not json")
    assert report("softmax", _reference("softmax")).passed  # the damaged file is replaced, not read
    assert _read(record)["checks"]["softmax"]["passed"]
    record.unlink()
    record.mkdir()  # a folder where the file should be: the write fails, the check does not
    assert report("softmax", _reference("softmax")).passed
    assert "✅" in capsys.readouterr().out
    assert [p.name for p in record.parent.iterdir()] == [store.FILE]  # no temporary file left behind


def test_the_history_keeps_the_newest_entries(record, monkeypatch):
    monkeypatch.setattr(store, "HISTORY", 3)
    wrong = _wrong("softmax", "softmax_unstable")
    for _ in range(5):
        report("softmax", wrong)
    assert len(_read(record)["mistakes"]) == 3


def test_the_record_is_never_sent_anywhere():
    """tutor/store.py imports no network module (the record stays a file in the workspace)."""
    tree = ast.parse(Path(store.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module}
    assert not imported & {"socket", "urllib", "http", "requests", "smtplib", "ftplib", "ssl"}, imported
