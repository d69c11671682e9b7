"""Helpers shared by the pipeline tests (build, leaks, nbgrader end to end, nbval)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from tools import build  # the repository root is on pytest's pythonpath (pyproject.toml)

ROOT = Path(__file__).resolve().parents[1]

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
    for rel in ("lessons", "tools"):
        shutil.copytree(ROOT / rel, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", dest)


def nbgrader(*args, cwd, check=True, timeout=900):
    """Run the nbgrader CLI of this environment in ``cwd``; returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    # nbgrader runs the `alembic` executable when it creates a gradebook: it must be on PATH.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc
