"""Running a check: the sandbox, the learner's module built with the reference's weights, the case loop.

``run(check, obj)`` runs the learner's object and the reference (``solutions``, imported on first
use) on every case in float64, compares each output (``tutor.engine.compare``) and, on a mismatch,
asks ``tutor.engine.localise`` what explains it. The learner's code runs under
``tutor.guard.from_scratch`` (no built-in it replaces, no reference code).
"""
import functools
import importlib
import inspect
import math
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

import contract

from .. import guard
from . import cost, localise
from .compare import compare, describe, learner_line, unpack
from .messages import explain, say
from .report import finding_lines
from .specs import MISSING_PARAMETER, CheckResult, CustomCheck, Failure, FunctionCheck, Status


class _Reference:
    """The reference package ``solutions``, imported on first use: a learner's kernel imports
    ``tutor`` in its setup cell, where the reference must stay unloaded."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("solutions"), name)


solutions = _Reference()


@contextmanager
def sandbox():
    """Seeded, float64 by default, RNG states and default dtype restored afterwards."""

    torch_state, np_state, dtype = torch.get_rng_state(), np.random.get_state(), torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_rng_state(torch_state)
        np.random.set_state(np_state)


def randn(gen, *shape, scale=1.0):
    return scale * torch.randn(*shape, generator=gen, dtype=torch.float64)


# ---------------------------------------------------------------- the reference and the learner's module

def perturb(module, seed):
    """Non-default norm weights and biases: every 1-D parameter gets noise (seeded)."""

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def reference_module(name, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return perturb(getattr(solutions, name)(*args, **kwargs).double(), seed + 1).eval()


@functools.cache
def _reference_source(name):
    return inspect.getsource(getattr(solutions, name))


def provided(name, leave_out=()):
    """The reference source of ``name`` and of every component it uses (``leave_out`` excepted), run
    outside ``solutions`` as a notebook's provided cell: a model the learner's function may call while
    the guard watches."""
    pool = [c.name for c in contract.COMPONENTS if c.kind != "constant" and c.name not in leave_out]
    namespace = {"math": math, "torch": torch, "nn": torch.nn, "F": F}
    for n in contract.with_dependencies([name], _reference_source, pool):
        exec(compile(_reference_source(n), f"<provided {n}>", "exec"), namespace)  # noqa: S102
    return namespace


def build(cls, args, kwargs, ref, seed=0):
    """Construct the learner's class (seeded) and copy the reference weights by name."""

    torch.manual_seed(seed)
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    call = f"{getattr(cls, '__name__', cls)}({', '.join(shown)})"
    try:
        module = cls(*args, **kwargs)
    except (guard.FromScratchViolation, NotImplementedError):
        raise
    except Exception as exc:
        raise Failure(say("construct_failed", call=call, error=type(exc).__name__, text=exc,
                          line=learner_line(exc))) from None
    if not isinstance(module, torch.nn.Module):
        raise Failure(say("not_a_module", call=call, got=type(module).__name__))
    module = module.double()
    if ref is not None:
        ref_keys, own = set(ref.state_dict()), set(module.state_dict())
        missing, extra = sorted(ref_keys - own), sorted(own - ref_keys)
        if missing:
            parents = {tuple(k.split(".")[-2:-1]) for k in missing}
            diagnosis = MISSING_PARAMETER.get(next(iter(parents))[0]) if len(parents) == 1 and () not in parents \
                else None
            raise Failure(say("state_dict_keys", missing=missing, extra=f"; 多出 unexpected {extra}" if extra else ""),
                          diagnosis)
        try:
            module.load_state_dict(ref.state_dict(), strict=False)
        except RuntimeError as exc:
            raise Failure(say("load_failed", error=exc)) from None
    return module.eval()


def _grads(out, inputs, module, seed, loss_mask=None):
    """Backward of a fixed random projection of ``out``: gradients of inputs and parameters.
    ``loss_mask`` (broadcastable to ``out``) keeps only the outputs a training loss uses."""

    gen = torch.Generator().manual_seed(seed + 7)
    weight = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    if loss_mask is not None:
        weight = weight * loss_mask
    (out * weight.to(out.device)).sum().backward()  # an answer computed on a GPU is differentiated there
    grads = {f"grad {k}": v.grad for k, v in inputs.items()}
    if module is not None:
        for n, p in module.named_parameters():
            grads[f"grad {n}"] = p.grad
    return grads


def _outputs(check, obj, case, label, call, module=None, loss_mask=None):
    """``call(obj, case, leaves)`` unpacked to named outputs, with the gradients of the first one."""
    leaves = {k: case[k].detach().clone().requires_grad_(True) for k in check.grads if k in case.inputs}
    got = unpack(call(obj, case, leaves), check.outputs, label)
    first = got.get(check.outputs[0])
    if (leaves or module is not None) and isinstance(first, torch.Tensor) and first.requires_grad:
        got.update(_grads(first, leaves, module, 0, loss_mask))
    return got


def cached(case, compute):
    """The reference outcome of a case, computed once."""
    if case.extra is None:
        case.extra = {}
    if "_ref" not in case.extra:
        case.extra["_ref"] = compute()
    return case.extra["_ref"]


def _detached(out):
    return {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in out.items()}


def _is_default(value, default):
    """``value`` is the contract's ``default`` itself (a literal of the same type: ``1`` is not ``1.0``)."""
    if default is None:
        return value is None
    return type(value) is type(default) and value == default


def relying_on_defaults(fn, name):
    """``fn`` called as a caller who relies on the contract's defaults of component ``name``: an argument
    equal to its default is left out (a positional one after it is then passed by its contract name), so
    every case whose value is the default runs the learner's own default (softmax's ``axis=-1``: a default
    of ``+1`` fails there). A component without defaults gets ``fn`` itself."""
    params = contract.defaults(name) if name in contract.BY_NAME else []
    given = dict(params)
    if all(default is contract.NO_DEFAULT for _, default in params):
        return fn

    @functools.wraps(fn, updated=())  # a class (AdamW) keeps its own __dict__
    def call(*args, **kwargs):
        kept = [i for i, value in enumerate(args) if i >= len(params) or not _is_default(value, params[i][1])]
        leading = next((n for n, i in enumerate(kept) if i != n), len(kept))  # positional up to the first gap
        named = {params[i][0]: args[i] for i in kept[leading:]}  # after a left-out default: by name
        kwargs = {k: v for k, v in kwargs.items() if k not in given or not _is_default(v, given[k])}
        return fn(*args[:leading], **named, **kwargs)

    return call


def _function_sides(check):
    """(learner, reference, ref_for) of a ``FunctionCheck``: the learner's function is called as
    ``relying_on_defaults`` says."""
    reference_fn = getattr(solutions, check.reference or check.name)
    call = check.call if check.cost is None else cost.measured(check.call, check.cost.watched)

    def learner(fn, case):
        return _outputs(check, relying_on_defaults(fn, check.reference or check.name), case, check.name, call)

    def reference(case):
        return cached(case, lambda: _detached(_outputs(check, reference_fn, case, check.name, check.call)))

    return learner, reference, check.ref_for or (lambda case: None)


def _module_sides(check):
    """(learner, reference, ref_for) of a ``ModuleCheck``: one reference module per constructor call."""
    refs = {}

    def ref_for(case):
        args, kwargs = check.make_args(case)
        key = repr((args, sorted(kwargs.items())))
        if key not in refs:
            refs[key] = reference_module(check.name, *args, **kwargs)
        return refs[key]

    def loss_mask(case):
        return None if check.loss_mask is None else check.loss_mask(case)

    def learner(cls, case):
        args, kwargs = check.make_args(case)
        case.built = build(cls, args, kwargs, ref_for(case) if check.load else None)
        return _outputs(check, case.built, case, f"{check.name}.forward", check.forward, case.built, loss_mask(case))

    def reference(case):
        def compute():
            module = ref_for(case)
            module.zero_grad(set_to_none=True)
            out = _detached(_outputs(check, module, case, check.name, check.forward, module, loss_mask(case)))
            module.zero_grad(set_to_none=True)
            return out
        return cached(case, compute)

    return learner, reference, ref_for


# ---------------------------------------------------------------- the case loop

def refused(name, obj):
    """A failed result when ``obj`` is (or wraps) the reference itself, else None."""
    try:
        guard.refuse_reference(obj)
    except guard.FromScratchViolation as exc:
        return CheckResult(name, False, None, f"{name}: {exc}")
    return None


def not_implemented(name, case_label):
    return CheckResult(name, False, case_label, f"{name}: {say('not_implemented')}", status=Status.NOT_IMPLEMENTED)


def run(check, obj):
    """Run ``check`` on the learner's object; never raises for a wrong answer."""
    if isinstance(check, CustomCheck):
        return check.judge(obj)
    if (answer := refused(check.name, obj)) is not None:
        return answer
    sides = _function_sides(check) if isinstance(check, FunctionCheck) else _module_sides(check)
    cases = check.cases()
    result = _run_cases(check, obj, cases, *sides)
    if getattr(check, "cost", None) is not None:
        result = cost.with_cost(result, check.name, cases, check.cost.problems(cases))
    return result


def _run_cases(check, obj, cases, learner, reference, ref_for):
    """Run ``learner(obj, case)`` (guarded) and ``reference(case)`` on every case; diagnose on failure."""
    name = check.name
    outcomes, failure = [], None
    for i, case in enumerate(cases):
        expected = reference(case)
        try:
            with guard.from_scratch(name):
                got = learner(obj, case)
        except guard.FromScratchViolation as exc:
            return CheckResult(name, False, case.label, f"{name}: {exc}", None)
        except Failure as exc:
            explained = f"\n  {explain(exc.diagnosis)}" if exc.diagnosis else ""
            return CheckResult(name, False, case.label, f"{name}: {exc}{explained}", exc.diagnosis,
                               (exc.diagnosis,) if exc.diagnosis else ())
        except NotImplementedError:
            return not_implemented(name, case.label)
        except Exception as exc:  # the learner's code raised: keep going, diagnose from all cases
            outcomes.append(exc)
            if failure is None:
                shapes = describe(case.inputs)
                required = f"\n  {say('required_inputs', shapes=shapes)}" if shapes else ""
                failure = (i, say("raised", error=type(exc).__name__, text=str(exc).strip()[:300],
                                  line=learner_line(exc)) + required)
            continue
        outcomes.append(got)
        if failure is None:
            for key, value in expected.items():
                if key not in got:
                    graph = say("no_graph") if key.startswith("grad ") else ""
                    failure = (i, say("not_returned", key=key, graph=graph))
                    break
                reason = compare(key, value, got[key])
                if reason:
                    failure = (i, reason)
                    break
    if failure is None:
        return CheckResult(name, True, None, f"{name}: {say('all_passed', n=len(cases))}")
    i, reason = failure
    case = cases[i]
    try:
        findings = localise.explain(check, cases, outcomes, [reference(c) for c in cases], ref_for, i)
    except Exception:  # the diagnosis only advises: a learner module it cannot take apart keeps the plain report
        findings = []
    described = describe(case.inputs)
    lines = [say("case", name=name, i=i + 1, n=len(cases), label=case.label,
                 described=f" ({described})" if described else "")]
    lines += finding_lines(name, findings) + [f"  {reason}"]  # what it is first, then the numbers
    ids = tuple(dict.fromkeys(mid for f in findings for mid in f.ids))
    return CheckResult(name, False, case.label, "\n".join(lines), ids[0] if ids else None, ids)
