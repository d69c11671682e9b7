"""Tamper detection for grading: the comparison machinery must be what it was when ``tutor`` was imported.

The locked setup cell of every notebook imports ``tutor`` (after ``torch`` and ``numpy``), so
``snapshot()`` runs before any learner code. ``verify()`` (called by ``tutor.grading.grade``)
compares, by identity, every attribute of the watched modules and classes with the snapshot,
and checks that ``sys.modules`` still holds the real ``tutor`` modules. Watched: ``builtins``,
``torch``, ``torch.testing``, ``torch.nn.functional``, ``torch.Tensor``, ``torch.nn.Module``,
``numpy``, ``numpy.testing`` and the ``tutor`` modules themselves. A module not yet imported at
snapshot time is snapshotted at its first ``verify()``.

This is defence in depth: the nbgrader-side audit (``tutor.hardening``) reads the learner's code;
this module catches what actually changed at run time.
"""
import builtins
import sys

WATCHED = ["builtins", "torch", "torch.testing", "torch.nn.functional", "numpy", "numpy.testing",
           "tutor.checks", "tutor.grading", "tutor.guard", "tutor.mistakes", "tutor.integrity"]
WATCHED_CLASSES = [("torch", "Tensor"), ("torch.nn", "Module")]
# Names IPython swaps in and out of builtins around each cell; never used by the checks.
INTERACTIVE_BUILTINS = {"exit", "quit", "copyright", "credits", "license", "help", "display", "get_ipython",
                        "input", "raw_input"}  # ipykernel installs a fresh input() for every execute request
TAMPERED = ("评分机制被修改，本题不计分：{what} / The grading machinery was modified, this cell is not graded: {what}")

_snapshot = {}  # label -> (object, {attribute name: id})
_modules = {}   # module name -> module object at snapshot time


def _attributes(obj):
    return {k: id(v) for k, v in list(vars(obj).items())}


def _take(label, obj):
    _snapshot[label] = (obj, _attributes(obj))


def snapshot():
    """Record the watched modules and classes that are imported now (idempotent per label)."""
    for name in WATCHED:
        module = sys.modules.get(name)
        if module is not None and name not in _snapshot:
            _modules[name] = module
            _take(name, module)
    for module_name, cls_name in WATCHED_CLASSES:
        label = f"{module_name}.{cls_name}"
        module = sys.modules.get(module_name)
        if module is not None and label not in _snapshot:
            _take(label, getattr(module, cls_name))


def problems():
    """Bilingual descriptions of everything that changed since the snapshot (empty: intact)."""
    found = []
    for name, module in _modules.items():
        if sys.modules.get(name) is not module:
            found.append(f"sys.modules[{name!r}] 被替换 / was replaced")
    for label, (obj, attrs) in _snapshot.items():
        now = _attributes(obj)
        changed = [k for k, v in attrs.items()
                   if now.get(k) != v and not k.startswith("_") and k not in INTERACTIVE_BUILTINS]
        if changed:
            found.append(f"{label}.{', '.join(sorted(changed)[:5])}")
    if builtins.AssertionError is not AssertionError:
        found.append("builtins.AssertionError")
    return found


def verify():
    """Raise ``AssertionError`` naming what changed; snapshot modules imported since the last call."""
    found = problems()
    snapshot()
    if found:
        raise AssertionError(TAMPERED.format(what="; ".join(found)))
