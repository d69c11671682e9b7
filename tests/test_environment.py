"""The pip requirements and the conda environment list the same packages at the same versions."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip().lstrip("- ").strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_requirements_and_environment_agree():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env_lines = (ROOT / "environment.yml").read_text().splitlines()
    pip_start = env_lines.index("  - pip:")
    env = _pins(env_lines[pip_start + 1:])
    assert req, "requirements.txt lists no pinned packages"
    assert req == env


def test_torch_is_pinned_to_the_cpu_build_on_disk():
    assert _pins((ROOT / "requirements.txt").read_text().splitlines())["torch"] == "2.13.0"


def test_environment_installs_the_course_package():
    assert "      - -e ." in (ROOT / "environment.yml").read_text().splitlines()
