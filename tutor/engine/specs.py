"""What a check is, as data: its cases, its result, the known mistakes it can name.

A topic module (``tutor.checks.attention``, ...) declares each check once, by name, with a
``FunctionCheck`` (the learner writes a function) or a ``ModuleCheck`` (an ``nn.Module`` class)::

    FunctionCheck("softmax", cases=_softmax_cases, outputs=("y",),
                  call=lambda f, case, _: f(case["x"].copy(), axis=case["axis"]),
                  variants=softmax_variants)

Constructing one registers it in ``CHECKS`` (a name the contract registry does not declare is
refused). ``tutor.engine.running`` runs it; ``tutor.engine.diagnosis`` asks its ``variants``
(``(reference, case) -> [Variant]``) which known mistake the learner's output equals.
"""
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import contract


class Status(Enum):
    """How a check ended: a learner-facing message never decides it."""
    PASSED = "passed"
    FAILED = "failed"
    NOT_IMPLEMENTED = "not_implemented"  # the learner's object still raises NotImplementedError


@dataclass
class CheckResult:
    """Outcome of one check. ``diagnosis`` is the first mistake id named (``tutor.mistakes.MISTAKES``)
    or None; ``diagnoses`` every id the message names (two mistakes at once, several parts)."""
    name: str
    passed: bool
    case: str = None
    message: str = ""
    diagnosis: str = None
    diagnoses: tuple = ()
    status: Status = None

    def __post_init__(self):
        if self.status is None:
            self.status = Status.PASSED if self.passed else Status.FAILED

    @property
    def not_implemented(self):
        return self.status is Status.NOT_IMPLEMENTED

    def assert_ok(self):
        if not self.passed:
            raise AssertionError(self.message)
        return self


@dataclass
class Case:
    """One input of a check: ``inputs`` (what the learner receives, described in messages) and
    ``extra`` (everything else the case needs); ``built``: the learner's module that ran it."""
    label: str
    inputs: dict
    extra: dict = None
    built: object = None

    def __getitem__(self, key):
        if key in self.inputs:
            return self.inputs[key]
        return self.extra[key]

    def get(self, key, default=None):
        try:
            return self[key]
        except (KeyError, TypeError):
            return default


@dataclass(frozen=True)
class Bug:
    """A known mistake as switches of a wrong implementation (``dict(scale=None)``)."""
    id: str
    switches: dict


@dataclass(frozen=True)
class Variant:
    """One known wrong output on one case: the mistakes it is (several: made at once), the thunk
    that computes it (a dict shaped like the check's outputs), a detail line (the eps found) and,
    for a combination, each bug's thunk alone (to say on which cases each one shows)."""
    ids: tuple
    run: Callable
    note: str = ""
    singles: tuple = ()


def wrong(ids, run, note="", singles=()):
    """A ``Variant`` of one mistake id or a tuple of ids."""
    return Variant(ids if isinstance(ids, tuple) else (ids,), run, note, singles)


class Failure(Exception):
    """A learner-facing failure that ends a check early (bad signature, missing keys, ...)."""

    def __init__(self, message, diagnosis=None):
        super().__init__(message)
        self.diagnosis = diagnosis


CHECKS = {}  # check name -> its declaration, filled as topic modules are imported


def _register(check):
    if check.name not in contract.CHECK_NAMES:
        raise KeyError(f"check {check.name!r}: declare it in contract/__init__.py (a component's checks) first")
    if check.name in CHECKS:
        raise ValueError(f"check {check.name!r} is registered twice")
    CHECKS[check.name] = check


@dataclass
class Check:
    """What every check declares. ``variants(reference, case) -> [Variant]``: the known wrong outputs;
    ``rule(case, expected, got) -> id or None``: what a failing case no variant reproduces shows;
    ``on_error(case, exception) -> id or None``: what the learner's exception on a case shows;
    ``mistakes``: the classic mistakes it names, each explained by a ``define_mistakes`` table and
    proven by a wrong implementation in ``catalogue/wrong_*.py`` (tests/test_registry.py holds both
    ways); the drill bank reveals them and docs/CONTRACT.md lists them."""
    name: str
    cases: Callable = None       # () -> [Case], built when the check runs
    outputs: tuple = ()          # names of the returned values, in order
    grads: tuple = ()            # input names whose gradients (of the first output) are compared
    variants: Callable = None
    rule: Callable = None
    on_error: Callable = None    # (case, exception) -> id or None: what a crash on this case shows
    mistakes: tuple = ()         # mistake ids, in the order a reveal lists them

    def __post_init__(self):
        _register(self)

    def run(self, obj):
        from . import running
        return running.run(self, obj)


@dataclass
class FunctionCheck(Check):
    """A function's check. ``call(fn, case, leaves) -> raw return``; ``reference``: the name of the
    reference function (default: the check's); ``ref_for(case)``: what the variants get as reference;
    ``cost``: a ``tutor.engine.cost.Cost`` (tokens a KV cache must not feed again)."""
    call: Callable = None
    reference: str = None
    ref_for: Callable = None
    cost: object = None


@dataclass
class ModuleCheck(Check):
    """An ``nn.Module`` class's check: ``make_args(case) -> (args, kwargs)`` of the constructor,
    ``forward(module, case, inputs) -> raw return``; ``load``: copy the reference weights by name;
    ``loss_mask(case)``: the outputs a training loss uses.

    Localisation (a composite's parts): ``parts(reference) -> [(attribute path, check name)]``,
    ``wiring(module, case) -> outputs``: the contract forward written from the module's own parts;
    ``probe(reference, generator) -> [Case]``: inputs to run this kind alone as a part;
    ``shared``: the mistake id when one object of this kind sits in two places."""
    make_args: Callable = None
    forward: Callable = None
    load: bool = True
    loss_mask: Callable = None
    parts: Callable = None
    wiring: Callable = None
    probe: Callable = None
    shared: str = None


@dataclass
class CustomCheck(Check):
    """A check that judges properties instead of comparing outputs: ``judge(obj) -> CheckResult``."""
    judge: Callable = None


# a missing contract parameter that is a known mistake: the attribute's name -> the mistake id
MISSING_PARAMETER = {}


def missing_parameter(attribute, mistake):
    """Declare that a state_dict missing only ``attribute``'s parameters is ``mistake``."""
    MISSING_PARAMETER[attribute] = mistake

