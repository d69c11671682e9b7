"""The build is in sync: the committed generated files are exactly what tools/build.py makes.

One rebuild with ``--no-execute`` into a temporary copy (the working tree is never touched);
then source/, release/, notebooks/ and en/ are compared byte for byte, and the answer keys' cells
with the solved self-study notebooks the lessons make (their outputs are checked by
tests/test_nbval.py; here, that they show no failed check).
"""
import re
import subprocess
import sys

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

from pipeline_helpers import LESSONS, ROOT, build, copy_build_inputs, nbgrader_meta, read_nb
from tools.paths import ANSWER_KEYS


def generated_files(root):
    """Relative paths of every generated file of the plain editions under ``root`` (the English class's
    en/source/ and en/release/ included)."""
    files = set()
    for folder in ("source", "release", "notebooks", "en/source", "en/release"):
        if (root / folder).exists():
            files |= {str(p.relative_to(root)) for p in (root / folder).rglob("*")
                      if p.is_file() and ".ipynb_checkpoints" not in p.parts and p.name != ".gitkeep"}
    return files


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh ``--no-execute`` build of every lesson in a temporary copy of the build inputs."""
    dest = tmp_path_factory.mktemp("fresh_build")
    copy_build_inputs(dest)
    proc = subprocess.run([sys.executable, str(dest / "tools" / "build.py"), "--no-execute"],
                          capture_output=True, text=True, cwd=dest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def test_there_are_lessons():
    assert LESSONS, "lessons/ holds no NN_topic.py"
    assert LESSONS[0] == "00_orientation"


@pytest.mark.slow  # a whole build in a temporary copy: `make test-fast` leaves it out
def test_committed_editions_match_a_fresh_build(fresh):
    committed, rebuilt = generated_files(ROOT), generated_files(fresh)
    assert committed == rebuilt, (
        f"missing from the repository: {sorted(rebuilt - committed)}; "
        f"not produced by the build: {sorted(committed - rebuilt)} -- run `make build`")
    stale = [rel for rel in sorted(rebuilt) if (ROOT / rel).read_bytes() != (fresh / rel).read_bytes()]
    assert not stale, f"out of date (edit lessons/ or solutions/, then run `make build`): {stale}"


@pytest.mark.parametrize("name", LESSONS)
def test_answer_key_cells_match_the_lesson(name):
    """The answer key is the self-study notebook with the solutions in place, executed."""
    key_path = ANSWER_KEYS / f"{name}.ipynb"
    assert key_path.exists(), f"{key_path.relative_to(ROOT)} missing -- run `make build`"
    key, fresh_key = read_nb(key_path), build.answer_key_notebook(name)
    stale = (f"{name}: the answer key is stale -- rebuild it with execution: "
             f"`.venv/bin/python tools/build.py --only {name}` (or `make build`; --no-execute leaves it as it was)")
    assert [c.cell_type for c in key.cells] == [c.cell_type for c in fresh_key.cells], stale
    for k, s in zip(key.cells, fresh_key.cells):
        assert k.source == s.source, f"{stale} (cell {s.get('id')})"
        assert k.metadata == s.metadata, f"{stale} (cell {s.get('id')} metadata)"
    code_outputs = [o for c in key.cells if c.cell_type == "code" for o in c.outputs]
    assert code_outputs, f"{name}: the answer key has no outputs; was it built with --no-execute?"


@pytest.mark.parametrize("edition", ["", "en"])
@pytest.mark.parametrize("name", LESSONS)
def test_solved_selfstudy_notebook_shows_only_green_checks(name, edition):
    """Solved, every check a learner runs says ✅ (tests/test_nbval.py proves it still does), in both editions."""
    key = read_nb(ANSWER_KEYS / edition / f"{name}.ipynb")
    exercises = {n.strip() for c in build.read_lesson(name) if "exercise" in c.metadata
                 for n in str(c.metadata["exercise"]).split(",")}
    checked = 0
    for cell in key.cells:
        if cell.cell_type != "code":
            continue
        errors = [o.get("ename") for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{name}: cell {cell.id} raised {errors} in the solved notebook"
        call = re.search(r"^(?:_ = report|    check)\('(\w+)', (\w+)\)", cell.source, re.M)
        if call and call.group(2) in exercises:  # (00 also checks a wrong softmax on purpose)
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert text.startswith("✅") and "❌" not in text, f"{name}: check cell {cell.id} is not green:\n{text}"
            checked += 1
    assert checked or not exercises, f"{name}: no check cell found for the exercises {sorted(exercises)}"


def compare_only_placeholders():
    """What the rules of tools/nbval_sanitize.cfg that apply only when nbval compares write (``~NUM`` ...)."""
    stored = {replace.strip() for _, replace in build.stored_sanitize_patterns()}
    every = get_sanitize_patterns(build.SANITIZE_FILE.read_text(encoding="utf-8"))
    return sorted({replace.strip() for _, replace in every} - stored)


def test_some_rules_apply_only_when_comparing():
    assert {"~NUM", "PROGRESS-BAR"} <= set(compare_only_placeholders())
    assert "DURATION" in {replace for _, replace in build.stored_sanitize_patterns()}


@pytest.mark.parametrize("name", LESSONS)
def test_answer_key_holds_real_outputs(name):
    """What a reader opens (the answer key, the web edition) shows real numbers and figures: every
    matplotlib figure is stored as a PNG, and no placeholder of a rule that nbval applies only when
    comparing is stored (``~NUM``, ``PROGRESS-BAR``)."""
    key = read_nb(ANSWER_KEYS / f"{name}.ipynb")
    placeholders = compare_only_placeholders()
    for cell in (c for c in key.cells if c.cell_type == "code"):
        for output in cell.outputs:
            data = output.get("data", {})
            if data.get("text/plain", "").startswith("<Figure size"):
                assert "image/png" in data, f"{name}: cell {cell.id} stores a figure without its PNG -- `make build`"
            text = output.get("text", "") + "".join(v for v in data.values() if isinstance(v, str) and
                                                    not v.startswith("iVBOR"))
            found = [p for p in placeholders if p in text]
            assert not found, f"{name}: cell {cell.id} stores {found} instead of the real output -- `make build`"


def test_no_answer_key_without_a_lesson():
    keys = {p.stem for p in ANSWER_KEYS.glob("*.ipynb")}
    assert keys <= set(LESSONS), f"answer keys without a lesson: {sorted(keys - set(LESSONS))}"


@pytest.mark.parametrize("name", LESSONS)
def test_source_notebook_is_a_clean_nbgrader_notebook(name):
    nb = read_nb(ROOT / "source" / name / f"{name}.ipynb")
    assert nb.metadata.kernelspec.name == "python3"
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells]
    assert len(ids) == len(set(ids)), f"{name}: duplicate grade_ids"
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        assert meta["schema_version"] == 3
        assert meta["locked"] or meta["solution"], f"{name}: cell {meta['grade_id']} is neither locked nor a solution"
        if meta["grade"]:
            assert meta["points"] > 0
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_bad_lesson_metadata_gives_a_clear_error(tmp_path, monkeypatch):
    lesson = tmp_path / "98_broken.py"
    lesson.write_text('# %%\nimport math\n\n# %% grade_id="shape_ok" points=0\nassert True\n', encoding="utf-8")
    monkeypatch.setattr(build, "LESSONS", tmp_path)
    with pytest.raises(build.LessonError, match="points > 0"):
        build.build_notebook("98_broken", "source")
    lesson.write_text('# %%\nimport math\n\n# %% exercise="softmax"\n\n# %% provided="softmax"\n', encoding="utf-8")
    with pytest.raises(build.LessonError, match="both graded and provided"):
        build.build_notebook("98_broken", "source")
    lesson.write_text('# %%\nimport math\n\n# %% exercise="no_such_thing"\n', encoding="utf-8")
    with pytest.raises(build.LessonError, match="no object named"):
        build.build_notebook("98_broken", "source")


@pytest.mark.parametrize("name", LESSONS)
def test_stated_total_matches_the_points(name):
    """The chapter says how many points it has ("本章共 N 分"); it must be what nbgrader counts."""
    nb = read_nb(ROOT / "source" / name / f"{name}.ipynb")
    points = sum(nbgrader_meta(c)["points"] for c in nb.cells if nbgrader_meta(c).get("grade"))
    stated = re.findall(r"本章共 ?\**(\d+) ?分", "".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    if points:
        assert stated == [str(points)], f"{name}: the text says {stated} points, the graded cells add up to {points}"
    else:
        assert not stated, f"{name}: the text promises points, but no cell is graded"


@pytest.mark.parametrize("doc", build.KEYS_DOCS, ids=lambda p: p.name)
def test_docs_list_the_lesson_keys_the_build_knows(doc):
    """The table of lesson keys in ARCHITECTURE.md and MAINTAINING.md is generated from LESSON_KEYS."""
    text = doc.read_text(encoding="utf-8")
    assert build.with_lesson_keys(text) == text, f"{doc.name}'s lesson keys are stale: run `make build`"


def test_a_demo_cell_must_not_feed_a_later_cell(tmp_path, monkeypatch):
    """autograde does not run demo cells, so the build refuses one whose names a later cell reads
    (at top level or as a global inside a function), and accepts one whose names are rebound first."""
    monkeypatch.setattr(build, "LESSONS", tmp_path)
    lesson = tmp_path / "98_demo.py"
    for later, ok in [("print(table)", False), ("def f():\n    return table", False),
                      ("table = 2\nprint(table)", True), ("def f(table):\n    return table", True)]:
        lesson.write_text(f"# %%\nimport math\n\n# %% demo=true\ntable = 1\n\n# %%\n{later}\n", encoding="utf-8")
        if ok:
            build.read_lesson("98_demo")
        else:
            with pytest.raises(build.LessonError, match=r"reads \['table'\], bound by a demo cell"):
                build.read_lesson("98_demo")
    lesson.write_text('# %%\nimport math\n\n# %% demo=true grade_id="x" points=1\nassert True\n', encoding="utf-8")
    with pytest.raises(build.LessonError, match="demo=true goes on a plain code cell"):
        build.read_lesson("98_demo")


def _key(cells):
    """A tiny answer key: ``cells`` is a list of (id, source, outputs)."""
    nb = nbformat.v4.new_notebook()
    for cell_id, source, outputs in cells:
        cell = nbformat.v4.new_code_cell(source, id=cell_id, execution_count=1)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        nb.cells.append(cell)
    return nb


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _figure(png):
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": png, "text/plain": "<Figure size 640x480 with 1 Axes>"}}


def test_a_rebuild_keeps_the_committed_outputs_of_a_measurement(tmp_path):
    """A clean tree after any build: a timing cell (its stored text holds a placeholder of a ``stored:
    sanitised`` rule) whose source is unchanged and whose outputs nbval could not tell apart keeps the
    committed outputs, figure and other numbers included; anything else gets the new run's outputs."""
    committed = _key([
        ("timing", "measure()", [_stream("T=512: naive ~4 MiB, DURATION\n"), _figure("OLDPNG")]),
        ("plot", "draw()", [_figure("OLDPNG")]),
        ("changed", "measure(2)", [_stream("took DURATION\n")]),
        ("numbers", "show()", [_stream("loss ~5.30\n"), _figure("OLDPNG")]),
        ("other", "measure()", [_stream("T=512: naive ~4 MiB, DURATION\n")]),
        ("speed", "speed()", [_stream("speed-up SPEEDUP\n")]),
    ])
    path = tmp_path / "key.ipynb"
    nbformat.write(committed, str(path))
    rebuilt = _key([
        ("timing", "measure()", [_stream("T=512: naive ~48 MiB, DURATION\n"), _figure("NEWPNG")]),  # volatile only
        ("plot", "draw()", [_figure("NEWPNG")]),                        # a deterministic figure redrawn
        ("changed", "measure(3)", [_stream("took DURATION\n")]),        # its code changed
        ("numbers", "show()", [_stream("loss ~5.30\n"), _figure("NEWPNG")]),  # no timing: a seeded cell, redrawn
        ("other", "measure()", [_stream("T=512: naive ~4 MiB, DURATION\n"), _figure("NEWPNG")]),  # one more output
        ("speed", "speed()", [_stream("speed-up SPEEDUP, now more\n")]),  # nbval would see the difference
    ])
    kept = build.keep_stable_outputs(rebuilt, path)
    outputs = {c.id: c.outputs for c in kept.cells}
    assert outputs["timing"][0]["text"] == "T=512: naive ~4 MiB, DURATION\n"
    assert outputs["timing"][1]["data"]["image/png"] == "OLDPNG"
    assert outputs["plot"][0]["data"]["image/png"] == "NEWPNG"
    assert outputs["changed"] == rebuilt.cells[2].outputs
    assert outputs["numbers"][1]["data"]["image/png"] == "NEWPNG"
    assert len(outputs["other"]) == 2
    assert outputs["speed"][0]["text"] == "speed-up SPEEDUP, now more\n"
    assert build.keep_stable_outputs(rebuilt, tmp_path / "missing.ipynb") is rebuilt
