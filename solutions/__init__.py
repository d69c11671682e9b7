"""Reference implementation of the course's public contract, one module per chapter.

The names, their chapters and modules are listed once, in the registry ``contract.COMPONENTS``;
this package imports each from its module and exports exactly those (``__all__``). Each contract
object marks the part a learner writes with ``### BEGIN SOLUTION`` / ``### END SOLUTION``; the build
copies its source into the lesson notebooks.
"""
from importlib import import_module

from contract import COMPONENTS


def _load(component):
    module = import_module(f"{__name__}.{component.module}")
    if not hasattr(module, component.name):
        raise ImportError(f"the contract registry puts {component.name!r} in solutions/{component.module}.py, "
                          "which does not define it")
    return getattr(module, component.name)


globals().update({c.name: _load(c) for c in COMPONENTS})
__all__ = [c.name for c in COMPONENTS]
