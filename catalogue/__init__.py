"""Learner-style implementations that prove the checks: ``wrong_*.py`` (each must fail its check
with the named diagnosis) and ``right_*.py`` (each must pass). Every module lists ``CASES``:
``(check name, object, expected diagnosis id)`` for wrong ones, ``(check name, object)`` for right ones."""
import importlib
from pathlib import Path


def cases(kind):
    """Every ``CASES`` entry of the ``kind`` ("wrong" or "right") modules, in file order."""
    return [case for path in sorted(Path(__file__).parent.glob(f"{kind}_*.py"))
            for case in importlib.import_module(f"{__name__}.{path.stem}").CASES]
