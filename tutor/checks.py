"""The comparison library: one check per contract component (COURSE_DESIGN §4, §5).

    from tutor.checks import CHECKS, run_check
    result = run_check("MultiHeadAttention", MultiHeadAttention)  # CheckResult(passed, case, message, diagnosis)
    result.assert_ok()                                            # AssertionError(message) on failure

A check receives the learner's object (a function, or a class it constructs itself with the
contract signature), runs it on several seeded cases in float64 next to the reference package
``solutions`` (imported lazily), copies the reference weights across with ``load_state_dict``
(contract attribute names), compares outputs and, where training depends on it, gradients.
The learner's code runs under ``tutor.guard.from_scratch`` (no built-in it replaces, no
reference code). On a mismatch, ``tutor.mistakes`` names the known wrong variant the output
matches: one bug, or two or three at once, each named only on the cases where it shows; when the
cases disagree, each case's own explanation and "more than one thing differs". A composite
(``PARTS``: ResidualLayerNorm, EncoderLayer, DecoderLayer, Transformer) that no single known bug
explains is localised: each contract part (attention, FFN, norms, layers, positions) is run alone
next to the reference's part with the same weights, recursively, so the message names the part and
the mistake inside it ("your EncoderLayer's norm1.ln: unbiased variance, eps = 1e-12"); parts that
are one object (``norm2 = norm1``, ``[layer] * N``) or tied parameters are named as such; then the
composite's wiring is judged by running its contract forward, and its known wiring bugs (Pre-LN,
masks, shared norms, ...), with the learner's own parts. ``CheckResult.diagnoses`` lists every id named.
Copy-batch checks compare properties, since random content cannot match. Where an exercise is about
cost (a KV cache: ``generate``, ``greedy_decode_cached``), forward hooks on the provided model count
the tokens each call is fed, and a recomputation fails with what was measured, even when every token
is right (``_with_cost``).

Fused-QKV and similar layouts: the contract fixes the parameter names (``W_q, W_k, W_v, W_o``),
so weights are copied by name only. A fused projection is fine when it keeps those parameters and
fuses at compute time (``torch.cat`` of the weights, one matmul); a module that stores a single
``W_qkv`` fails with a message listing the missing and unexpected ``state_dict`` keys.
"""
import functools
import importlib
import inspect
import math
import re
import traceback
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import contract

from . import guard, mistakes

ATOL, RTOL = 1e-6, 1e-5


@dataclass
class CheckResult:
    """Outcome of one check. ``diagnosis`` is a ``tutor.mistakes.MISTAKES`` id or None (the first
    one named); ``diagnoses`` every id the message names (two mistakes at once, several parts)."""
    name: str
    passed: bool
    case: str = None
    message: str = ""
    diagnosis: str = None
    diagnoses: tuple = ()

    def assert_ok(self):
        if not self.passed:
            raise AssertionError(self.message)
        return self


class _Fail(Exception):
    """A learner-facing failure that ends a check early (bad signature, missing keys, ...)."""

    def __init__(self, message, diagnosis=None):
        super().__init__(message)
        self.diagnosis = diagnosis


NOT_IMPLEMENTED = "尚未实现 / not implemented yet"

CHECKS = {}  # check name -> check function, filled by @register


def register(name):
    """Register the decorated function as the check ``name``, one the contract registry declares
    (``contract.Component.checks``)."""
    if name not in contract.CHECK_NAMES:
        raise KeyError(f"check {name!r}: declare it in contract/__init__.py (a component's checks) first")

    def decorate(fn):
        if name in CHECKS:
            raise ValueError(f"check {name!r} is registered twice")
        CHECKS[name] = fn
        return fn
    return decorate


class _Reference:
    """The reference package ``solutions``, imported on first use: a learner's kernel imports
    ``tutor`` in its setup cell, where the reference must stay unloaded."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("solutions"), name)


solutions = _Reference()
RAISES = object()  # a variant that raises on a case


# ---------------------------------------------------------------- helpers

@contextmanager
def _sandbox():
    """Seeded, float64 by default, RNG states and default dtype restored afterwards."""

    torch_state, np_state, dtype = torch.get_rng_state(), np.random.get_state(), torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_rng_state(torch_state)
        np.random.set_state(np_state)


def _shape(v):
    shape = getattr(v, "shape", None)
    return tuple(shape) if shape is not None else type(v).__name__


def _describe(inputs):
    """'Q (2, 4, 8), mask (2, 1, 1, 4)': tensors by shape, plain values (``T=4``) as they are."""
    return ", ".join(f"{k} {_shape(v)}" if hasattr(v, "shape") else f"{k}={v!r}" for k, v in inputs.items()
                     if hasattr(v, "shape") or isinstance(v, (int, float, bool, str)))


def _learner_line(exc):
    """'file:line: code' of the innermost frame outside torch/numpy/tutor, for error messages."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not re.search(r"(site-packages|/torch/|/numpy/|/tutor/)", f.filename)]
    if not frames:
        return ""
    f = frames[-1]
    return f" (line {f.lineno}: {(f.line or '').strip()})"


def _to_numpy(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _num(v):
    """A number as messages show it: -inf (or the dtype's most negative number, which blocks a token
    the same way) as -inf, never -1.79769e+308."""
    v = float(v)
    if math.isinf(v) or abs(v) >= np.finfo(np.float64).max:
        return "-inf" if v < 0 else "inf"
    return f"{v:.6g}"


def _compare(key, expected, got):
    """None when ``got`` matches ``expected``; otherwise a one-line bilingual reason."""

    if isinstance(expected, str):  # text (chapter 11's BPE merges and tokens): exactly equal, both shown
        if got == expected:
            return None
        return f"{key}: 期望 / expected {expected[:300]!r}, 得到 / got {str(got)[:300]!r}"

    if isinstance(expected, float):
        if not isinstance(got, (float, int)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            return f"{key}: 应为 Python float / must be a Python float, got {type(got).__name__}"
        g = float(got)
        if math.isnan(g) or abs(g - expected) > ATOL + RTOL * abs(expected):
            return f"{key}: 期望 / expected {_num(expected)}, 得到 / got {_num(g)}"
        return None
    if isinstance(expected, torch.Tensor):
        if type(got) is not torch.Tensor:
            return f"{key}: 应为 torch.Tensor / must be a plain torch.Tensor, got {type(got).__name__}"
        if expected.dtype in (torch.bool, torch.long) and got.dtype != expected.dtype:
            return f"{key}: dtype 应为 / must be {expected.dtype}, got {got.dtype}"
        if expected.dtype.is_floating_point and not got.dtype.is_floating_point:
            return f"{key}: 应为浮点张量 / must be a floating-point tensor, got {got.dtype}"
    elif isinstance(expected, np.ndarray) and not isinstance(got, (np.ndarray, np.generic)):
        return f"{key}: 应为 NumPy 数组 / must be a NumPy array, got {type(got).__name__}"
    e, g = _to_numpy(expected), _to_numpy(got)
    if e.shape != g.shape:
        return f"{key}: 形状不对 / wrong shape: 期望 expected {tuple(e.shape)}, 得到 got {tuple(g.shape)}"
    if e.dtype == bool or g.dtype == bool or e.dtype.kind in "iu":
        bad = e != g
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"{key}: {int(bad.sum())} 个元素不同 / elements differ, first at {idx}: "
                    f"expected {e[idx]}, got {g[idx]}")
        return None
    e, g = e.astype(np.float64), g.astype(np.float64)
    if e.size == 0:
        return None
    nan = np.isnan(g) & ~np.isnan(e)
    if nan.any():
        idx = tuple(int(i) for i in np.argwhere(nan)[0])
        return f"{key}: 出现 NaN / contains NaN, first at {idx} (expected {_num(e[idx])})"
    err = np.abs(np.nan_to_num(g - e, nan=0.0, posinf=np.inf, neginf=np.inf))
    if not np.allclose(g, e, atol=ATOL, rtol=RTOL, equal_nan=True):
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(err), err.shape))
        error = "inf" if err[idx] >= np.finfo(np.float64).max / 2 else f"{err[idx]:.3g}"
        return f"{key}: 最大误差 / max error {error} at {idx}: expected {_num(e[idx])}, got {_num(g[idx])}"
    return None


def _matches(expected, got):
    return all(k in got and _compare(k, v, got[k]) is None for k, v in expected.items())


def _unpack(ret, names, call):
    if len(names) == 1:
        return {names[0]: ret}
    if not isinstance(ret, (tuple, list)) or len(ret) != len(names):
        raise _Fail(f"{call} 应返回 / must return ({', '.join(names)}), got {type(ret).__name__}"
                    + (f" of length {len(ret)}" if isinstance(ret, (tuple, list)) else ""))
    return dict(zip(names, ret))


def _perturb(module, seed):
    """Non-default norm weights and biases: every 1-D parameter gets noise (seeded)."""

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def _reference(name, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return _perturb(getattr(solutions, name)(*args, **kwargs).double(), seed + 1).eval()


def _build(cls, args, kwargs, ref, seed=0):
    """Construct the learner's class (seeded) and copy the reference weights by name."""

    torch.manual_seed(seed)
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    call = f"{getattr(cls, '__name__', cls)}({', '.join(shown)})"
    try:
        module = cls(*args, **kwargs)
    except guard.FromScratchViolation:
        raise
    except NotImplementedError:
        raise _Fail(NOT_IMPLEMENTED) from None
    except Exception as exc:
        raise _Fail(f"构造 {call} 失败 / constructing {call} failed: {type(exc).__name__}: {exc}{_learner_line(exc)}") \
            from None
    if not isinstance(module, torch.nn.Module):
        raise _Fail(f"{call} 应是 nn.Module / must be an nn.Module, got {type(module).__name__}")
    module = module.double()
    if ref is not None:
        ref_keys, own = set(ref.state_dict()), set(module.state_dict())
        missing, extra = sorted(ref_keys - own), sorted(own - ref_keys)
        if missing:
            diagnosis = "missing_w_o" if all(k.split(".")[-2:-1] == ["W_o"] for k in missing) else None
            raise _Fail(f"state_dict 与契约不符 / state_dict does not follow the contract: "
                        f"缺少 missing {missing}" + (f"; 多出 unexpected {extra}" if extra else "")
                        + " —— 请使用契约中的属性名 / use the contract's attribute names", diagnosis)
        try:
            module.load_state_dict(ref.state_dict(), strict=False)
        except RuntimeError as exc:
            raise _Fail(f"加载参考权重失败（形状不符）/ loading the reference weights failed (shape mismatch): {exc}") \
                from None
    return module.eval()


def _grads(out, inputs, module, seed, loss_mask=None):
    """Backward of a fixed random projection of ``out``: gradients of inputs and parameters.
    ``loss_mask`` (broadcastable to ``out``) keeps only the outputs a training loss uses."""

    gen = torch.Generator().manual_seed(seed + 7)
    weight = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    if loss_mask is not None:
        weight = weight * loss_mask
    (out * weight).sum().backward()
    grads = {f"grad {k}": v.grad for k, v in inputs.items()}
    if module is not None:
        for n, p in module.named_parameters():
            grads[f"grad {n}"] = p.grad
    return grads


def _leaf(t):
    return t.detach().clone().requires_grad_(True)


# ---------------------------------------------------------------- the engine

@dataclass
class Case:
    label: str
    inputs: dict  # what the learner receives; described in messages
    extra: dict = None  # everything else the case needs
    built: object = None  # the learner's module that ran this case (a composite is localised in it)

    def __getitem__(self, key):
        if key in self.inputs:
            return self.inputs[key]
        return self.extra[key]

    def get(self, key, default=None):
        try:
            return self[key]
        except (KeyError, TypeError):
            return default


def _run(name, obj, cases, learner, reference, ref_for=lambda case: None):
    """Run ``learner(obj, case)`` (guarded) and ``reference(case)`` on every case; diagnose on failure."""
    if (refused := _refused(name, obj)) is not None:
        return refused
    outcomes, failure = [], None
    for i, case in enumerate(cases):
        expected = reference(case)
        try:
            with guard.from_scratch(name):
                got = learner(obj, case)
        except guard.FromScratchViolation as exc:
            return CheckResult(name, False, case.label, f"{name}: {exc}", None)
        except _Fail as exc:
            explained = f"\n  {mistakes.explain(exc.diagnosis)}" if exc.diagnosis else ""
            return CheckResult(name, False, case.label, f"{name}: {exc}{explained}", exc.diagnosis,
                               (exc.diagnosis,) if exc.diagnosis else ())
        except NotImplementedError:
            return CheckResult(name, False, case.label, f"{name}: {NOT_IMPLEMENTED}", None)
        except Exception as exc:  # the learner's code raised: keep going, diagnose from all cases
            outcomes.append(exc)
            if failure is None:
                shapes = _describe(case.inputs)
                required = (f"\n  契约要求这个用例的输入也能运行 / the contract requires these inputs to work: {shapes}"
                            if shapes else "")
                failure = (i, f"运行出错 / raised {type(exc).__name__}: {str(exc).strip()[:300]}{_learner_line(exc)}"
                              f"{required}")
            continue
        outcomes.append(got)
        if failure is None:
            for key, value in expected.items():
                if key not in got:
                    graph = (" —— 输出没有自动求导图 / the output has no autograd graph (no_grad / inference_mode)"
                             if key.startswith("grad ") else "")
                    failure = (i, f"{key}: 没有返回 / not returned{graph}")
                    break
                reason = _compare(key, value, got[key])
                if reason:
                    failure = (i, reason)
                    break
    if failure is None:
        return CheckResult(name, True, None, f"{name}: {len(cases)} 个用例全部通过 / all {len(cases)} cases passed")
    i, reason = failure
    case = cases[i]
    try:
        findings = _explain(name, cases, outcomes, [reference(c) for c in cases], ref_for, i)
    except Exception:  # the diagnosis only advises: a learner module it cannot take apart keeps the plain report
        findings = []
    described = _describe(case.inputs)
    lines = [f"{name}: 用例 case {i + 1}/{len(cases)} 「{case.label}」" + (f" ({described})" if described else ""),
             f"  {reason}"]
    lines += _finding_lines(name, findings)
    ids = tuple(dict.fromkeys(mid for f in findings for mid in f.ids))
    return CheckResult(name, False, case.label, "\n".join(lines), ids[0] if ids else None, ids)


# ---------------------------------------------------------------- diagnosis

MORE = "不止一处与契约不同 / more than one thing differs from the contract"


@dataclass
class Finding:
    """One reason a learner's outcome differs from the reference."""
    ids: tuple = ()  # known mistakes (several: at once); () with ``reason``: a difference no known mistake explains
    where: str = None  # the part it is in ("norm1.ln"); None: the object under check itself
    kind: str = None  # that part's contract name ("LayerNorm")
    cases: tuple = None  # 0-based indices of the cases it is named on; None: every failing case
    note: str = ""  # a detail, e.g. the eps found
    reason: str = ""  # what differs, when no known mistake does
    only: dict = None  # id -> cases, for a bug of a combination that shows on some cases only


class _Table:
    """The known wrong variants of check ``name`` on every case, each evaluated once, when needed.
    ``provider(i)`` is the module whose weights and parts the variants use on case ``i``."""

    def __init__(self, name, cases, provider, learner=False):
        self.learner, self.entries, self.cache = learner, {}, {}
        build = mistakes.VARIANTS.get(name)
        contract = mistakes.WIRING.get(name) if learner else None
        for i, case in enumerate(cases):
            module = provider(i)
            if learner and module is None:
                continue  # the learner's module was never built for this case
            found = [((), lambda m=module, c=case: contract(m, c))] if contract else []
            found += build(module, case) if build else []
            seen = {}
            for entry in found:
                ids = entry[0] if isinstance(entry[0], tuple) else (entry[0],)
                k = seen[ids] = seen.get(ids, -1) + 1
                self.entries.setdefault((ids, k), {})[i] = (entry[1], *entry[2:])
        self.order = sorted(self.entries, key=lambda key: len(key[0]))  # the contract, each bug alone, then two, three

    def out(self, key, i, which=None):
        """Output of variant ``key`` on case ``i`` (``which``: its ``which``-th bug alone), or RAISES."""

        if (key, i, which) not in self.cache:
            entry = self.entries[key][i]
            thunk = entry[0] if which is None else entry[2][which]
            try:
                with torch.no_grad(), (guard.from_scratch() if self.learner else nullcontext()):
                    self.cache[(key, i, which)] = thunk()
            except Exception:
                self.cache[(key, i, which)] = RAISES
        return self.cache[(key, i, which)]

    def reproduces(self, key, outcomes, expected, failing):
        """Variant ``key`` gives the learner's outcome on every case and shows on a failing one."""
        agree = shows = False
        for i, got in enumerate(outcomes):
            if i not in self.entries[key]:
                continue
            variant = self.out(key, i)
            if isinstance(got, Exception):
                if variant is not RAISES:
                    return False
                shows = True
            elif variant is RAISES or not _matches(variant, got):
                return False
            else:
                agree = True
                shows = shows or (i in failing and not _matches(variant, expected[i]))
        return agree and (shows or not key[0])

    def finding(self, key, failing, expected, first):
        entry = self.entries[key].get(first) or next(iter(self.entries[key].values()))
        only = {}
        for j, mid in enumerate(key[0] if len(entry) > 2 and entry[2] else ()):
            shows = tuple(i for i in failing if i in self.entries[key]
                          and ((v := self.out(key, i, j)) is RAISES or not _matches(v, expected[i])))
            if shows != tuple(failing):
                only[mid] = shows
        return Finding(key[0], note=entry[1] if len(entry) > 1 else "", only=only or None)


def _failing(outcomes, expected):
    return [i for i, got in enumerate(outcomes) if isinstance(got, Exception) or not _matches(expected[i], got)]


def _diagnose(name, cases, outcomes, expected, ref_for, first, alone=False):
    """Findings from the known wrong variants (``tutor.mistakes``) computed with the reference's
    weights: one variant (a bug alone, or two or three at once) that reproduces every case; else,
    case by case, the variant that reproduces that case, so that no mistake is named on a case where
    it does not show, and "more than one thing differs" when the cases disagree.
    ``alone``: only a single bug that reproduces every case, or nothing."""
    table = _Table(name, cases, lambda i: ref_for(cases[i]))
    failing = _failing(outcomes, expected)
    for key in table.order:
        if alone and len(key[0]) > 1:
            return []
        if table.reproduces(key, outcomes, expected, failing):
            rivals = [k for k in table.order if len(k[0]) == len(key[0]) and set(k[0]) != set(key[0])
                      and table.reproduces(k, outcomes, expected, failing)]
            if rivals:  # the cases do not tell these mistakes apart: naming one would be a guess
                return []
            return [table.finding(key, failing, expected, first)]
    if alone:
        return []
    groups = {}  # variant key (or (ids, None) for an error message) -> the failing cases it reproduces
    for i in failing:
        got = outcomes[i]
        if isinstance(got, Exception):
            mid = next((m for fragment, m in mistakes.EXCEPTIONS if fragment in str(got)), None)
            key = ((mid,), None) if mid else None
        else:
            keys = [k for k in table.order if i in table.entries[k] and (v := table.out(k, i)) is not RAISES
                    and _matches(v, got) and not _matches(v, expected[i])]
            # a case that two different mistakes explain alike tells them apart no better than none
            key = keys[0] if keys and all(set(k[0]) >= set(keys[0][0]) for k in keys) else None
            if not keys:
                mid = next((m for rule in (mistakes.RULES.get(name), mistakes.RULES["*"]) if rule
                            and (m := rule(cases[i], expected[i], got))), None)
                key = ((mid,), None) if mid else None
        if key is not None:
            groups.setdefault(key, []).append(i)

    def note(key, idx):  # a variant's detail (e.g. the eps found); an error message has none
        if key[1] is None:
            return ""
        entry = table.entries[key][idx[0]]
        return entry[1] if len(entry) > 1 else ""

    findings = [Finding(key[0], cases=tuple(idx), note=note(key, idx)) for key, idx in groups.items()]
    explained = {i for f in findings for i in f.cases}
    if findings and len(explained) < len(failing):
        findings.append(Finding(cases=tuple(i for i in failing if i not in explained), reason=MORE))
    if findings and len(findings) == 1 and findings[0].ids and len(explained) == len(failing):
        findings[0].cases = None  # one mistake explains every failing case
    findings.sort(key=lambda f: f.cases is not None and first not in f.cases)
    return findings


def _explain(name, cases, outcomes, expected, ref_for, first):
    """Findings for a failed check. A composite that one known bug (with the reference's parts)
    reproduces has right parts; otherwise its parts are tested alone (same weights), and when some
    differ, its wiring is judged with the learner's own parts."""
    module = cases[first].built
    tied = _tied(module, ref_for(cases[first])) if module is not None else []
    if name in PARTS and module is not None:
        shared = len(_owners(name, module, ref_for(cases[first]))) < len(PARTS[name](ref_for(cases[first])))
        if not (tied or shared) and (found := _diagnose(name, cases, outcomes, expected, ref_for, first, alone=True)):
            return found
        pairs = {}  # one (learner module, reference module) per reference: each size the check built
        for case in [cases[first]] + cases:
            if case.built is not None:
                pairs.setdefault(id(ref_for(case)), (case.built, ref_for(case)))
        found = tied + _parts_alone(name, list(pairs.values()))
        if found:
            return found + _wiring(name, None, cases, outcomes, expected, [c.built for c in cases])
    return tied or _diagnose(name, cases, outcomes, expected, ref_for, first)


def _tied(module, ref):
    """Parameters that are one tensor under two contract names (``out_proj.weight = tgt_embed.weight``)
    where the reference keeps them apart; a module held twice (``[layer] * N``, ``norm2 = norm1``)
    is a shared part instead."""
    names, found = {}, []
    theirs = dict(ref.named_parameters(remove_duplicate=False)) if ref is not None else {}
    for n, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    for group in names.values():
        owners = {id(module.get_submodule(n.rpartition(".")[0])) for n in group}
        if len(owners) > 1 and len({id(theirs.get(n)) for n in group}) > 1:
            found.append(Finding(("weights_tied",), ", ".join(group), "Parameter"))
    return found


def _wiring(name, where, cases, outcomes, expected, modules):
    """The composite's contract forward, then its known wiring bugs, run with the learner's parts:
    nothing to add when the contract reproduces the learner's outcome; else the bug that does."""
    table = _Table(name, cases, lambda i: modules[i], learner=True)
    failing = _failing(outcomes, expected)
    key = next((k for k in table.order if table.reproduces(k, outcomes, expected, failing)), None)
    if key is None:
        return [Finding(where=where, kind=name,
                        reason="上面的部件解释不了全部差别 / the parts above do not explain the whole difference")]
    if not key[0]:
        return []
    found = table.finding(key, failing, expected, failing[0] if failing else 0)
    found.where, found.kind, found.only = where, name, None
    return [found]


def _parts_alone(kind, pairs, prefix=""):
    """Each contract part of the learner's modules run alone next to the same part of the reference
    (same weights), recursively; ``pairs``: (learner module, reference module), one per size the
    check built. Findings name the part and the mistake inside it. Parts that are one object
    (``self.norm2 = self.norm1``, ``[layer] * N``) are named as shared."""
    module, ref = pairs[0]
    parts, owners, findings = PARTS[kind](ref), _owners(kind, *pairs[0]), []
    for path, part_kind in parts:
        try:
            sub = [(mine.get_submodule(path), theirs.get_submodule(path)) for mine, theirs in pairs]
        except AttributeError:
            continue
        same = owners[id(sub[0][0])]
        if len(same) > 1 and part_kind in SHARED:
            if path == same[0]:
                findings.append(Finding((SHARED[part_kind],), ", ".join(prefix + p for p in same), part_kind))
            if path != same[-1]:
                continue  # a shared part holds the weights loaded last
        findings += _probe(part_kind, sub, prefix + path)
    return findings


def _owners(kind, module, ref):
    """id of each contract part object of ``module`` -> the paths that hold it."""
    owners = {}
    for path, _ in PARTS[kind](ref):
        try:
            owners.setdefault(id(module.get_submodule(path)), []).append(path)
        except AttributeError:
            continue
    return owners


def _probe(kind, pairs, where):
    """Findings about a learner's part run alone on a few inputs next to the reference's part;
    ``pairs``: (learner part, reference part), one per size the check built."""

    names, forward = OUTPUTS[kind], FORWARD[kind]
    inner = _parts_alone(kind, pairs, where + ".") if kind in PARTS else []
    cases, expected, outcomes, owners = [], [], [], {}
    for mine, theirs in pairs:
        for case in _probe_cases(kind, theirs):
            owners[id(case)] = (mine, theirs)
            with torch.no_grad():
                expected.append(_unpack(forward(theirs, case, case.inputs), names, kind))
            try:
                with torch.no_grad(), guard.from_scratch():
                    outcomes.append(_unpack(forward(mine, case, case.inputs), names, kind))
            except Exception:  # the part does not follow its contract's call: only its own parts can be tested
                return inner
            cases.append(case)
    failing = _failing(outcomes, expected)
    if not failing:
        return inner
    if inner:
        return inner + _wiring(kind, where, cases, outcomes, expected, [owners[id(c)][0] for c in cases])
    found = _diagnose(kind, cases, outcomes, expected, lambda case: owners[id(case)][1], failing[0])
    if not found:
        i = failing[0]
        reason = next(r for key, value in expected[i].items() if (r := _compare(key, value, outcomes[i][key])))
        return [Finding(where=where, kind=kind, reason=reason)]
    for f in found:
        f.where, f.kind, f.cases, f.only = where, kind, None, None
    return found


def _case_numbers(indices, only=False):
    numbers = ", ".join(str(i + 1) for i in indices)
    case = "case" if len(indices) == 1 else "cases"
    return f"只在用例 {numbers} / only on {case} {numbers}" if only else f"用例 {numbers} / {case} {numbers}"


def _finding_lines(name, findings):
    """The diagnosis lines of a message, parts grouped where the same mistake sits in several places."""
    lines, groups = [], {}
    for f in findings:
        if f.where is not None:
            groups.setdefault((f.ids, f.kind, f.note, f.reason), []).append(f.where)
    if groups:
        lines.append(f"  逐个部件单独测试（同样的权重）/ each part of your {name} tested alone (same weights):")
    for (ids, kind, note, reason), wheres in groups.items():
        places = ", ".join(wheres[:3]) + (f" … ({len(wheres)} 处 / places)" if len(wheres) > 3 else "")
        lines.append(f"  定位 / where: 你的 {name} 的 {places}（{kind}）/ your {name}'s {places} ({kind}):")
        lines += [f"    {mistakes.explain(mid)}" for mid in ids]
        lines += [f"    {text}" for text in (note, reason and f"不是已知错误 / not a known mistake: {reason}") if text]
    for f in findings:
        if f.where is not None:
            continue
        cases = f"（{_case_numbers(f.cases)}）" if f.cases is not None else ""
        indent = "  "
        if groups and f.ids:
            lines.append(f"  定位 / where: 你的 {name} 连接各部件的方式 / how your {name} connects its parts:")
            indent = "    "
        elif len(f.ids) > 1:
            lines.append(f"  {len(f.ids)} 个错误同时存在 / {len(f.ids)} mistakes at once:")
            indent = "    "
        for mid in f.ids:
            only = (f.only or {}).get(mid)
            where = f"（{_case_numbers(only, only=True)}）" if only else ""
            lines.append(f"{indent}{mistakes.explain(mid)}{cases}{where}")
        if f.note:
            lines.append(f"{indent}  {f.note}")
        if f.reason:
            more = f.reason if groups else f"{_case_numbers(f.cases)} 另有不同 / differ in yet another way"
            lines.append(f"  {MORE}: {more}")
    if len([f for f in findings if f.where is None and f.ids and f.cases is not None]) > 1:
        lines.append(f"  {MORE}")
    return lines


def _randn(gen, *shape, scale=1.0):
    return scale * torch.randn(*shape, generator=gen, dtype=torch.float64)


def _attention_cases():
    """SDPA cases: 4-D and 3-D, T_q != T_k, d_v != d_k, padding/causal/combined masks, a fully masked row, 0/1 ints."""

    g = torch.Generator().manual_seed(1)
    cases = []

    def add(label, q_shape, T_k, d_v, mask=None):
        *lead, T_q, d_k = q_shape
        inputs = {"Q": _randn(g, *q_shape), "K": _randn(g, *lead, T_k, d_k), "V": _randn(g, *lead, T_k, d_v)}
        if mask is not None:
            inputs["mask"] = mask
        cases.append(Case(label, inputs))

    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None, None]
    pad = torch.tensor([[True, True, True, True], [False, True, True, False]])[:, None, None, :]
    add("无掩码 / no mask, B=2 H=2 T_q=3 T_k=5 d_k=8 d_v=6", (2, 2, 3, 8), 5, 6)
    add("B=1 H=1, 键填充掩码 / key padding mask", (1, 1, 4, 8), 5, 3,
        torch.tensor([[True, True, True, False, False]])[:, None, None, :])
    add("因果掩码 / causal mask, T=4", (2, 3, 4, 4), 4, 4, causal)
    add("填充 & 因果，含整行被遮挡 / padding & causal with a fully masked row", (2, 2, 4, 8), 4, 5, pad & causal)
    add("0/1 整数掩码、3 维输入 / 0/1 integer mask, 3-D inputs", (2, 3, 8), 5, 4,
        torch.tensor([[[1, 1, 0, 1, 0]], [[0, 0, 0, 0, 0]]]))
    return cases


def _cached(case, compute):
    """The reference outcome of a case, computed once."""
    if case.extra is None:
        case.extra = {}
    if "_ref" not in case.extra:
        case.extra["_ref"] = compute()
    return case.extra["_ref"]


def _detached(out):
    return {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in out.items()}


def _function_check(name, names, call, reference_fn, grads=()):
    """(learner, reference) for a function. ``call(fn, case, leaves)`` -> raw return;
    ``grads``: input names whose gradients (of the first output) are compared."""

    def outputs(fn, case, label):
        leaves = {k: _leaf(case[k]) for k in grads if k in case.inputs}
        got = _unpack(call(fn, case, leaves), names, label)
        first = got.get(names[0])
        if leaves and isinstance(first, torch.Tensor) and first.requires_grad:
            got.update(_grads(first, leaves, None, 0))
        return got

    learner = lambda fn, case: outputs(fn, case, name)  # noqa: E731
    reference = lambda case: _cached(case, lambda: _detached(outputs(reference_fn, case, name)))  # noqa: E731
    return learner, reference


def _module_check(name, names, make_args, forward, grads=(), load=True, loss_mask=None):
    """(learner, reference, ref_for) for a class. ``make_args(case)`` -> (args, kwargs) of the
    constructor; ``forward(module, case, leaves)`` -> raw return; ``loss_mask(case)`` -> the
    outputs a training loss uses (gradients come from those only)."""

    refs = {}

    def ref_for(case):
        args, kwargs = make_args(case)
        key = repr((args, sorted(kwargs.items())))
        if key not in refs:
            refs[key] = _reference(name, *args, **kwargs)
        return refs[key]

    def outputs(module, case, label):
        leaves = {k: _leaf(case[k]) for k in grads if k in case.inputs}
        got = _unpack(forward(module, case, leaves), names, label)
        first = got.get(names[0])
        if isinstance(first, torch.Tensor) and first.requires_grad:
            got.update(_grads(first, leaves, module, 0, None if loss_mask is None else loss_mask(case)))
        return got

    def learner(cls, case):
        args, kwargs = make_args(case)
        case.built = _build(cls, args, kwargs, ref_for(case) if load else None)
        return outputs(case.built, case, f"{name}.forward")

    def reference(case):
        def compute():
            module = ref_for(case)
            module.zero_grad(set_to_none=True)
            out = _detached(outputs(module, case, name))
            module.zero_grad(set_to_none=True)
            return out
        return _cached(case, compute)

    return learner, reference, ref_for


@register("MultiHeadAttention")
def check_MultiHeadAttention(cls):
    g = torch.Generator().manual_seed(2)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    cases = []

    def add(label, d_model, H, B, T_q, T_k=None, mask=None):
        inputs = {"x_q": _randn(g, B, T_q, d_model, scale=2.0)}
        if T_k is not None:
            inputs["x_kv"] = _randn(g, B, T_k, d_model, scale=2.0)
        if mask is not None:
            inputs["mask"] = mask
        cases.append(Case(label, inputs, {"d_model": d_model, "H": H}))

    add("自注意力 / self-attention, B=2 T=5 d_model=16 H=4", 16, 4, 2, 5)
    add("交叉注意力 + 键填充 / cross-attention + key padding, T_q=3 T_k=6 H=4", 16, 4, 2, 3, 6,
        torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :])
    add("B=1 H=1, 因果 / causal, d_model=8", 8, 1, 1, 4, mask=causal[..., :4, :4])
    pad = torch.tensor([[True, True, True, True, True], [False, True, True, True, False]])[:, None, None, :]
    add("填充 & 因果，含整行被遮挡 / padding & causal, a fully masked row, d_model=12 "
        "H=2", 12, 2, 2, 5, mask=pad & causal)

    learner, reference, ref_for = _module_check(
        "MultiHeadAttention", OUTPUTS["MultiHeadAttention"], lambda case: ((case["d_model"], case["H"]), {}),
        FORWARD["MultiHeadAttention"], grads=("x_q", "x_kv"))
    return _run("MultiHeadAttention", cls, cases, learner, reference, ref_for)


@register("ScaledDotProductAttention")
def check_ScaledDotProductAttention(cls):
    cases = _attention_cases()[:4]
    forward = lambda m, case, x: m(x["Q"], x["K"], x["V"], case.get("mask"))  # noqa: E731
    learner, reference, ref_for = _module_check(
        "ScaledDotProductAttention", ("out", "attn"), lambda case: ((), {"dropout": 0.5}), forward,
        grads=("Q", "K", "V"), load=False)
    return _run("ScaledDotProductAttention", cls, cases, learner, reference, ref_for)


@register("scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn):
    call = lambda f, case, x: f(x["Q"], x["K"], x["V"], case.get("mask"))  # noqa: E731
    learner, reference = _function_check("scaled_dot_product_attention", ("out", "attn"), call,
                                         solutions.scaled_dot_product_attention, grads=("Q", "K", "V"))
    return _run("scaled_dot_product_attention", fn, _attention_cases(), learner, reference)


@register("attention_numpy")
def check_attention_numpy(fn):
    cases = [Case(c.label, {k: v.numpy() for k, v in c.inputs.items()}) for c in _attention_cases()]
    call = lambda f, case, _: f(*(case[k].copy() for k in ("Q", "K", "V")), case.get("mask"))  # noqa: E731
    learner, reference = _function_check("attention_numpy", ("out", "weights"), call, solutions.attention_numpy)
    return _run("attention_numpy", fn, cases, learner, reference)


@register("softmax")
def check_softmax(fn):
    rng = np.random.default_rng(0)
    cases = [Case("axis=-1, 2 维 / 2-D", {"x": rng.normal(size=(2, 5)) * 3}, {"axis": -1}),
             Case("大输入 / large inputs (~1000)", {"x": rng.normal(size=(3, 4)) + 1000.0}, {"axis": -1}),
             Case("axis=0, 3 维 / 3-D", {"x": rng.normal(size=(3, 4, 5))}, {"axis": 0}),
             Case("很负的输入 / very negative inputs, axis=1", {"x": rng.normal(size=(2, 3)) - 1000.0}, {"axis": 1}),
             Case("1 维 / 1-D", {"x": rng.normal(size=(6,))}, {"axis": -1})]
    call = lambda f, case, _: f(case["x"].copy(), axis=case["axis"])  # noqa: E731
    learner, reference = _function_check("softmax", ("y",), call, solutions.softmax)
    return _run("softmax", fn, cases, learner, reference)


@register("sinusoidal_positional_encoding")
def check_sinusoidal_positional_encoding(fn):
    cases = [Case(f"max_len={m}, d_model={d}", {}, {"max_len": m, "d_model": d})
             for m, d in ((10, 16), (50, 8), (7, 5), (1, 4))]
    call = lambda f, case, _: f(case["max_len"], case["d_model"])  # noqa: E731
    learner, reference = _function_check("sinusoidal_positional_encoding", ("pe",), call,
                                         solutions.sinusoidal_positional_encoding)
    return _run("sinusoidal_positional_encoding", fn, cases, learner, reference)


@register("PositionalEncoding")
def check_PositionalEncoding(cls):
    g = torch.Generator().manual_seed(3)
    cases = [Case(f"d_model={d}, max_len={m}, x (B={b}, T={t})", {"x": _randn(g, b, t, d)},
                  {"d_model": d, "max_len": m})
             for d, m, b, t in ((16, 20, 2, 7), (5, 9, 1, 9), (8, 30, 3, 1))]

    learner, reference, ref_for = _module_check(
        "PositionalEncoding", OUTPUTS["PositionalEncoding"],
        lambda case: ((case["d_model"],), {"max_len": case["max_len"]}),
        FORWARD["PositionalEncoding"], grads=(), load=False)
    return _run("PositionalEncoding", cls, cases, learner, reference, ref_for)


@register("FeedForward")
def check_FeedForward(cls):
    g = torch.Generator().manual_seed(4)
    cases = [Case("relu, x (2, 5, 8), d_ff=32", {"x": _randn(g, 2, 5, 8)}, {"d_ff": 32, "activation": "relu"}),
             Case("gelu, x (1, 3, 8), d_ff=16", {"x": _randn(g, 1, 3, 8)}, {"d_ff": 16, "activation": "gelu"}),
             Case("relu, 2 维输入 / 2-D input x (4, 8)", {"x": _randn(g, 4, 8)}, {"d_ff": 24, "activation": "relu"})]
    learner, reference, ref_for = _module_check(
        "FeedForward", OUTPUTS["FeedForward"],
        lambda case: ((case["x"].size(-1), case["d_ff"]), {"activation": case["activation"]}),
        FORWARD["FeedForward"], grads=("x",))
    return _run("FeedForward", cls, cases, learner, reference, ref_for)


def _norm_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [Case("x (2, 5, 8)", {"x": _randn(g, 2, 5, 8, scale=3.0) + 1.0}, {"eps": 1e-5}),
            Case("小方差输入 / small-variance input (std 1e-3)", {"x": _randn(g, 2, 4, 8, scale=1e-3)}, {"eps": 1e-5}),
            Case("B=1, eps=1e-3", {"x": _randn(g, 1, 3, 8)}, {"eps": 1e-3}),
            Case("2 维输入 / 2-D input x (4, 8)", {"x": _randn(g, 4, 8, scale=0.5)}, {"eps": 1e-5})]


@register("LayerNorm")
def check_LayerNorm(cls):
    learner, reference, ref_for = _module_check(
        "LayerNorm", OUTPUTS["LayerNorm"], lambda case: ((case["x"].size(-1),), {"eps": case["eps"]}),
        FORWARD["LayerNorm"], grads=("x",))
    return _run("LayerNorm", cls, _norm_cases(5), learner, reference, ref_for)


@register("RMSNorm")
def check_RMSNorm(cls):
    learner, reference, ref_for = _module_check(
        "RMSNorm", ("out",), lambda case: ((case["x"].size(-1),), {"eps": case["eps"]}),
        lambda m, case, x: m(x["x"]), grads=("x",))
    return _run("RMSNorm", cls, _norm_cases(6), learner, reference, ref_for)


@register("ResidualLayerNorm")
def check_ResidualLayerNorm(cls):
    g = torch.Generator().manual_seed(7)
    cases = []
    for c in _norm_cases(7):
        c.inputs["sublayer_out"] = _randn(g, *c["x"].shape, scale=float(c["x"].std()))
        cases.append(c)
    learner, reference, ref_for = _module_check(
        "ResidualLayerNorm", OUTPUTS["ResidualLayerNorm"], lambda case: ((case["x"].size(-1),), {"eps": case["eps"]}),
        FORWARD["ResidualLayerNorm"], grads=("x", "sublayer_out"))
    return _run("ResidualLayerNorm", cls, cases, learner, reference, ref_for)


@register("PreLNResidual")
def check_PreLNResidual(cls):
    cases = _norm_cases(8)
    for c in cases:
        d = c["x"].size(-1)
        torch.manual_seed(9)
        lin = torch.nn.Linear(d, d).double()
        c.extra["sublayer"] = lambda h, lin=lin: torch.tanh(lin(h))
    learner, reference, ref_for = _module_check(
        "PreLNResidual", ("out",), lambda case: ((case["x"].size(-1),), {"eps": case["eps"]}),
        lambda m, case, x: m(x["x"], case["sublayer"]), grads=("x",))
    return _run("PreLNResidual", cls, cases, learner, reference, ref_for)


@register("make_pad_mask")
def check_make_pad_mask(fn):
    cases = [Case("pad_id=0, B=2 T=6", {"tokens": torch.tensor([[5, 3, 4, 0, 0, 0], [7, 7, 8, 9, 3, 0]])},
                  {"pad_id": 0}),
             Case("pad_id=9, B=1 T=4", {"tokens": torch.tensor([[9, 4, 9, 9]])}, {"pad_id": 9}),
             Case("无填充 / no padding, B=3 T=2", {"tokens": torch.tensor([[1, 2], [3, 4], [5, 6]])}, {"pad_id": 0})]
    call = lambda f, case, _: f(case["tokens"].clone(), case["pad_id"])  # noqa: E731
    learner, reference = _function_check("make_pad_mask", ("mask",), call, solutions.make_pad_mask)
    return _run("make_pad_mask", fn, cases, learner, reference)


@register("make_subsequent_mask")
def check_make_subsequent_mask(fn):
    cases = [Case(f"T={T}", {}, {"T": T}) for T in (4, 1, 7)]
    call = lambda f, case, _: f(case["T"])  # noqa: E731
    learner, reference = _function_check("make_subsequent_mask", ("mask",), call, solutions.make_subsequent_mask)
    return _run("make_subsequent_mask", fn, cases, learner, reference)


def _pad_causal(keep):
    T = keep.size(1)
    return keep[:, None, None, :] & torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]


@register("EncoderLayer")
def check_EncoderLayer(cls):
    g = torch.Generator().manual_seed(10)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    cases = [Case("键填充 / key padding, B=2 T=5 d_model=16 H=4",
                  {"x": _randn(g, 2, 5, 16), "src_mask": keep[:, None, None, :]}, {"cfg": (16, 4, 32)}),
             Case("无掩码 / no mask, B=1 T=3 d_model=8 H=1", {"x": _randn(g, 1, 3, 8)}, {"cfg": (8, 1, 16)})]
    learner, reference, ref_for = _module_check(
        "EncoderLayer", OUTPUTS["EncoderLayer"], lambda case: (case["cfg"], {"dropout": 0.1}),
        FORWARD["EncoderLayer"], grads=("x",))
    return _run("EncoderLayer", cls, cases, learner, reference, ref_for)


@register("DecoderLayer")
def check_DecoderLayer(cls):
    g = torch.Generator().manual_seed(11)
    keep_t = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    keep_s = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    keep_5 = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    cases = [Case("因果 & 填充 / causal & padding, T_t=4 T_s=6 d_model=16 H=4",
                  {"y": _randn(g, 2, 4, 16), "memory": _randn(g, 2, 6, 16), "tgt_mask": _pad_causal(keep_t),
                   "memory_mask": keep_s[:, None, None, :]}, {"cfg": (16, 4, 32)}),
             Case("T_t = T_s = 5, B=1 H=2",
                  {"y": _randn(g, 1, 5, 8), "memory": _randn(g, 1, 5, 8),
                   "tgt_mask": _pad_causal(torch.ones(1, 5, dtype=torch.bool)),
                   "memory_mask": keep_5[:, None, None, :]}, {"cfg": (8, 2, 16)})]
    learner, reference, ref_for = _module_check(
        "DecoderLayer", OUTPUTS["DecoderLayer"], lambda case: (case["cfg"], {"dropout": 0.1}), FORWARD["DecoderLayer"],
        grads=("y", "memory"))
    return _run("DecoderLayer", cls, cases, learner, reference, ref_for)


TRANSFORMER_CFG = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.1, max_len=32, pad_id=0)


@register("Transformer")
def check_Transformer(cls):
    cases = [Case("B=2, T_s=7 T_t=5, 源和目标都有填充 / padding in source and target",
                  {"src": torch.tensor([[5, 3, 8, 4, 9, 2, 0], [7, 6, 2, 0, 0, 0, 0]]),
                   "tgt_in": torch.tensor([[1, 5, 3, 8, 4], [1, 7, 6, 0, 0]])}),
             Case("B=1, T_s = T_t = 6", {"src": torch.tensor([[3, 4, 5, 6, 7, 2]]),
                                          "tgt_in": torch.tensor([[1, 3, 4, 5, 6, 7]])})]
    learner, reference, ref_for = _module_check(
        "Transformer", ("logits",), lambda case: ((11, 13), TRANSFORMER_CFG),
        lambda m, case, x: m(case["src"], case["tgt_in"]), grads=(),
        # gradients as training computes them: no loss at PAD targets, so a learner's
        # nn.Embedding(padding_idx=pad_id), which freezes the PAD rows, is right too
        loss_mask=lambda case: (case["tgt_in"] != TRANSFORMER_CFG["pad_id"])[..., None])
    return _run("Transformer", cls, cases, learner, reference, ref_for)


def _no_method_answer(*args, **kwargs):
    raise RuntimeError("model.greedy_decode 调用的正是你要写的 greedy_decode：请用 model.encode、model.decode、"
                       "model.out_proj 逐步解码 / model.greedy_decode calls the very greedy_decode you are writing: "
                       "decode step by step with model.encode, model.decode and model.out_proj")


def _provided_transformer(src_vocab, tgt_vocab, seed=0, **cfg):
    """A reference Transformer, seeded and perturbed as ``_reference`` builds one, from the reference
    source run outside ``solutions``: the model a learner's decoding function may call while the guard
    watches. Its ``greedy_decode`` method cannot stand in for the answer: it says so."""
    namespace = _provided("Transformer", leave_out=("greedy_decode",))
    namespace["greedy_decode"] = _no_method_answer
    cls = namespace["Transformer"]
    torch.manual_seed(seed)
    return _perturb(cls(src_vocab, tgt_vocab, **cfg).double(), seed + 1).eval()


def _decode_call(fn, case):
    """``fn(model, src, bos_id, eos_id, max_new_tokens)`` on a case, as the checks' output dict."""
    return {"tokens": fn(case["model"], case["src"].clone(), case["bos_id"], case["eos_id"], case["max_new_tokens"])}


_EOS_SHIFT = {}  # the EOS bias shift found for the greedy case, computed once per process


def _greedy_case(model):
    """A case where the reference decodes rows that finish at different steps, before the limit.

    A random model rarely stops where a test needs it: the EOS logit bias of ``model`` is shifted
    step by step until the reference output shows early stopping and padding (computed, never
    hard-coded; remembered for the process)."""

    src = torch.tensor([[5, 3, 8, 4, 9, 2, 0], [7, 6, 2, 0, 0, 0, 0], [4, 4, 5, 6, 7, 8, 2]])
    case = Case("B=3, max_new_tokens=8, 各行在不同步结束 / rows finish at different steps",
                {"src": src}, {"model": model, "bos_id": 1, "eos_id": 2, "max_new_tokens": 8})
    base = model.out_proj.bias.detach().clone()
    shifts = [_EOS_SHIFT["shift"]] if "shift" in _EOS_SHIFT else sorted(torch.arange(-8.0, 8.0, 0.25).tolist(), key=abs)
    for shift in shifts:
        with torch.no_grad():
            model.out_proj.bias.copy_(base)
            model.out_proj.bias[2] += shift
        ys = solutions.greedy_decode(model, src, 1, 2, 8)
        first_eos = [(row == 2).nonzero()[:1] for row in ys]
        if ys.size(1) < 9 and all(len(f) for f in first_eos) and len({int(f) for f in first_eos}) > 1:
            _EOS_SHIFT["shift"] = shift
            return case
    raise RuntimeError("internal: no EOS bias gives early stopping")


def _greedy_cases(model):
    """The early-stopping case, and the same sources with the limit one step before the last row ends."""

    stops = _greedy_case(model)
    limit = solutions.greedy_decode(model, stops["src"], 1, 2, 8).size(1) - 2  # every row has ended after limit + 1
    limited = Case(f"同样的源序列，max_new_tokens={limit}：最后一行结束之前到达上限 / "
                   "the limit comes before the last row ends", {"src": stops["src"]},
                   {**stops.extra, "max_new_tokens": limit})
    return [stops, limited]


# untrained models whose greedy tokens change with position and with the source padding (seeds picked so;
# a model in the uniform-token regime would not tell a wrong position or mask from a right one):
# (seed, (d_model, num_heads, d_ff, num_layers), batch size, max_new_tokens)
_UNTRAINED = ((21, (8, 2, 16, 1), 2, 12), (24, (16, 4, 32, 2), 3, 10), (28, (12, 3, 24, 3), 2, 12))


def _untrained_case(seed, cfg, B, n, vocab=11):
    d_model, H, d_ff, N = cfg
    model = _provided_transformer(vocab, vocab, seed, d_model=d_model, num_heads=H, d_ff=d_ff, num_layers=N,
                                  dropout=0.1, max_len=32)
    src = torch.randint(3, vocab, (B, 6), generator=torch.Generator().manual_seed(seed))  # (B, T_s)
    src[-1, 3:] = model.pad_id
    return Case(f"未训练的模型 / an untrained model: d_model={d_model} H={H} N={N}, B={B}, max_new_tokens={n}",
                {"src": src}, {"model": model, "bos_id": 1, "eos_id": 2, "max_new_tokens": n})


# ---------------------------------------------------------------- cost: what a KV cache promises

@contextmanager
def _tokens_seen(modules):
    """``{name: [tokens of each call]}`` while the block runs: a forward pre-hook on each module of
    ``modules`` (name -> module) counts the tokens each call is given, in any layout: token ids
    (..., ) count one each, hidden states (..., d) one per vector."""
    seen = {name: [] for name in modules}

    def hook(name):
        def record(module, args):
            x = args[0]
            seen[name].append(x.numel() if not x.is_floating_point() else x.numel() // x.size(-1))
        return record

    handles = [m.register_forward_pre_hook(hook(name)) for name, m in modules.items()]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def _fed(counts, limit=8):
    shown = ", ".join(str(c) for c in counts[:limit]) + (", …" if len(counts) > limit else "")
    return f"{shown}（共 / total {sum(counts)}）"


def _cost_problems(name, cases):
    """(id, note) for each cost mistake measured on the learner's calls (``case.extra["seen"]``)."""
    problems = {}
    for case in cases:
        seen = (case.extra or {}).get("seen")
        if not seen:
            continue
        B = case["idx" if name == "generate" else "src"].size(0)
        seen = {k: [tokens // B for tokens in v] for k, v in seen.items()}  # tokens per row
        if name == "generate":
            fed, T0, n = seen["tok_embed"], case["idx"].size(1), case["max_new_tokens"]
            if fed and sum(fed) > T0 + n:
                honest = [T0] + [1] * (len(fed) - 1)
                problems.setdefault("kv_cache_recomputes", (
                    f"实测 / measured: 每次调用模型喂入的 token 数 / tokens fed per model call {_fed(fed)}，"
                    f"用缓存应是 / with the cache: {_fed(honest)}（用例 / case 「{case.label}」）"))
            continue
        fed = seen["self"]  # decoding starts from BOS alone: every step feeds one token
        if fed and sum(fed) > len(fed):
            problems.setdefault("kv_cache_recomputes", (
                f"实测 / measured: 每步送进解码器自注意力的 token 数 / tokens fed to the decoder's self-attention per "
                f"step {_fed(fed)}，用缓存应是 / with the cache: {_fed([1] * len(fed))}"
                f"（用例 / case 「{case.label}」）"))
        cross = max((len(v) for k, v in seen.items() if k.startswith("cross")), default=0)
        if cross > 1:
            problems.setdefault("cross_kv_recomputed", (
                f"实测 / measured: 每层的 cross_attn.W_k 调用了 {cross} 次 / each layer's cross_attn.W_k ran {cross} "
                f"times, 应为 1 次 / once（用例 / case 「{case.label}」）"))
    return sorted(problems.items(), key=lambda item: item[0] != "kv_cache_recomputes")


def _with_cost(result, name, cases):
    """``result`` with the cost mistakes measured on ``cases`` added (a right output that recomputes fails)."""
    problems = _cost_problems(name, cases)
    if not problems:
        return result
    lines = [result.message if not result.passed else
             f"{name}: 结果都对，但开销不符合契约 / every output is right, but the cost breaks the contract"]
    for mid, note in problems:
        lines += [f"  {mistakes.explain(mid)}", f"    {note}"]
    ids = tuple(dict.fromkeys(result.diagnoses + tuple(mid for mid, _ in problems)))
    return CheckResult(name, False, result.case or cases[0].label, "\n".join(lines), ids[0], ids)


def _measured(call, modules):
    """``call(fn, case)`` that records, in ``case.extra["seen"]``, the tokens ``modules(case)`` see."""
    def run(fn, case):
        watched = modules(case)
        if not watched:
            return call(fn, case)
        with _tokens_seen(watched) as seen:
            out = call(fn, case)
        case.extra["seen"] = seen
        return out
    return run


def _decoder_projections(case):
    model = case["model"]
    watched = {"self": model.decoder_layers[0].self_attn.W_k}
    watched.update({f"cross{i}": layer.cross_attn.W_k for i, layer in enumerate(model.decoder_layers)})
    return watched


@register("greedy_decode")
def check_greedy_decode(fn):
    cases = _greedy_cases(_provided_transformer(11, 13, **TRANSFORMER_CFG)) + [_untrained_case(*_UNTRAINED[0])]
    reference = lambda case: _cached(case, lambda: _decode_call(solutions.greedy_decode, case))  # noqa: E731
    return _run("greedy_decode", fn, cases, _decode_call, reference, lambda case: case["model"])


@register("greedy_decode_cached")
def check_greedy_decode_cached(fn):
    """Token for token the reference's plain greedy decoding: the early-stopping cases (rows that end at
    different steps) and untrained models of three sizes that decode to the limit."""

    cases = _greedy_cases(_provided_transformer(11, 13, **TRANSFORMER_CFG)) + [_untrained_case(*u) for u in _UNTRAINED]
    reference = lambda case: _cached(case, lambda: _decode_call(solutions.greedy_decode, case))  # noqa: E731
    learner = _measured(_decode_call, _decoder_projections)
    result = _run("greedy_decode_cached", fn, cases, learner, reference, lambda case: case["model"])
    return _with_cost(result, "greedy_decode_cached", cases)


@register("LearnedPositionalEmbedding")
def check_LearnedPositionalEmbedding(cls):
    g = torch.Generator().manual_seed(12)
    cases = [Case(f"d_model={d}, max_len={m}, x (B={b}, T={t})", {"x": _randn(g, b, t, d)},
                  {"d_model": d, "max_len": m})
             for d, m, b, t in ((16, 20, 2, 7), (5, 9, 1, 9))]
    learner, reference, ref_for = _module_check(
        "LearnedPositionalEmbedding", ("out",), lambda case: ((case["d_model"],), {"max_len": case["max_len"]}),
        lambda m, case, x: m(x["x"]), grads=("x",))
    return _run("LearnedPositionalEmbedding", cls, cases, learner, reference, ref_for)


@register("apply_rope")
def check_apply_rope(fn):
    g = torch.Generator().manual_seed(13)
    cases = [Case("x (2, 2, 5, 8)", {"x": _randn(g, 2, 2, 5, 8)}), Case("x (3, 4)", {"x": _randn(g, 3, 4)})]
    call = lambda f, case, x: f(x["x"])  # noqa: E731
    learner, reference = _function_check("apply_rope", ("out",), call, solutions.apply_rope, grads=("x",))
    return _run("apply_rope", fn, cases, learner, reference)


@register("copy_loss")
def check_copy_loss(fn):
    g = torch.Generator().manual_seed(14)
    cases = [Case("B=2 T=5 V=7, 有填充 / with padding",
                  {"logits": _randn(g, 2, 5, 7, scale=2.0),
                   "tgt_out": torch.tensor([[3, 4, 5, 2, 0], [6, 2, 0, 0, 0]])}, {"pad_id": 0}),
             Case("pad_id=6, B=1", {"logits": _randn(g, 1, 4, 7), "tgt_out": torch.tensor([[3, 2, 6, 6]])},
                  {"pad_id": 6})]
    call = lambda f, case, x: f(x["logits"], case["tgt_out"].clone(), case["pad_id"])  # noqa: E731
    learner, reference = _function_check("copy_loss", ("loss",), call, solutions.copy_loss, grads=("logits",))
    return _run("copy_loss", fn, cases, learner, reference)


@register("exact_match")
def check_exact_match(fn):
    tgt = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [6, 7, 8, 2], [4, 2, 0, 0]])
    cases = [Case("一行错 / one row wrong before EOS",
                  {"pred": torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [6, 7, 3, 2], [4, 2, 0, 0]]), "tgt_out": tgt}),
             Case("EOS 之后不同 / differences after EOS only",
                  {"pred": torch.tensor([[3, 4, 2, 9], [5, 2, 7, 7], [6, 7, 8, 2], [4, 2, 3, 3]]), "tgt_out": tgt}),
             Case("pred 更短 / pred shorter than the target",
                  {"pred": torch.tensor([[3, 4, 2], [5, 2, 0], [6, 7, 8], [4, 9, 0]]), "tgt_out": tgt})]
    for c in cases:
        c.extra = {"eos_id": 2, "pad_id": 0}
    call = lambda f, case, _: f(case["pred"].clone(), case["tgt_out"].clone(), 2, 0)  # noqa: E731
    learner, reference = _function_check("exact_match", ("score",), call, solutions.exact_match)
    return _run("exact_match", fn, cases, learner, reference, lambda case: solutions.exact_match)


def _copy_batch_properties(batch, B, V, min_len, max_len):
    """None when a batch follows the copy-task contract, else the first broken property."""

    PAD, BOS, EOS = 0, 1, 2
    if not isinstance(batch, (tuple, list)) or len(batch) != 3:
        return "应返回 (src, tgt_in, tgt_out) 三个张量 / must return three tensors (src, tgt_in, tgt_out)"
    for name, t in zip(("src", "tgt_in", "tgt_out"), batch):
        if type(t) is not torch.Tensor or t.dtype != torch.long:
            return f"{name}: 应为 LongTensor / must be a LongTensor, got {getattr(t, 'dtype', type(t).__name__)}"
        if tuple(t.shape) != (B, max_len + 1):
            return f"{name}: 形状不对 / wrong shape: expected {(B, max_len + 1)}, got {tuple(t.shape)}"
    src, tgt_in, tgt_out = batch
    if not torch.equal(src, tgt_out):
        return "tgt_out 应等于 src / tgt_out must equal src"
    for r in range(B):
        eos = (src[r] == EOS).nonzero().flatten()
        if len(eos) != 1:
            return f"src 第 {r} 行应恰好有一个 EOS / row {r} of src must hold exactly one EOS: {src[r].tolist()}"
        L = int(eos[0])
        x = src[r, :L]
        if not min_len <= L <= max_len:
            return f"第 {r} 行长度 {L} 不在 [{min_len}, {max_len}] / row {r} length {L} outside [{min_len}, {max_len}]"
        if len(x) and (x.min() < 3 or x.max() >= V):
            return f"内容 token 应在 [3, {V}) / content tokens must lie in [3, {V}): row {r} {src[r].tolist()}"
        if (src[r, L + 1:] != PAD).any():
            return f"src 第 {r} 行 EOS 之后应全为 PAD / after EOS, row {r} of src must be PAD: {src[r].tolist()}"
        expected_in = torch.cat([torch.tensor([BOS]), x, torch.full((max_len - L,), PAD)])
        if not torch.equal(tgt_in[r], expected_in):
            return (f"tgt_in 第 {r} 行应为 [BOS] + x + PAD / row {r} of tgt_in must be [BOS] + x + PAD: "
                    f"expected {expected_in.tolist()}, got {tgt_in[r].tolist()}")
    return None


@register("make_copy_batch")
def check_make_copy_batch(fn):
    if (problem := _refused("make_copy_batch", fn)) is not None:
        return problem
    cases = [("B=64, V=10, len 2..6", (64, 10, 2, 6)), ("B=1, V=4, len 3..3", (1, 4, 3, 3)),
             ("B=32, V=20, len 1..8", (32, 20, 1, 8))]
    for label, (B, V, lo, hi) in cases:
        try:
            with guard.from_scratch():
                first = fn(B, V, lo, hi, generator=torch.Generator().manual_seed(0))
                again = fn(B, V, lo, hi, generator=torch.Generator().manual_seed(0))
        except NotImplementedError:
            return CheckResult("make_copy_batch", False, label, f"make_copy_batch: {NOT_IMPLEMENTED}")
        except Exception as exc:
            return CheckResult("make_copy_batch", False, label, f"make_copy_batch: 用例 case 「{label}」: "
                               f"运行出错 / raised {type(exc).__name__}: {exc}{_learner_line(exc)}")
        problem = _copy_batch_properties(first, B, V, lo, hi)
        if problem is None and not all(torch.equal(a, b) for a, b in zip(first, again)):
            problem = "同一个 generator 种子应得到相同的批次 / the same generator seed must give the same batch"
        if problem is None and B > 8 and len({int((row == 2).nonzero()[0]) for row in first[0]}) < 2:
            problem = "长度应在 [min_len, max_len] 内随机变化 / lengths must vary within [min_len, max_len]"
        if problem is not None:
            return CheckResult("make_copy_batch", False, label, f"make_copy_batch: 用例 case 「{label}」: {problem}")
    return CheckResult("make_copy_batch", True, None,
                       f"make_copy_batch: {len(cases)} 个用例全部通过 / all {len(cases)} cases passed")


def _refused(name, obj):
    try:
        guard.refuse_reference(obj)
    except guard.FromScratchViolation as exc:
        return CheckResult(name, False, None, f"{name}: {exc}")
    return None


# ---------------------------------------------------------------- parts of the composites

def _decoder_forward(m, case, x):
    y, weights = m(x["y"], x["memory"], case.get("tgt_mask"), case.get("memory_mask"))
    if not isinstance(weights, (tuple, list)) or len(weights) != 2:
        raise _Fail("DecoderLayer.forward 应返回 (y, (self_attn_w, cross_attn_w)) / "
                    "must return (y, (self_attn_w, cross_attn_w))")
    return y, weights[0], weights[1]


def _pe_forward(m, case, x):
    pe = getattr(m, "pe", None)
    if pe is None:
        raise _Fail("缺少缓冲区 pe / the buffer pe is missing: self.register_buffer('pe', ...)")
    return pe, m(case["x"])


# check name -> (output names, forward(module, case, inputs) -> raw return), shared by the checks
# and by the probes that run a composite's parts alone
OUTPUTS = {"LayerNorm": ("out",), "ResidualLayerNorm": ("out",), "FeedForward": ("out",),
           "MultiHeadAttention": ("out", "attn"), "EncoderLayer": ("out", "attn"),
           "DecoderLayer": ("out", "self_attn", "cross_attn"), "PositionalEncoding": ("pe", "out")}
FORWARD = {
    "LayerNorm": lambda m, case, x: m(x["x"]),
    "ResidualLayerNorm": lambda m, case, x: m(x["x"], x["sublayer_out"]),
    "FeedForward": lambda m, case, x: m(x["x"]),
    "MultiHeadAttention": lambda m, case, x: m(x["x_q"], x.get("x_kv", x["x_q"]), case.get("mask")),
    "EncoderLayer": lambda m, case, x: m(x["x"], case.get("src_mask")),
    "DecoderLayer": _decoder_forward,
    "PositionalEncoding": _pe_forward,
}
_NORMS = [f"norm{k}" for k in (1, 2, 3)]
# composite check name -> its contract parts (attribute path, check name), given the reference module
PARTS = {
    "ResidualLayerNorm": lambda ref: [("ln", "LayerNorm")],
    "EncoderLayer": lambda ref: [("self_attn", "MultiHeadAttention"), ("ffn", "FeedForward")]
                                + [(n, "ResidualLayerNorm") for n in _NORMS[:2]],
    "DecoderLayer": lambda ref: [("self_attn", "MultiHeadAttention"), ("cross_attn", "MultiHeadAttention"),
                                 ("ffn", "FeedForward")] + [(n, "ResidualLayerNorm") for n in _NORMS],
    "Transformer": lambda ref: [("pos_enc", "PositionalEncoding")]
                               + [(f"encoder_layers.{i}", "EncoderLayer") for i in range(len(ref.encoder_layers))]
                               + [(f"decoder_layers.{i}", "DecoderLayer") for i in range(len(ref.decoder_layers))],
}
# parts that must not be one object in two places -> the mistake it is
SHARED = {"LayerNorm": "shared_norm", "ResidualLayerNorm": "shared_norm",
          "EncoderLayer": "layers_shared", "DecoderLayer": "layers_shared"}


def _probe_cases(kind, ref):
    """Inputs for running one part alone, sized from the reference part; the norms also get a
    small-variance input, where eps matters."""

    g = torch.Generator().manual_seed(20)
    if kind == "LayerNorm":
        d = ref.weight.numel()
        return [Case("x", {"x": _randn(g, 2, 3, d, scale=2.0) + 0.5}),
                Case("small", {"x": _randn(g, 2, 3, d, scale=1e-3)})]
    if kind == "ResidualLayerNorm":
        d = ref.ln.weight.numel()
        return [Case(label, {"x": _randn(g, 2, 3, d, scale=scale), "sublayer_out": _randn(g, 2, 3, d, scale=scale)})
                for label, scale in (("x", 1.0), ("small", 1e-3))]
    if kind == "FeedForward":
        activation = "gelu" if ref.activation is torch.nn.functional.gelu else "relu"
        return [Case("x", {"x": _randn(g, 2, 3, ref.fc1.in_features)}, {"activation": activation})]
    if kind == "PositionalEncoding":
        return [Case("x", {"x": _randn(g, 2, 5, ref.pe.size(-1))}, {"max_len": ref.pe.size(1)})]
    d = ref.W_q.in_features if kind == "MultiHeadAttention" else ref.norm1.ln.weight.numel()
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)  # (B, T) with padding
    pad, causal = keep[:, None, None, :], torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    if kind == "MultiHeadAttention":
        return [Case("self", {"x_q": _randn(g, 2, 5, d), "mask": pad & causal}),
                Case("cross", {"x_q": _randn(g, 2, 3, d), "x_kv": _randn(g, 2, 5, d), "mask": pad})]
    if kind == "EncoderLayer":
        return [Case("x", {"x": _randn(g, 2, 5, d), "src_mask": pad})]
    return [Case("y", {"y": _randn(g, 2, 5, d), "memory": _randn(g, 2, 5, d), "tgt_mask": pad & causal,
                       "memory_mask": pad})]




# ---------------------------------------------------------------- LLM components (docs/CONTRACT_LLM.md)

@register("repeat_kv")
def check_repeat_kv(fn):
    g = torch.Generator().manual_seed(30)
    cases = [Case(f"x {shape}, n_rep={n}", {"x": _randn(g, *shape)}, {"n_rep": n})
             for shape, n in (((2, 2, 3, 4), 2), ((1, 3, 2, 5), 3), ((1, 1, 4, 2), 4), ((2, 2, 3, 4), 1))]
    call = lambda f, case, x: f(x["x"], case["n_rep"])  # noqa: E731
    learner, reference = _function_check("repeat_kv", ("out",), call, solutions.repeat_kv, grads=("x",))
    return _run("repeat_kv", fn, cases, learner, reference)


def _gqa_forward(m, case, x):
    out, cache = m(x["x"], case.get("mask"), case.get("cache"))
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        raise _Fail("GroupedQueryAttention.forward 应返回 (out, (k, v)) / must return (out, (k, v))")
    return out, cache[0], cache[1]


@register("GroupedQueryAttention")
def check_GroupedQueryAttention(cls):
    g = torch.Generator().manual_seed(31)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], dtype=torch.bool)
    left = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)  # row 2's first query sees no key
    cases = []

    def add(label, d_model, H, G, B, T, rope=True, mask=None, T_past=0):
        inputs = {"x": _randn(g, B, T, d_model)}
        if mask is not None:
            inputs["mask"] = mask
        if T_past:
            d_k = d_model // H
            inputs["cache"] = (_randn(g, B, G, T_past, d_k, scale=2.0), _randn(g, B, G, T_past, d_k))
        cases.append(Case(label, inputs, {"cfg": (d_model, H, G), "rope": rope}))

    add("GQA H=4 G=2, 因果 & 填充 / causal & padding", 32, 4, 2, 2, 5, mask=keep[:, None, None, :] & causal)
    add("MQA H=4 G=1, 无掩码、无 RoPE / no mask, no RoPE, B=1", 16, 4, 1, 1, 4, rope=False)
    add("MHA H=2 G=2, 因果 / causal", 16, 2, 2, 2, 5, mask=torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None])
    add("KV 缓存 / KV cache: T_past=3, T=2 (T_q≠T_k), H=4 G=2", 32, 4, 2, 2, 2, T_past=3)
    add("B=1 H=1 G=1, KV 缓存 / KV cache T_past=4, T=1", 8, 1, 1, 1, 1, T_past=4)
    add("左填充，含整行被遮挡（契约：输出 0）/ left padding, a fully masked row (the contract: zeros), H=4 G=2",
        16, 4, 2, 2, 5, mask=left[:, None, None, :] & causal)
    learner, reference, ref_for = _module_check(
        "GroupedQueryAttention", ("out", "k_cache", "v_cache"), lambda case: (case["cfg"], {"rope": case["rope"]}),
        _gqa_forward, grads=("x",))
    return _run("GroupedQueryAttention", cls, cases, learner, reference, ref_for)


@register("SwiGLU")
def check_SwiGLU(cls):
    g = torch.Generator().manual_seed(32)
    cases = [Case("x (2, 5, 8), d_ff=12", {"x": _randn(g, 2, 5, 8)}, {"d_ff": 12}),
             Case("B=1, x (1, 3, 8), d_ff=16", {"x": _randn(g, 1, 3, 8, scale=2.0)}, {"d_ff": 16}),
             Case("2 维输入 / 2-D input x (4, 6), d_ff=10", {"x": _randn(g, 4, 6)}, {"d_ff": 10})]
    learner, reference, ref_for = _module_check(
        "SwiGLU", ("out",), lambda case: ((case["x"].size(-1), case["d_ff"]), {}),
        lambda m, case, x: m(x["x"]), grads=("x",))
    return _run("SwiGLU", cls, cases, learner, reference, ref_for)


@register("GPTBlock")
def check_GPTBlock(cls):
    g = torch.Generator().manual_seed(33)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :]
    cases = [Case("因果 & 填充 / causal & padding, B=2 T=5 d_model=16 H=4 G=2",
                  {"x": _randn(g, 2, 5, 16), "mask": causal & keep}, {"cfg": (16, 4, 2, 24)}),
             Case("因果 / causal, B=1 T=4 d_model=8 H=2 G=1", {"x": _randn(g, 1, 4, 8), "mask": causal[..., :4, :4]},
                  {"cfg": (8, 2, 1, 12)})]
    learner, reference, ref_for = _module_check(
        "GPTBlock", ("out",), lambda case: (case["cfg"], {}), lambda m, case, x: m(x["x"], case.get("mask"))[0],
        grads=("x",))
    return _run("GPTBlock", cls, cases, learner, reference, ref_for)


GPT_CFG = dict(d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=16)


@register("GPT")
def check_GPT(cls):
    cases = [Case("B=2 T=6, 不共享权重 / untied", {"idx": torch.tensor([[3, 4, 5, 6, 7, 8], [1, 9, 9, 2, 0, 10]])},
                  {"tie": False}),
             Case("B=1 T=4, tie_weights=True", {"idx": torch.tensor([[5, 2, 7, 1]])}, {"tie": True})]
    learner, reference, ref_for = _module_check(
        "GPT", ("logits",), lambda case: ((11,), {**GPT_CFG, "tie_weights": case["tie"]}),
        lambda m, case, x: m(case["idx"]), grads=())
    return _run("GPT", cls, cases, learner, reference, ref_for)


@functools.cache
def _reference_source(name):
    return inspect.getsource(getattr(solutions, name))


def _provided(name, leave_out=()):
    """The reference source of ``name`` and of every component it uses (``leave_out`` excepted), run
    outside ``solutions`` as a notebook's provided cell: a model the learner's function may call while
    the guard watches."""
    pool = [c.name for c in contract.COMPONENTS if c.kind != "constant" and c.name not in leave_out]
    namespace = {"math": math, "torch": torch, "nn": torch.nn, "F": F}
    for n in contract.with_dependencies([name], _reference_source, pool):
        exec(compile(_reference_source(n), f"<provided {n}>", "exec"), namespace)  # noqa: S102
    return namespace


def _moderate(module, seed):
    """Weights of moderate size, so that sampled and greedy tokens vary (the 0.02 init is nearly uniform)."""

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(1 + 0.3 * torch.randn(p.shape, generator=gen) if p.dim() == 1
                    else torch.randn(p.shape, generator=gen) / math.sqrt(p.size(-1)))
    return module.eval()


@register("generate")
def check_generate(fn):
    ns = _provided("GPT")
    torch.manual_seed(34)
    model = _moderate(ns["GPT"](13, d_model=16, num_heads=4, num_kv_heads=2, d_ff=24, num_layers=2, max_len=64), 35)
    prompt = torch.tensor([[3, 4, 5], [7, 1, 2]])
    cases = [Case(label, {"idx": prompt if B == 2 else prompt[:1]},
                  {"model": model, "max_new_tokens": n, "seed": 36 + i, "kwargs": kwargs})
             for i, (label, B, n, kwargs) in enumerate([
                 ("贪心、用缓存 / greedy with cache, B=2", 2, 6, dict(temperature=0.0)),
                 ("贪心、不用缓存 / greedy without cache, B=1", 1, 5, dict(temperature=0.0, use_cache=False)),
                 ("采样 top-k=5 top-p=0.9 T=0.8、用缓存 / sampling with cache", 2, 7,
                  dict(temperature=0.8, top_k=5, top_p=0.9)),
                 ("采样 T=1.5、不用缓存 / sampling without cache", 2, 5, dict(temperature=1.5, use_cache=False))])]

    def call(f, case):
        gen = torch.Generator().manual_seed(case["seed"])
        tokens = f(case["model"], case["idx"].clone(), case["max_new_tokens"], generator=gen, **case["kwargs"])
        return {"tokens": tokens}

    reference = lambda case: _cached(case, lambda: call(solutions.generate, case))  # noqa: E731
    watched = lambda case: {"tok_embed": case["model"].tok_embed} if case["kwargs"].get("use_cache", True) else {}  # noqa: E731
    result = _run("generate", fn, cases, _measured(call, watched), reference)
    return _with_cost(result, "generate", cases)


def _neg_inf_as_min(t):
    """-inf and the dtype's most negative finite number both block a token: compare them as one."""

    if type(t) is not torch.Tensor or not t.dtype.is_floating_point:
        return t
    return t.masked_fill(t == float("-inf"), torch.finfo(t.dtype).min)


@register("top_k_filter")
def check_top_k_filter(fn):
    g = torch.Generator().manual_seed(37)
    ties = torch.tensor([[3.0, 2.0, 2.0, 1.0, 0.5, 2.0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    cases = [Case("logits (3, 10), k=3", {"logits": _randn(g, 3, 10, scale=2.0)}, {"k": 3}),
             Case("第 k 个有并列 / ties at the k-th, k=2", {"logits": ties}, {"k": 2}),
             Case("k=1, 3 维 / 3-D (2, 2, 7)", {"logits": _randn(g, 2, 2, 7)}, {"k": 1}),
             Case("k >= V", {"logits": _randn(g, 2, 5)}, {"k": 5})]
    call = lambda f, case, x: _neg_inf_as_min(f(case["logits"].clone(), case["k"]))  # noqa: E731
    learner, reference = _function_check("top_k_filter", ("out",), call, solutions.top_k_filter)
    return _run("top_k_filter", fn, cases, learner, reference)


@register("top_p_filter")
def check_top_p_filter(fn):
    g = torch.Generator().manual_seed(38)
    exact = torch.tensor([[0.5, 0.25, 0.125, 0.125], [0.125, 0.125, 0.25, 0.5]]).log()  # exact binary fractions
    cases = [Case("随机 / random (4, 12), p=0.8", {"logits": _randn(g, 4, 12, scale=2.0)}, {"p": 0.8}),
             Case("越过 p 的 token / the token that crosses p, p=0.6", {"logits": exact}, {"p": 0.6}),
             Case("最大的 token 已超过 p / the top token alone exceeds p, p=0.3, B=1", {"logits": exact[:1]},
                  {"p": 0.3})]
    call = lambda f, case, x: _neg_inf_as_min(f(case["logits"].clone(), case["p"]))  # noqa: E731
    learner, reference = _function_check("top_p_filter", ("out",), call, solutions.top_p_filter)
    return _run("top_p_filter", fn, cases, learner, reference)


def _sampling_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = [Case(f"T={t}, top_k={k}, top_p={p}, logits {shape}", {"logits": _randn(g, *shape, scale=2.0)},
                  {"temperature": t, "top_k": k, "top_p": p, "seed": seed + i})
             for i, (t, k, p, shape) in enumerate([(0.7, None, None, (16, 8)), (1.3, 4, None, (16, 9)),
                                                   (0.9, 6, 0.8, (16, 10)), (0.5, None, 0.7, (1, 6))])]
    exact = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log().expand(8, 4)  # top-k first leaves 2/3, 1/3: top-p keeps 1
    cases.append(Case("先 top-k 再 top-p / top-k before top-p: top_k=2, top_p=0.6", {"logits": exact},
                      {"temperature": 1.0, "top_k": 2, "top_p": 0.6, "seed": seed + 4}))
    return cases


@register("sampling_probs")
def check_sampling_probs(fn):
    call = lambda f, case, x: f(case["logits"].clone(), case["temperature"], case["top_k"], case["top_p"])  # noqa: E731
    learner, reference = _function_check("sampling_probs", ("probs",), call, solutions.sampling_probs)
    return _run("sampling_probs", fn, _sampling_cases(39), learner, reference)


@register("sample_next_token")
def check_sample_next_token(fn):
    cases = _sampling_cases(40)
    cases.append(Case("温度 0 = 贪心 / temperature 0 = greedy", {"logits": cases[0]["logits"]},
                      {"temperature": 0.0, "top_k": None, "top_p": None, "seed": 0}))

    def call(f, case, x):
        return f(case["logits"].clone(), case["temperature"], case["top_k"], case["top_p"],
                 generator=torch.Generator().manual_seed(case["seed"]))

    learner, reference = _function_check("sample_next_token", ("tokens",), call, solutions.sample_next_token)
    return _run("sample_next_token", fn, cases, learner, reference)


@register("beam_search")
def check_beam_search(fn):
    g = torch.Generator().manual_seed(41)
    tables = [torch.log_softmax(1.5 * torch.randn(8, 5, 5, generator=g), -1) for _ in range(2)]
    short = torch.full((4, 3, 3), -20.0)  # a short output wins the raw sum, a longer one the normalised score
    short[0, 1] = torch.tensor([-1.0, -0.4, -20.0])
    short[1, 1] = torch.tensor([-0.8, -20.0, -20.0])
    markov = lambda table: (lambda ys: table[ys.size(1) - 1, ys[:, -1]])  # noqa: E731
    torch.manual_seed(42)
    gpt = _moderate(_provided("GPT")["GPT"](
        9, d_model=16, num_heads=2, num_kv_heads=1, d_ff=24, max_len=32), 43)
    gpt.requires_grad_(False)  # its log-probs carry no graph: float(score) in a learner's code stays silent
    gpt_step = lambda ys: torch.log_softmax(gpt(ys)[:, -1], -1)  # noqa: E731
    cases = [Case(label, {"prefix": prefix},
                  {"step_fn": step, "beam_size": k, "max_new_tokens": n, "eos_id": eos, "alpha": a})
             for label, prefix, step, k, n, eos, a in [
                 ("马尔可夫表 / Markov table, beam 3, alpha=0", torch.tensor([1, 2]), markov(tables[0]), 3, 6, 0, 0.0),
                 ("长度归一化 / length normalisation, alpha=1", torch.tensor([1]), markov(short), 2, 3, 0, 1.0),
                 ("马尔可夫表 / Markov table, beam 4, alpha=0.7", torch.tensor([3]), markov(tables[1]), 4, 7, 0, 0.7),
                 ("小 GPT / a small GPT, beam 3, alpha=0.6", torch.tensor([3, 4]), gpt_step, 3, 6, 0, 0.6)]]

    def call(f, case, x):
        return f(case["step_fn"], case["prefix"].clone(), case["beam_size"], case["max_new_tokens"], case["eos_id"],
                 alpha=case["alpha"])

    learner, reference = _function_check("beam_search", ("tokens", "score"), call, solutions.beam_search)
    return _run("beam_search", fn, cases, learner, reference)


@register("softmax_backward")
def check_softmax_backward(fn):
    g = torch.Generator().manual_seed(44)
    cases = []
    for shape, dim in (((3, 5), -1), ((2, 3, 4), 1), ((4, 3), 0), ((6,), 0)):
        y = torch.softmax(_randn(g, *shape, scale=2.0), dim)
        cases.append(Case(f"y {shape}, dim={dim}", {"y": y, "grad_y": _randn(g, *shape)}, {"dim": dim}))
    call = lambda f, case, x: f(case["y"].clone(), case["grad_y"].clone(), case["dim"])  # noqa: E731
    learner, reference = _function_check("softmax_backward", ("grad_x",), call, solutions.softmax_backward)
    return _run("softmax_backward", fn, cases, learner, reference)


@register("layer_norm_backward")
def check_layer_norm_backward(fn):
    g = torch.Generator().manual_seed(45)
    cases = [Case(f"x {shape}, eps={eps}",
                  {"x": _randn(g, *shape, scale=2.0) + 0.5, "weight": 1 + _randn(g, shape[-1], scale=0.3),
                   "grad_out": _randn(g, *shape)}, {"eps": eps})
             for shape, eps in (((2, 5, 8), 1e-5), ((4, 6), 1e-3), ((1, 3, 4), 1e-5))]
    call = lambda f, case, x: f(case["x"].clone(), case["weight"].clone(), case["grad_out"].clone(), case["eps"])  # noqa: E731
    learner, reference = _function_check("layer_norm_backward", ("grad_x", "grad_weight", "grad_bias"), call,
                                         solutions.layer_norm_backward)
    return _run("layer_norm_backward", fn, cases, learner, reference)


@register("cross_entropy")
def check_cross_entropy(fn):
    g = torch.Generator().manual_seed(46)
    cases = [Case("logits (2, 5, 7), 无平滑 / no smoothing, ignore_index=0",
                  {"logits": _randn(g, 2, 5, 7, scale=2.0), "target": torch.tensor([[3, 4, 5, 0, 0], [6, 2, 0, 0, 0]])},
                  {"ignore_index": 0, "label_smoothing": 0.0}),
             Case("标签平滑 / label smoothing 0.1, ignore_index=-100, (6, 5)",
                  {"logits": _randn(g, 6, 5, scale=2.0), "target": torch.tensor([0, 1, 2, 3, 4, -100])},
                  {"ignore_index": -100, "label_smoothing": 0.1}),
             Case("平滑 0.2 + 忽略 / smoothing 0.2 + ignore_index=3, B=1",
                  {"logits": _randn(g, 1, 6, 4, scale=3.0), "target": torch.tensor([[3, 1, 3, 0, 2, 3]])},
                  {"ignore_index": 3, "label_smoothing": 0.2}),
             Case("大 logits / large logits (~1000)",
                  {"logits": _randn(g, 3, 4) + 1000.0, "target": torch.tensor([0, 3, 1])},
                  {"ignore_index": -100, "label_smoothing": 0.0})]
    call = lambda f, case, x: f(x["logits"], case["target"].clone(), ignore_index=case["ignore_index"],  # noqa: E731
                                label_smoothing=case["label_smoothing"])
    learner, reference = _function_check("cross_entropy", ("loss",), call, solutions.cross_entropy, grads=("logits",))
    return _run("cross_entropy", fn, cases, learner, reference)


@register("make_sliding_window_mask")
def check_make_sliding_window_mask(fn):
    cases = [Case(f"T={T}, window={w}", {}, {"T": T, "window": w}) for T, w in ((6, 3), (5, 1), (7, 2), (4, 9))]
    call = lambda f, case, _: f(case["T"], case["window"])  # noqa: E731
    learner, reference = _function_check("make_sliding_window_mask", ("mask",), call,
                                         solutions.make_sliding_window_mask)
    return _run("make_sliding_window_mask", fn, cases, learner, reference)


@register("attention_flops_and_memory")
def check_attention_flops_and_memory(fn):
    keys = ("n", "d", "H", "num_kv_heads", "batch", "bytes_per_element")
    cases = [Case(", ".join(f"{k}={v}" for k, v in zip(keys, values)), {}, dict(zip(keys, values)))
             for values in ((128, 64, 4, None, 1, 4), (1024, 512, 8, 2, 2, 2), (4096, 4096, 32, 8, 1, 2),
                            (16, 32, 4, 1, 3, 8))]
    call = lambda f, case, _: f(*(case[k] for k in keys[:3]), num_kv_heads=case["num_kv_heads"], batch=case["batch"],  # noqa: E731
                                bytes_per_element=case["bytes_per_element"])
    learner, reference = _function_check("attention_flops_and_memory", ("flops", "attn_bytes"), call,
                                         solutions.attention_flops_and_memory)
    return _run("attention_flops_and_memory", fn, cases, learner, reference)


@register("kv_cache_bytes")
def check_kv_cache_bytes(fn):
    keys = ("num_layers", "num_kv_heads", "head_dim", "seq_len", "batch", "bytes_per_element")
    cases = [Case(", ".join(f"{k}={v}" for k, v in zip(keys, values)), {}, dict(zip(keys, values)))
             for values in ((32, 8, 128, 1, 1, 2), (32, 32, 128, 4096, 1, 2), (2, 1, 16, 10, 3, 4))]
    call = lambda f, case, _: f(*(case[k] for k in keys[:3]), seq_len=case["seq_len"], batch=case["batch"],  # noqa: E731
                                bytes_per_element=case["bytes_per_element"])
    learner, reference = _function_check("kv_cache_bytes", ("bytes",), call, solutions.kv_cache_bytes)
    return _run("kv_cache_bytes", fn, cases, learner, reference)




def run_check(name, obj):
    """Run the check ``name`` on the learner's object; never raises for a wrong answer."""
    if name not in CHECKS:
        raise KeyError(f"未知检查 / unknown check {name!r}; known: {', '.join(CHECKS)}")
    with _sandbox():
        return CHECKS[name](obj)


# Chapter 08's training pieces (warmup_cosine_lr, clip_grad_norm, AdamW) and chapter 11's BPE (issue 24)
# live in modules of their own, with their mistakes and variants (tutor.mistakes loads those); here their
# checks join the registry.
from . import tokenizer_checks, training_checks  # noqa: E402

training_checks.install()
tokenizer_checks.install()
