"""Tamper detection for grading: the comparison machinery must be what it was when ``tutor`` was imported.

The locked setup cell of every notebook imports ``tutor`` (after ``torch`` and ``numpy``), so
``snapshot()`` runs before any learner code. ``verify()`` (called by ``tutor.grading.grade``)
compares, by identity, every attribute of the watched modules and classes with the snapshot,
and checks that ``sys.modules`` still holds the real ``tutor`` modules. Watched: ``builtins``,
``torch``, ``torch.testing``, ``torch.nn.functional``, ``torch.Tensor``, ``torch.nn.Module``,
``numpy``, ``numpy.testing`` and the ``tutor`` modules themselves. A module not yet imported at
snapshot time is snapshotted at its first ``verify()``.

This is defence in depth: the nbgrader-side audit (``grader.hardening``) reads the learner's code;
this module catches what actually changed at run time. ``verify()`` also puts everything it finds
changed back as it was, so a tampering costs the graded cell that meets it, and the exercises after
it are graded by the real machinery again.
"""
import os
import pkgutil
import sys


def _modules_of(package):
    """The modules of the ``tutor`` subpackage ``package`` (found on disk, none imported)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), package)
    return [f"tutor.{package}.{m.name}" for m in pkgutil.iter_modules([folder])]


WATCHED = (["builtins", "torch", "torch.testing", "torch.nn.functional", "numpy", "numpy.testing",
            "tutor.checks", "tutor.grading", "tutor.guard", "tutor.mistakes", "tutor.integrity"]
           + _modules_of("engine") + _modules_of("checks"))
WATCHED_CLASSES = [("torch", "Tensor"), ("torch.nn", "Module")]
# Names IPython swaps in and out of builtins around each cell; never used by the checks.
INTERACTIVE_BUILTINS = {"exit", "quit", "copyright", "credits", "license", "help", "display", "get_ipython",
                        "input", "raw_input"}  # ipykernel installs a fresh input() for every execute request
TAMPERED = ("评分机制被修改，本题不计分：{what} / The grading machinery was modified, this cell is not graded: {what}")

# Attributes torch replaces by itself on first use: importing torch._dynamo (the first step of any
# optimizer does) wraps torch.manual_seed in a wrapper of the same function. Accepted in that form
# only: the new object wraps the recorded one (``__wrapped__``) and its code lives in torch itself.
SELF_WRAPPED = {("torch", "manual_seed")}

_snapshot = {}  # label -> (object, {attribute name: value})
_modules = {}   # module name -> module object at snapshot time
_MISSING = object()


def _attributes(obj):
    return dict(vars(obj))


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


def _self_wrapped(label, key, old, new):
    """True when torch itself replaced ``label.key`` by a wrapper of the recorded ``old`` (SELF_WRAPPED)."""
    torch = sys.modules.get("torch")
    code = getattr(new, "__code__", None)
    if (label, key) not in SELF_WRAPPED or torch is None or code is None:
        return False
    if getattr(new, "__wrapped__", None) is not old:
        return False
    root = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep
    return os.path.realpath(code.co_filename).startswith(root)


def _changed(label, obj, attrs):
    now = vars(obj)
    return sorted(k for k, v in attrs.items()
                  if now.get(k, _MISSING) is not v and not k.startswith("_") and k not in INTERACTIVE_BUILTINS
                  and not _self_wrapped(label, k, v, now.get(k, _MISSING)))


def problems():
    """Bilingual descriptions of everything that changed since the snapshot (empty: intact)."""
    found = [f"sys.modules[{name!r}] 被替换 / was replaced"
             for name, module in _modules.items() if sys.modules.get(name) is not module]
    for label, (obj, attrs) in _snapshot.items():
        changed = _changed(label, obj, attrs)
        if changed:
            found.append(f"{label}.{', '.join(changed[:5])}")
    return found


def restore():
    """Put every watched module back in ``sys.modules`` and every changed attribute back."""
    for name, module in _modules.items():
        sys.modules[name] = module
    for label, (obj, attrs) in _snapshot.items():
        for key in _changed(label, obj, attrs):
            setattr(obj, key, attrs[key])


def verify():
    """Raise ``AssertionError`` naming what changed, after putting it back; snapshot modules
    imported since the last call."""
    found = problems()
    if found:
        restore()
    snapshot()
    if found:
        raise AssertionError(TAMPERED.format(what="; ".join(found)))
