"""The learner's workspace (README, learner path): `make lab` copies each self-study notebook into
workspace/ once, never overwrites the learner's copy, adds new chapters; `make reset CHAPTER=...`
starts one chapter afresh and keeps the old copy. Run on the real Makefile in a scratch folder."""
import re
import shutil
import subprocess

import pytest

from tools.paths import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="`make` is not installed")


def make(folder, *args):
    return subprocess.run(["make", "-f", str(ROOT / "Makefile"), *args], cwd=folder, capture_output=True,
                          text=True, check=True).stdout


def test_workspace_keeps_learner_work_adds_new_chapters_and_resets_one(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_a.ipynb").write_text("fresh 01")
    make(tmp_path, "workspace")
    learner = tmp_path / "workspace" / "01_a.ipynb"
    assert learner.read_text() == "fresh 01"

    learner.write_text("my answer")
    (tmp_path / "notebooks" / "01_a.ipynb").write_text("improved 01")  # an update arrives
    (tmp_path / "notebooks" / "02_b.ipynb").write_text("fresh 02")     # and a new chapter
    out = make(tmp_path, "workspace")
    assert learner.read_text() == "my answer"
    assert (tmp_path / "workspace" / "02_b.ipynb").read_text() == "fresh 02"
    assert "02_b" in out and "01_a" not in out

    make(tmp_path, "reset", "CHAPTER=01_a")
    assert learner.read_text() == "improved 01"
    assert [p.read_text() for p in (tmp_path / "workspace" / "backup").iterdir()] == ["my answer"]


def test_reset_names_the_chapters_when_the_name_is_wrong(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_a.ipynb").write_text("fresh 01")
    proc = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "reset", "CHAPTER=1_a"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "01_a" in proc.stdout + proc.stderr
    assert not (tmp_path / "workspace").exists()


def test_build_and_tests_stay_out_of_the_workspace():
    """tools/build.py writes only its generated folders; pytest collects only tests/."""
    # No path into it (a string that starts with "workspace"); prose may name the folder.
    assert not re.search(r"""["']workspace""", (ROOT / "tools" / "build.py").read_text())
    assert 'testpaths = ["tests"]' in (ROOT / "pyproject.toml").read_text()
    assert "/workspace/" in (ROOT / ".gitignore").read_text().splitlines()
