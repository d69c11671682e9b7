"""Learner-style implementations that prove the checks: ``wrong_*.py`` (each must fail its check
with the named diagnosis) and ``right_*.py`` (each must pass). Every module lists ``CASES``:
``(check name, object, expected diagnosis id)`` for wrong ones, ``(check name, object)`` for right ones."""
import importlib
from pathlib import Path


def cases(kind):
    """Every ``CASES`` entry of the ``kind`` ("wrong" or "right") modules, in file order."""
    return [case for path in sorted(Path(__file__).parent.glob(f"{kind}_*.py"))
            for case in importlib.import_module(f"{__name__}.{path.stem}").CASES]


def realworld_modules():
    """The real-world modules (``realworld*.py``), in file order. Each lists ``CASES`` (each real difference
    named); most list ``RIGHT``; those held out before tuning list ``HELD_OUT``, from which their ``CASES`` and
    ``RIGHT`` are made."""
    return [importlib.import_module(f"{__name__}.{path.stem}")
            for path in sorted(Path(__file__).parent.glob("realworld*.py"))]


def realworld_entries(attr):
    """Every entry of the real-world modules' ``attr`` list ("CASES", "RIGHT" or "HELD_OUT"), where they have one."""
    return [entry for module in realworld_modules() for entry in getattr(module, attr, [])]
