"""The learner's workspace (README, learner path): `make lab` copies each self-study notebook into
workspace/ once, never overwrites the learner's copy, adds new chapters; `make reset CHAPTER=...`
starts one chapter afresh and keeps the old copy. Run on the real Makefile in a scratch folder."""
import os
import re
import shutil
import subprocess

import pytest

from tools.paths import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="`make` is not installed")


# Run as a top-level make even under `make test`: a sub-make (MAKELEVEL in the environment) prints
# "Entering directory" lines that these tests would read as output.
ENV = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def make(folder, *args, env=ENV):
    return subprocess.run(["make", "-f", str(ROOT / "Makefile"), *args], cwd=folder, capture_output=True,
                          text=True, check=True, env=env).stdout


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


def test_english_edition_has_its_own_workspace_and_leaves_the_chinese_one_alone(tmp_path):
    """`make lab COURSE_LANG=en` (or LANG=en on the command line) copies notebooks/en/ into workspace/en/;
    a LANG in the environment (a locale) does not choose the language."""
    (tmp_path / "notebooks" / "en").mkdir(parents=True)
    (tmp_path / "notebooks" / "01_a.ipynb").write_text("zh 01")
    (tmp_path / "notebooks" / "en" / "01_a.ipynb").write_text("en 01")
    make(tmp_path, "workspace")
    chinese = tmp_path / "workspace" / "01_a.ipynb"
    chinese.write_text("我的答案")
    out = make(tmp_path, "workspace", env={**ENV, "LANG": "en_US.UTF-8"})
    assert out == "" and not (tmp_path / "workspace" / "en").exists()
    assert "workspace/en/01_a.ipynb" in make(tmp_path, "workspace", "LANG=en")
    english = tmp_path / "workspace" / "en" / "01_a.ipynb"
    assert english.read_text() == "en 01" and chinese.read_text() == "我的答案"
    english.write_text("my answer")
    assert make(tmp_path, "workspace", "COURSE_LANG=en") == "" and english.read_text() == "my answer"
    make(tmp_path, "reset", "CHAPTER=01_a", "COURSE_LANG=en")
    assert english.read_text() == "en 01" and chinese.read_text() == "我的答案"
    assert [p.read_text() for p in (tmp_path / "workspace" / "en" / "backup").iterdir()] == ["my answer"]
    proc = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "workspace", "COURSE_LANG=fr"], cwd=tmp_path,
                          capture_output=True, text=True, env=ENV)
    assert proc.returncode != 0 and "zh or en" in proc.stdout + proc.stderr


def test_reset_names_the_chapters_when_the_name_is_wrong(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_a.ipynb").write_text("fresh 01")
    proc = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "reset", "CHAPTER=1_a"], cwd=tmp_path,
                          capture_output=True, text=True, env=ENV)
    assert proc.returncode != 0 and "01_a" in proc.stdout + proc.stderr
    assert not (tmp_path / "workspace").exists()


def test_build_and_tests_stay_out_of_the_workspace():
    """tools/build.py writes only its generated folders; pytest collects only tests/."""
    # No path into it (a string that starts with "workspace"); prose may name the folder.
    assert not re.search(r"""["']workspace""", (ROOT / "tools" / "build.py").read_text())
    assert 'testpaths = ["tests"]' in (ROOT / "pyproject.toml").read_text()
    assert "/workspace/" in (ROOT / ".gitignore").read_text().splitlines()
