"""Helpers shared by the pipeline tests (build, leaks, nbgrader end to end, nbval). nbgrader itself
runs through the class simulation's one wrapper, ``tools.simulate_class.nbgrader``."""
import shutil

import nbformat

from tools import build  # the repository root is on pytest's pythonpath (pyproject.toml)
from tools.paths import ROOT

LESSONS = build.lesson_names()


def read_nb(path):
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell):
    return cell.metadata.get("nbgrader", {})


def graded_chapters():
    """Chapters in source/ with at least one graded cell."""
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
