"""Helpers shared by the tests: the one module test files import from (no test module imports another;
tests/test_structure.py holds it). nbgrader itself runs through the class simulation's one wrapper,
``tools.simulate_class.nbgrader``.

Sections: notebooks and chapters; leaks; nbval re-runs; the idiom runner (a chapter's notebook run with
plain ``exec``); JupyterLab in a browser (tests/browser/).
"""
import ast
import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")  # the idiom runner's plots: no window, no inline backend

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import solutions  # noqa: E402
from catalogue.idioms import IDIOMS  # noqa: E402
from grader import audit  # noqa: E402
from tools import build  # noqa: E402 - the repository root is on pytest's pythonpath (pyproject.toml)
from tools.paths import ANSWER_KEYS, ROOT, SOURCE  # noqa: E402

LESSONS = build.lesson_names()
# The wrong catalogue's unstable softmax (no max subtracted) overflows on purpose: the tests that run it
# expect NumPy's two warnings; any other warning is an error (pyproject.toml, filterwarnings).
OVERFLOWS_ON_PURPOSE = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                                  "ignore:invalid value encountered:RuntimeWarning")


def read_nb(path):
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell):
    return cell.metadata.get("nbgrader", {})


def graded_chapters():
    """Chapters in source/ with at least one graded cell: the one definition of "graded chapters"."""
    return [p.parent.name for p in sorted((ROOT / "source").glob("*/*.ipynb"))
            if any(nbgrader_meta(c).get("grade") for c in read_nb(p).cells)]


def graded_cells(nb):
    return [c for c in nb.cells if nbgrader_meta(c).get("grade")]


def copy_build_inputs(dest):
    """Copy what tools/build.py reads into ``dest`` so a build there leaves the repository alone."""
    for rel in ("lessons", "tools", "solutions"):  # the build writes solutions/__init__.py from the registry
        shutil.copytree(ROOT / rel, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", dest)
    (dest / "docs").mkdir(exist_ok=True)
    for doc in ("ARCHITECTURE.md", "MAINTAINING.md"):  # the build writes its table of lesson keys into them
        shutil.copy(ROOT / "docs" / doc, dest / "docs")


# ---------------------------------------------------------------- leaks (test_leaks, test_site_pages)

FORBIDDEN_ANYWHERE = [
    (re.compile(r"BEGIN SOLUTION|END SOLUTION"), "solution markers"),
    (re.compile(r"BEGIN HIDDEN|END HIDDEN"), "hidden-test markers"),
]
FORBIDDEN_IN_CODE = [
    (re.compile(r"(?<![\w.])grade\("), "a hidden grade(...) call"),
    (re.compile(r"tutor\.grading import grade\b"), "the hidden-test import"),
    (re.compile(r"^\s*(import solutions|from solutions\b)", re.MULTILINE), "an import of the reference package"),
]


def exercise_names(name):
    cells = build.read_lesson(name)
    return [n for c in cells if "exercise" in c.metadata
            for n in build.split_names(c.metadata["exercise"], "exercise", name)]


def significant(lines):
    """Stripped lines that carry code: no blanks, comments or short fragments like ``return out``."""
    return [t for t in (line.strip() for line in lines) if len(t) >= 12 and not t.startswith("#")]


def solution_snippets(obj_name):
    """What would betray a solution of ``solutions.<obj_name>``: every pair of consecutive
    significant lines of its marked regions (a one-line region: that line)."""
    snippets, region, inside = set(), [], False
    for line in inspect.getsource(getattr(solutions, obj_name)).split("\n"):
        text = line.strip()
        if text == build.BEGIN_SOLUTION:
            inside, region = True, []
        elif text == build.END_SOLUTION:
            inside = False
            code = significant(region)
            snippets |= {tuple(code)} if len(code) == 1 else set(zip(code, code[1:]))
        elif inside:
            region.append(line)
    return snippets


def snippets_in(sources):
    """Single significant lines and consecutive pairs of them, per cell source."""
    found = set()
    for source in sources:
        code = significant(source.split("\n"))
        found |= {(t,) for t in code} | set(zip(code, code[1:]))
    return found


# ---------------------------------------------------------------- nbval re-runs (test_nbval, test_nbval_gpt)

SANITIZE = ROOT / "tools" / "nbval_sanitize.cfg"
GPT_CHAPTERS = ("08_gpt", "09_decoding", "12_posttrain")  # 09 and 12 start from the model 08 saves


def rerun_and_compare(name, record_property, edition=""):
    """nbval re-runs the executed answer key ``name`` of ``edition`` and compares its outputs."""
    key = ANSWER_KEYS / edition / f"{name}.ipynb"
    assert key.exists(), f"{key.relative_to(ROOT)} missing -- run `make build`"
    # Same kernel environment as tools/build.py used: inline figures, no grading mode, the course language
    # from the notebook alone (the English setup cell sets it), build.KERNEL_ENV (the CPU on a GPU machine too).
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "NBGRADER_EXECUTION", "COURSE_LANG")}
    env.update(build.KERNEL_ENV)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout=600", str(key)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.perf_counter() - start
    record_property("seconds", round(seconds, 1))
    print(f"{edition or 'zh'} {name}: answer key re-ran in {seconds:.1f} s")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


# ------------------------------------------------------- the idiom runner (test_idioms, agreement, check_table)

def _first_name(source):
    """The first name a cell defines at top level (def, class or assignment)."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
    return None


@functools.cache
def exercise_cells(chapter):
    """(code cells as (kind, source)), {exercise: (index of its cell, index of its last graded cell)}.

    kind is "solution", "graded" or "code". A graded exercise is a solution cell followed by graded
    cells before the next solution cell; a solution cell without graded cells (a bonus) is not one."""
    nb = read_nb(SOURCE / chapter / f"{chapter}.ipynb")
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = nbgrader_meta(cell)
        kind = "solution" if meta.get("solution") else "graded" if meta.get("grade") else "code"
        cells.append((kind, cell.source))
    exercises, current = {}, None
    for i, (kind, source) in enumerate(cells):
        if kind == "solution":
            current = (_first_name(source), i)
        elif kind == "graded" and current is not None:
            exercises[current[0]] = (current[1], i)
    return cells, exercises


def graded_exercises():
    """[(chapter, exercise)] for every graded exercise of every chapter, in course order."""
    return [(chapter, name) for chapter in graded_chapters() for name in exercise_cells(chapter)[1]]


def run_cell(source, namespace, label):
    exec(compile(source, label, "exec"), namespace)  # noqa: S102 - the course's own notebook cells
    plt.close("all")


def _names(source):
    """(names a cell binds outside function bodies, names it reads anywhere): an over-approximation."""
    tree = ast.parse(source)
    return set(audit.bound_names(tree)), audit.read_names(tree)


@functools.cache
def namespace_before(chapter, exercise):
    """The namespace just before the exercise cell.

    Runs the setup cell, the provided and solution cells, and the demo cells that bind a name some
    later cell reads (idioms of this exercise, the exercise's tests, the cells kept before them).
    Skipped: the graded cells of earlier exercises, and demo cells nothing reads (slow plots and
    experiments whose results no test uses)."""
    cells, exercises = exercise_cells(chapter)
    start, end = exercises[exercise]
    needed = set()
    for source in [c for idiom in IDIOMS if (idiom.chapter, idiom.exercise) == (chapter, exercise)
                   for c in idiom.cells] + [source for _, source in cells[start:end + 1]]:
        needed |= _names(source)[1]
    keep = []
    for i in range(start - 1, -1, -1):
        kind, source = cells[i]
        bound, loaded = _names(source)
        if kind == "solution" or i == 0 or (kind == "code" and bound & needed):
            keep.append(i)
            needed |= loaded
    namespace = {"__name__": "__main__"}
    torch.manual_seed(0)
    for i in reversed(keep):
        run_cell(cells[i][1], namespace, f"<{chapter} cell {i}>")
    return namespace


def run_idiom(idiom, tests=True):
    """Execute the idiom in its chapter's notebook, then (``tests``) the cells after the exercise up to
    its last graded cell; raises what the first failing cell raises. Returns the namespace."""
    cells, exercises = exercise_cells(idiom.chapter)
    start, end = exercises[idiom.exercise]
    namespace = dict(namespace_before(idiom.chapter, idiom.exercise))
    dtype = torch.get_default_dtype()
    try:
        torch.manual_seed(0)
        for k, source in enumerate(idiom.cells):
            run_cell(source, namespace, f"<idiom {idiom.id} cell {k}>")
        for i in range(start + 1, end + 1) if tests else ():
            run_cell(cells[i][1], namespace, f"<{idiom.chapter} cell {i}>")
    finally:
        torch.set_default_dtype(dtype)
    return namespace


# ---------------------------------------------------------------- JupyterLab in a browser (tests/browser/)

NB = ".jp-NotebookPanel:visible .jp-Notebook"
KERNEL_IDLE = "#jp-main-statusbar >> text=/\\| Idle/"
RUN_S = 180_000  # ms: a cell, a Validate or a generate may take this long on a loaded 2-core machine


def open_notebook(page, lab, path):
    """Open ``path`` (relative to the server root) in a fresh layout; wait for an idle kernel and for
    every cell of the file to be on the page (JupyterLab renders a long notebook's cells in batches)."""
    page.goto(lab.url(f"lab/tree/{path}"))
    notebook = page.locator(NB)
    notebook.wait_for()
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    cells = len(nbformat.read(lab.root() / path, as_version=4).cells)
    notebook.locator(".jp-Cell").nth(cells - 1).wait_for(state="attached", timeout=RUN_S)
    return notebook


def menu(page, top, item):
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=top).click()
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(f"^{re.escape(item)}$")).click()


def fonts_for(page, element):
    """Families Chromium really used for the text directly inside ``element``, with glyph counts."""
    element.evaluate("e => e.setAttribute('data-font-probe', '')")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "[data-font-probe]"})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    element.evaluate("e => e.removeAttribute('data-font-probe')")
    return {f["familyName"]: f["glyphCount"] for f in fonts}


def installed_families(pattern):
    """Font families fontconfig lists for ``pattern`` (e.g. ':lang=zh'); empty without fontconfig."""
    try:
        out = subprocess.run(["fc-list", pattern, "family"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return set()
    return {name.strip() for line in out.splitlines() for name in line.split(",") if name.strip()}
