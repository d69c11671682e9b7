"""No leak: what a learner gets (release/ and notebooks/) holds no solution code, no hidden test,
no lesson source and no answer key, and its setup does not load the reference package."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline_helpers import (
    FORBIDDEN_ANYWHERE,
    FORBIDDEN_IN_CODE,
    LESSONS,
    ROOT,
    build,
    exercise_names,
    read_nb,
    snippets_in,
    solution_snippets,
)
from tools.simulate_class import nbgrader


def learner_notebooks(name):
    return {"release": ROOT / "release" / name / f"{name}.ipynb", "notebooks": ROOT / "notebooks" / f"{name}.ipynb",
            "notebooks/en": ROOT / "notebooks" / "en" / f"{name}.ipynb",
            "en/release": ROOT / "en" / "release" / name / f"{name}.ipynb"}


def allowed_snippets(source_nb):
    """What a learner legitimately sees: provided cells and the unmarked parts of exercise cells."""
    parts = []
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") or cell.metadata.get("jupyter", {}).get("source_hidden"):
            kept, inside = [], False
            for line in cell.source.split("\n"):
                text = line.strip()
                if text == build.BEGIN_SOLUTION:
                    inside = True
                elif text == build.END_SOLUTION:
                    inside = False
                    parts.append("\n".join(kept))
                    kept = []
                elif not inside:
                    kept.append(line)
            parts.append("\n".join(kept))
    return snippets_in(parts)


@pytest.mark.parametrize("name", LESSONS)
@pytest.mark.parametrize("release", ["release", "en/release"])
def test_release_folder_holds_only_the_notebook(name, release):
    folder = ROOT / release / name
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == [f"{name}.ipynb"]


def test_learner_folders_hold_only_learner_notebooks():
    stray = [str(p.relative_to(ROOT)) for folder in ("release", "notebooks", "en/release")
             for p in (ROOT / folder).rglob("*")
             if p.is_file() and p.suffix != ".ipynb" and p.name != ".gitkeep"]
    assert not stray, f"non-notebook files reach learners: {stray}"
    extra = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} - set(LESSONS)
    assert not extra, f"notebooks/ holds notebooks without a lesson: {sorted(extra)}"


@pytest.mark.parametrize("name", LESSONS)
@pytest.mark.parametrize("edition", ["release", "notebooks", "notebooks/en", "en/release"])
def test_no_solution_hidden_test_or_answer_in_learner_notebooks(name, edition):
    path = learner_notebooks(name)[edition]
    nb = read_nb(path)
    text = "\n".join(c.source for c in nb.cells)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for patterns, where in ((FORBIDDEN_ANYWHERE, text), (FORBIDDEN_IN_CODE, code)):
        for pattern, what in patterns:
            match = pattern.search(where)
            assert not match, f"{edition}/{name}: {what} found: {match.group(0)!r}"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{edition}/{name} has outputs"
    assert "lessons/" not in json.dumps(nb.metadata) and "jupytext" not in nb.metadata

    allowed = allowed_snippets(read_nb(ROOT / "source" / name / f"{name}.ipynb"))
    seen = snippets_in(c.source for c in nb.cells)
    for obj_name in exercise_names(name):
        leaked = sorted((solution_snippets(obj_name) & seen) - allowed)
        assert not leaked, f"{edition}/{name}: reference code of {obj_name} leaked: {leaked}"


@pytest.mark.parametrize("name", [n for n in LESSONS if exercise_names(n)])
@pytest.mark.parametrize(("release", "lang"), [("release", "zh"), ("en/release", build.EN)])
def test_stubs_replace_every_solution(name, release, lang):
    nb = read_nb(learner_notebooks(name)[release])
    stub = build.load_nbgrader_config(lang).ClearSolutions.code_stub["python"].split("\n")[-1].strip()
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solution_cells and all(stub in c.source for c in solution_cells)
    assert "NotImplementedError" in stub


@pytest.mark.slow  # real nbgrader: `make test-fast` leaves it out
def test_generate_assignment_copies_no_maintainer_files(tmp_path):
    """Junk next to a source notebook (lesson file, answer key, database, caches) stays out of release/."""
    name = LESSONS[0]
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "source" / name, tmp_path / "source" / name)
    junk = tmp_path / "source" / name
    shutil.copy(ROOT / "lessons" / f"{name}.py", junk)
    (junk / "answer_keys").mkdir()
    (junk / "answer_keys" / f"{name}.ipynb").write_text("{}")
    (junk / "solutions").mkdir()
    (junk / "solutions" / "mha.py").write_text("# reference")
    (junk / "gradebook.db").write_text("")
    (junk / ".secret").write_text("")
    (junk / "__pycache__").mkdir()
    (junk / "__pycache__" / "x.pyc").write_text("")
    nbgrader(tmp_path, "generate_assignment", name, "--no-db", "--force")
    released = sorted(str(p.relative_to(tmp_path / "release" / name)) for p in (tmp_path / "release" / name).rglob("*"))
    assert released == [f"{name}.ipynb"]


SETUP_PROBE = r"""
import json, sys
import nbformat
first = None
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    setup = [code[0]] + [c for c in code if c.metadata.get("jupyter", {}).get("source_hidden")]
    namespace = {"__name__": "__main__"}
    for cell in setup:
        exec(compile(cell.source, path, "exec"), namespace)
    if "solutions" in sys.modules:
        first = path
        break
print(json.dumps({"checked": len(sys.argv) - 1, "first_to_load_solutions": first}))
"""


def test_learner_setup_cells_do_not_import_solutions():
    """Run the setup and provided cells of every learner notebook; ``solutions`` must stay unloaded."""
    paths = [str(p) for name in LESSONS for p in learner_notebooks(name).values()]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", SETUP_PROBE, *paths], capture_output=True, text=True,
                          cwd=ROOT / "notebooks", env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["checked"] == len(paths)
    assert result["first_to_load_solutions"] is None, f"{result['first_to_load_solutions']}: its setup loads solutions"
