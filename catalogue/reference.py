"""The reference implementation's own source, re-defined outside the ``solutions`` package.

A check refuses the ``solutions`` objects themselves (that is the point of the guard), so tests
that need a known-correct learner answer execute the reference source here, as a notebook's cell
would: same code, defined in a namespace whose code does not live in ``solutions/``.
"""
import inspect
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import contract
import solutions

# Every component, in teaching order (the contract registry): what a learner writes, the constants, and the
# provided code an exercise may call (chapter 11's merge_pair).
NAMES = [c.name for c in contract.COMPONENTS]


def load():
    """A dict name -> object: the reference's source executed as learner code."""
    namespace = {"math": math, "np": np, "torch": torch, "nn": nn, "F": F}
    for name in NAMES:
        obj = getattr(solutions, name)
        if isinstance(obj, (int, str, tuple)):
            namespace[name] = obj
            continue
        code = compile(inspect.getsource(obj), f"<reference copy of {name}>", "exec")
        exec(code, namespace)  # noqa: S102 - trusted repository code, run as a notebook cell would
    return namespace
