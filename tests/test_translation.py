"""The English edition (tools/translate.py, tools/build.py): every markdown cell of every lesson has current
English in lessons/en/NN_topic.po, and notebooks/en/ and answer_keys/en/ are the Chinese editions
with that English: the same code cells, cell ids and outputs. (That notebooks/en/ is byte for byte what the
build makes is tests/test_build.py's comparison of every file under notebooks/.)"""
import polib
import pytest

from pipeline_helpers import LESSONS, ROOT, read_nb
from tools import build, translate
from tools.paths import ANSWER_KEYS
from tutor.lang import english_code

load_config = build.load_nbgrader_config


@pytest.mark.parametrize("name", LESSONS)
def test_every_markdown_cell_has_current_english(name):
    found = translate.problems(name)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", LESSONS)
def test_english_notebook_has_the_same_code_cells_and_ids(name):
    """The same cells, ids and metadata; each code cell is the Chinese edition's in English (the language
    switch in the setup cell, English stubs, docstrings and messages: tutor.lang.english_code)."""
    chinese = read_nb(ROOT / "notebooks" / f"{name}.ipynb")
    english = read_nb(ROOT / "notebooks" / "en" / f"{name}.ipynb")
    assert [(c.id, c.cell_type) for c in english.cells] == [(c.id, c.cell_type) for c in chinese.cells]
    setup = next(c.id for c in chinese.cells if c.cell_type == "code")
    for zh, en in zip(chinese.cells, english.cells):
        assert en.metadata == zh.metadata, f"{name}: cell {en.id} metadata"
        if en.cell_type == "code":
            assert en.source == english_code_cell(zh.source, zh.id == setup), (
                f"{name}: code cell {en.id} is not the Chinese edition's in English")
        else:
            assert not translate.chinese_outside_code(en.source), f"{name}: Chinese left in markdown cell {en.id}"


def english_code_cell(source, setup):
    """A Chinese self-study code cell as the English edition has it."""
    zh_stub = load_config().ClearSolutions.code_stub["python"].split("\n")
    en_stub = load_config(build.EN).ClearSolutions.code_stub["python"].split("\n")
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if line.strip() in zh_stub:
            lines[i] = line[:len(line) - len(line.lstrip())] + en_stub[zh_stub.index(line.strip())]
    source = "\n".join(lines)
    if setup:
        report = "\nfrom tutor.grading import report"
        source = source.replace(report, f"\n{build.EN_SETUP}{report}")
    return english_code(source)


@pytest.mark.parametrize("name", LESSONS)
def test_english_answer_key_is_the_english_notebook_solved(name):
    """answer_keys/en/ is the English notebook with the solutions in place, executed on its own (its outputs are
    English: tests/test_english_edition.py), with each markdown cell's current English."""
    path = ANSWER_KEYS / "en" / f"{name}.ipynb"
    assert path.exists(), f"{path.relative_to(ROOT)} missing -- run `make build`"
    key = read_nb(path)
    assert key == build.english_answer_key(name), (
        f"{path.relative_to(ROOT)}: its English markdown is stale -- `.venv/bin/python tools/build.py --only {name} "
        f"--no-execute` rewrites it")
    fresh = build.answer_key_notebook(name, "en")
    assert [(c.id, c.cell_type, c.source) for c in key.cells] == [(c.id, c.cell_type, c.source) for c in fresh.cells], (
        f"{path.relative_to(ROOT)} is stale -- execute it: "
        f"`.venv/bin/python tools/build.py --only {name} --edition en`")


def test_english_editions_hold_only_lessons():
    for folder in (ROOT / "notebooks" / "en", ANSWER_KEYS / "en"):
        assert sorted(p.stem for p in folder.glob("*.ipynb")) == LESSONS, folder.relative_to(ROOT)
    assert not translate.orphans(), "a catalogue without a lesson: run `.venv/bin/python -m tools.translate update`"


LESSON = '''# %% [markdown]
# # 98 标题
#
# 第一段。

# %%
import math

# %% [markdown]
# 第二段：`True` = 可以看。
'''


@pytest.fixture
def lesson(tmp_path, monkeypatch):
    """A two-cell lesson and its English catalogue in a temporary lessons/."""
    monkeypatch.setattr(build, "LESSONS", tmp_path)
    monkeypatch.setattr(build, "CATALOGUES", tmp_path / "en")
    (tmp_path / "98_toy.py").write_text(LESSON, encoding="utf-8")
    assert translate.update("98_toy") == 0
    catalogue = polib.pofile(str(tmp_path / "en" / "98_toy.po"))
    assert [e.msgstr for e in catalogue] == ["", ""]
    for entry, english in zip(catalogue, ["# 98 Title\n\nThe first paragraph.", "Second: `True` = may attend."]):
        entry.msgstr = english
    catalogue.save()
    return tmp_path


def test_a_changed_chinese_cell_is_stale_until_its_english_is_revised(lesson):
    assert translate.problems("98_toy") == []
    notebook = build.build_notebook("98_toy", "selfstudy", "en")
    assert [c.source for c in notebook.cells if c.cell_type == "markdown"] == [
        build.GENERATED.format(name="98_toy") + "# 98 Title\n\nThe first paragraph.", "Second: `True` = may attend."]

    path = lesson / "98_toy.py"
    path.write_text(path.read_text(encoding="utf-8").replace("第二段：", "第二段改了：")
                    + "\n# %% [markdown]\n# 新的一段。\n", encoding="utf-8")
    found = translate.problems("98_toy")
    assert len(found) == 2, found
    assert "98_toy: markdown cell 2 ('第二段改了" in found[0] and "changed since it was translated" in found[0]
    assert "markdown cell 3 ('新的一段。') has no English" in found[1]
    assert "tools.translate update 98_toy" in found[0]
    # the build still works: a cell without current English stays Chinese (gettext's rule)
    notebook = build.build_notebook("98_toy", "selfstudy", "en")
    assert [c.source for c in notebook.cells if c.cell_type == "markdown"][1:] == ["第二段改了：`True` = 可以看。",
                                                                                   "新的一段。"]

    assert translate.update("98_toy") == 1
    entries = {e.msgid: e for e in polib.pofile(str(lesson / "en" / "98_toy.po"))}
    changed = entries["第二段改了：`True` = 可以看。"]
    assert changed.fuzzy and changed.msgstr == "Second: `True` = may attend."
    assert changed.previous_msgid == "第二段：`True` = 可以看。"
    assert entries["新的一段。"].msgstr == "" and not entries["# 98 标题\n\n第一段。"].fuzzy
    found = translate.problems("98_toy")
    assert "markdown cell 2" in found[0] and "marked fuzzy" in found[0]
    assert "markdown cell 3" in found[1] and "has no English" in found[1]

    catalogue = polib.pofile(str(lesson / "en" / "98_toy.po"))
    for entry in catalogue:
        entry.flags, entry.previous_msgid = [], None
        entry.msgstr = entry.msgstr or "新的 paragraph."
    catalogue.save()
    assert translate.problems("98_toy") == ["98_toy: markdown cell 3 ('新的一段。'): its English still holds Chinese "
                                            "'新的' outside code: translate it in lessons/en/98_toy.po"]


def test_an_inserted_cell_shifts_no_translation(lesson):
    """Entries are keyed by the Chinese text, not by position: a cell inserted at the top leaves the
    others translated."""
    path = lesson / "98_toy.py"
    path.write_text("# %% [markdown]\n# 前言。\n\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    found = translate.problems("98_toy")
    assert len(found) == 1 and "markdown cell 1 ('前言。') has no English" in found[0], found
    assert translate.update("98_toy") == 0
    assert polib.pofile(str(lesson / "en" / "98_toy.po")).percent_translated() == 66


def test_a_renamed_or_split_lesson_takes_its_english_along(lesson, capsys):
    """The other catalogues are a compendium: cells that move to another lesson keep their English
    (changed ones as fuzzy), and `update` of every lesson deletes the catalogue of a lesson that is gone."""
    text = (lesson / "98_toy.py").read_text(encoding="utf-8")
    (lesson / "98_toy.py").unlink()
    (lesson / "97_moved.py").write_text(text.replace("# 98 标题", "# 97 标题"), encoding="utf-8")
    assert [p.name for p in translate.orphans()] == ["98_toy.po"]
    translate.main(["update"])
    assert "98_toy.po: deleted" in capsys.readouterr().out and not translate.orphans()
    entries = list(polib.pofile(str(lesson / "en" / "97_moved.po")))
    assert [(e.msgstr, e.fuzzy) for e in entries] == [("# 98 Title\n\nThe first paragraph.", True),
                                                      ("Second: `True` = may attend.", False)]


def test_a_cell_moved_out_of_an_updated_lesson_keeps_its_english(lesson):
    """A chapter split: the old lesson's catalogue is updated first (the moved cell becomes obsolete
    there), the new lesson's catalogue exists with the cell still empty; its English is found anyway."""
    path = lesson / "98_toy.py"
    first, second = path.read_text(encoding="utf-8").split("# %% [markdown]\n# 第二段")
    path.write_text(first, encoding="utf-8")
    (lesson / "99_split.py").write_text("# %%\nimport math\n\n# %% [markdown]\n# 第二段" + second, encoding="utf-8")
    (lesson / "en" / "99_split.po").write_text('msgid "第二段：`True` = 可以看。"\nmsgstr ""\n', encoding="utf-8")
    translate.update("98_toy")
    assert [e.obsolete for e in polib.pofile(str(lesson / "en" / "98_toy.po"))] == [False, True]
    translate.update("99_split")
    assert [e.msgstr for e in polib.pofile(str(lesson / "en" / "99_split.po"))] == ["Second: `True` = may attend."]
    assert translate.problems("99_split") == []
