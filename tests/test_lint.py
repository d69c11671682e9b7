"""The linter's verdict is part of `make test` (the same command as `make lint`)."""
import subprocess
import sys

from tools.paths import ROOT


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"`make lint` fails (fix with `.venv/bin/python -m ruff check --fix .` " \
                                 f"where it can):\n{proc.stdout}{proc.stderr}"
