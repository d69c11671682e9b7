"""Reference implementation of the course's public contract, one module per chapter.

The names, their chapters and modules are listed once, in the registry ``contract.COMPONENTS``;
this package imports each from its module and exports exactly those (``__all__``). Each contract
object marks the part a learner writes with ``### BEGIN SOLUTION`` / ``### END SOLUTION``; the build
copies its source into the lesson notebooks.
"""
from importlib import import_module
from importlib.util import find_spec

from contract import COMPONENTS


def _load():
    """{name: object} for every registered component its module defines. A registered name that is
    not defined yet, or whose module does not exist yet, is left out (tests/test_registry.py says
    where to define it)."""
    found = {}
    for c in COMPONENTS:
        if find_spec(f"{__name__}.{c.module}") is None:
            continue
        module = import_module(f"{__name__}.{c.module}")
        if hasattr(module, c.name):
            found[c.name] = getattr(module, c.name)
    return found


globals().update(_load())
__all__ = [c.name for c in COMPONENTS if c.name in globals()]
