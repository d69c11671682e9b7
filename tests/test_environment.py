"""The pip requirements, the conda environment and the Makefile's set-up make the same choices:
the same packages at the same versions, and torch's CPU build from the same index."""
import re

from tools.paths import ROOT


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip().lstrip("- ").strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _conda_pip_lines():
    lines = (ROOT / "environment.yml").read_text().splitlines()
    return lines[lines.index("  - pip:") + 1:]


def test_requirements_and_environment_agree():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env = _pins(_conda_pip_lines())
    assert req, "requirements.txt lists no pinned packages"
    assert "torch" in req
    assert req == env


def test_conda_takes_torch_from_the_makefiles_cpu_index():
    cpu_index = re.search(r"^CPU_INDEX := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert cpu_index.startswith("https://download.pytorch.org/whl/cpu")
    assert f"      - --extra-index-url {cpu_index}" in _conda_pip_lines()


def test_the_cpu_build_is_the_default_and_cuda_an_opt_in():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH \?= cpu$", makefile, re.M)
    assert "make setup TORCH=cuda" in (ROOT / "README.md").read_text()


def test_environment_installs_the_course_package():
    assert "      - -e ." in _conda_pip_lines()
