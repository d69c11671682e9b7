"""Where the course's folders are: the repository root for what maintainers import (tests, the
grading harness, benchmarks run with ``python -m``).

The scripts run by path (``python tools/build.py``, ``tools/make_corpus.py``,
``benchmarks/gpt_train.py``: ``tools`` is no installed package), learner-side code (``tutor``) and
``nbgrader_config.py`` find their own folder.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "source"
ANSWER_KEYS = ROOT / "answer_keys"  # generated: the executed self-study notebooks with the solutions in place
