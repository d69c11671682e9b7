"""nbval regression: every executed answer key re-runs top to bottom and reproduces its stored
outputs (sanitised with tools/nbval_sanitize.cfg; PNG bytes are not compared, but a figure that
stops rendering loses its ``<Figure ...>`` output and fails). Prints each chapter's run time.

Chapters 08 and 09 re-run in tests/test_nbval_gpt.py, in that order (09 loads the model 08's
training cell saves), so that the two long re-runs fall to two test workers."""
import os
import subprocess
import sys
import time

import pytest

from pipeline_helpers import LESSONS, ROOT
from tools.build import KERNEL_ENV
from tools.paths import ANSWER_KEYS

pytestmark = pytest.mark.slow  # every answer key re-run: `make test-fast` leaves them out

SANITIZE = ROOT / "tools" / "nbval_sanitize.cfg"
GPT_CHAPTERS = ("08_gpt", "09_decoding")


def rerun_and_compare(name, record_property, edition=""):
    key = ANSWER_KEYS / edition / f"{name}.ipynb"
    assert key.exists(), f"{key.relative_to(ROOT)} missing -- run `make build`"
    # Same kernel environment as tools/build.py used: inline figures, no grading mode, the course language
    # from the notebook alone (the English edition's setup cell sets it).
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "NBGRADER_EXECUTION", "COURSE_LANG")}
    env.update(KERNEL_ENV)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout=600", str(key)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.perf_counter() - start
    record_property("seconds", round(seconds, 1))
    print(f"{edition or 'zh'} {name}: answer key re-ran in {seconds:.1f} s")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


@pytest.mark.parametrize("name", [name for name in LESSONS if name not in GPT_CHAPTERS])
def test_answer_key_reruns_and_matches(name, record_property):
    rerun_and_compare(name, record_property)


@pytest.mark.parametrize("name", [name for name in LESSONS if name not in GPT_CHAPTERS])
def test_english_answer_key_reruns_and_matches(name, record_property):
    """The English answer keys are executed on their own (English outputs): they re-run as the Chinese ones do."""
    rerun_and_compare(name, record_property, "en")
