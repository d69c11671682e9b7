"""The golden check table, tests/data/check_table.tsv, is current: every check's verdict, diagnosis ids
and whole message on every catalogue entry and idiom (tests/check_table.py writes it). A change of
behaviour shows as a diff here; a change on purpose updates the table with ``UPDATE``."""
import difflib
import os
import subprocess
import sys

import pytest

from tools.paths import ROOT

pytestmark = pytest.mark.slow  # every check on every catalogue entry and idiom: 38 s on an idle machine

TABLE = ROOT / "tests" / "data" / "check_table.tsv"
UPDATE = "OMP_NUM_THREADS=1 .venv/bin/python tests/check_table.py tests/data/check_table.tsv"


def test_the_check_table_is_current(tmp_path):
    out = tmp_path / "check_table.tsv"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "check_table.py"), str(out)], cwd=ROOT,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    diff = list(difflib.unified_diff(TABLE.read_text(encoding="utf-8").splitlines(),
                                     out.read_text(encoding="utf-8").splitlines(),
                                     "tests/data/check_table.tsv", "the checks now", lineterm="", n=0))
    assert not diff, (f"{len([d for d in diff if d[:1] in '+-']) - 2} lines differ; a change on purpose "
                      f"updates the table:\n    {UPDATE}\n" + "\n".join(diff[:60]))
