"""Each function check relies on the contract's defaults (issue 40, item 4).

A check calls the learner's function as a caller who relies on the defaults of its contract signature
(``tutor.engine.running.relying_on_defaults``: an argument equal to its default is left out). Here the
reference function (its source run as learner code, ``catalogue.reference``) with one default changed (a
mutant) must fail its check: softmax with ``axis=+1``
instead of ``axis=-1`` passed every check before, since each case named its axis.
"""
import functools
import inspect

import pytest
import torch

import contract
from catalogue.reference import load
from tutor.checks import CHECKS, run_check
from tutor.engine.specs import FunctionCheck

# A default of None means "no such thing" (no mask, no top-k): the wrong default is chosen for each.
WRONG_NONE = {
    ("attention_numpy", "mask"): False,  # every key blocked
    ("scaled_dot_product_attention", "mask"): torch.tensor(False),
    ("make_subsequent_mask", "device"): "meta",
    ("make_sliding_window_mask", "device"): "meta",
    ("sampling_probs", "top_k"): 1,
    ("sampling_probs", "top_p"): 0.5,
    ("sample_next_token", "top_k"): 1,
    ("sample_next_token", "top_p"): 0.5,
    ("generate", "top_k"): 1,
    ("generate", "top_p"): 0.5,
    ("attention_flops_and_memory", "num_kv_heads"): 1,
}
# Defaults no check can see, each with the reason.
UNSEEN = {
    ("scaled_dot_product_attention", "dropout_p"): "dropout acts only in training mode, whose default is off",
    ("scaled_dot_product_attention", "training"): "training mode changes nothing while dropout_p is 0",
    ("sample_next_token", "generator"): "without a generator a draw is random: every case passes a seeded one",
    ("generate", "generator"): "without a generator a draw is random: every case passes a seeded one",
    ("exact_match", "pad_id"): "pad_id only fills a pred shorter than the target, and a target holds no PAD before "
                               "its EOS: a fill of 1 or 3 counts the row wrong as 0 does",
    ("apply_rope", "positions"): "positions=None means 0..T-1: the only wrong default is a tensor of the input's "
                                 "length, and every case relies on it already (the check passes x alone)",
    ("tiled_attention", "block_size"): "the block size changes only the order of the sums, never the output: every "
                                       "block size is right (each case passes its own)",
}


def _wrong(name, parameter, default):
    """A default that differs from ``default`` and that the function still accepts."""
    if default is None:
        return WRONG_NONE[(name, parameter)]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return 1 if default == -1 else default + 1  # softmax's axis=-1 becomes +1
    if isinstance(default, float):
        return default * 1000 if default else 0.5
    if isinstance(default, tuple):
        return tuple(v / 2 for v in default)
    raise TypeError(f"{name}({parameter}={default!r}): say which wrong default to try")


def with_default(fn, parameter, value):
    """``fn`` (a function or a class) whose ``parameter`` defaults to ``value``."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    sig = inspect.signature(target)
    changed = sig.replace(parameters=[p.replace(default=value) if p.name == parameter else p
                                      for p in sig.parameters.values()])

    def rebind(*args, **kwargs):
        bound = changed.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args, bound.kwargs

    if inspect.isclass(fn):
        def __init__(self, *args, **kwargs):
            args, kwargs = rebind(self, *args, **kwargs)
            fn.__init__(*args, **kwargs)

        return type(fn.__name__, (fn,), {"__init__": __init__})

    @functools.wraps(fn)
    def mutant(*args, **kwargs):
        args, kwargs = rebind(*args, **kwargs)
        return fn(*args, **kwargs)

    return mutant


def _mutants():
    for check in CHECKS.values():
        if not isinstance(check, FunctionCheck):
            continue
        name = check.reference or check.name
        if name not in contract.BY_NAME:  # a method's check (greedy_decode): the component's signature has none
            continue
        for parameter, default in contract.defaults(name):
            if default is not contract.NO_DEFAULT and (name, parameter) not in UNSEEN:
                yield pytest.param(check.name, name, parameter, default, id=f"{name}({parameter}={default!r})")


MUTANTS = list(_mutants())


@pytest.fixture(scope="module")
def reference():
    return load()


@pytest.mark.parametrize("check, name, parameter, default", MUTANTS)
def test_a_changed_default_fails_the_check(check, name, parameter, default, reference):
    wrong = _wrong(name, parameter, default)
    result = run_check(check, with_default(reference[name], parameter, wrong))
    assert not result.passed, f"{name} with {parameter}={wrong!r} instead of {default!r} passes the check {check!r}"


@pytest.mark.parametrize("check, name, parameter, default", MUTANTS)
def test_the_mutant_of_the_default_itself_passes(check, name, parameter, default, reference):
    """The mutant changes nothing else: the reference with its own default passes."""
    result = run_check(check, with_default(reference[name], parameter, default))
    assert result.passed, result.message


def test_softmax_with_axis_plus_one_fails(reference):
    """The issue's example, named: its message shows the case that omits axis."""
    assert ("softmax", "softmax", "axis", -1) in [tuple(m.values) for m in MUTANTS]
    result = run_check("softmax", with_default(reference["softmax"], "axis", 1))
    assert not result.passed and result.case


def test_the_lists_name_only_real_defaults():
    for name, parameter in [*WRONG_NONE, *UNSEEN]:
        assert dict(contract.defaults(name)).get(parameter, contract.NO_DEFAULT) is not contract.NO_DEFAULT, \
            f"{name} has no default for {parameter}"
