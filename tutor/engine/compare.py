"""Comparing one output with the reference's, and describing inputs and errors in messages."""
import math
import re
import traceback

import numpy as np
import torch

from .messages import say
from .specs import Failure

ATOL, RTOL = 1e-6, 1e-5


def _shape(v):
    shape = getattr(v, "shape", None)
    return tuple(shape) if shape is not None else type(v).__name__


def describe(inputs):
    """'Q (2, 4, 8), mask (2, 1, 1, 4)': tensors by shape, plain values (``T=4``) as they are."""
    return ", ".join(f"{k} {_shape(v)}" if hasattr(v, "shape") else f"{k}={v!r}" for k, v in inputs.items()
                     if hasattr(v, "shape") or isinstance(v, (int, float, bool, str)))


def learner_line(exc):
    """' (line N: code)' of the innermost frame outside torch/numpy/tutor, for error messages."""
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


def number(v, digits=6):
    """A number as messages show it: -inf (or the dtype's most negative number, which blocks a token
    the same way) as -inf, never -1.79769e+308."""
    v = float(v)
    if math.isinf(v) or abs(v) >= np.finfo(np.float64).max:
        return "-inf" if v < 0 else "inf"
    return f"{v:.{digits}g}"


def numbers(expected, got):
    """The two numbers as messages show them, with as many digits as it takes to see them differ."""
    for digits in range(6, 18):
        e, g = number(expected, digits), number(got, digits)
        if e != g:
            return e, g
    return e, g


def compare(key, expected, got):
    """None when ``got`` matches ``expected``; otherwise a one-line bilingual reason."""
    if isinstance(expected, str):  # text (chapter 11's merges and tokens): exactly equal, both shown
        if got == expected:
            return None
        return say("text_differs", key=key, expected=repr(expected[:300]), got=repr(str(got)[:300]))
    if isinstance(expected, float):
        if not isinstance(got, (float, int)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            return say("must_be_float", key=key, got=type(got).__name__)
        g = float(got)
        if math.isnan(g) or abs(g - expected) > ATOL + RTOL * abs(expected):
            return say("expected_got", key=key, expected=number(expected), got=number(g))
        return None
    if isinstance(expected, torch.Tensor):
        if type(got) is not torch.Tensor:
            return say("must_be_tensor", key=key, got=type(got).__name__)
        if expected.dtype in (torch.bool, torch.long) and got.dtype != expected.dtype:
            return say("wrong_dtype", key=key, expected=expected.dtype, got=got.dtype)
        if expected.dtype.is_floating_point and not got.dtype.is_floating_point:
            return say("must_be_floating", key=key, got=got.dtype)
        if got.device.type == "meta":  # no values to compare; an answer on a GPU is compared on the CPU
            return say("wrong_device", key=key, expected=expected.device, got=got.device)
    elif isinstance(expected, np.ndarray) and not isinstance(got, (np.ndarray, np.generic)):
        return say("must_be_numpy", key=key, got=type(got).__name__)
    e, g = _to_numpy(expected), _to_numpy(got)
    if e.shape != g.shape:
        return say("wrong_shape", key=key, expected=tuple(e.shape), got=tuple(g.shape))
    if e.dtype == bool or g.dtype == bool or e.dtype.kind in "iu":
        bad = e != g
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return say("elements_differ", key=key, count=int(bad.sum()), idx=idx, expected=e[idx], got=g[idx])
        return None
    e, g = e.astype(np.float64), g.astype(np.float64)
    if e.size == 0:
        return None
    nan = np.isnan(g) & ~np.isnan(e)
    if nan.any():
        idx = tuple(int(i) for i in np.argwhere(nan)[0])
        return say("nan", key=key, idx=idx, expected=number(e[idx]))
    err = np.abs(np.nan_to_num(g - e, nan=0.0, posinf=np.inf, neginf=np.inf))
    if not np.allclose(g, e, atol=ATOL, rtol=RTOL, equal_nan=True):
        with np.errstate(invalid="ignore", over="ignore"):  # the element shown is one that breaks the tolerance
            beyond = np.where(np.isnan(g) & np.isnan(e), 0.0, err / (ATOL + RTOL * np.abs(np.nan_to_num(e))))
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(beyond), beyond.shape))
        error = "inf" if err[idx] >= np.finfo(np.float64).max / 2 else f"{err[idx]:.3g}"
        shown_e, shown_g = numbers(e[idx], g[idx])
        return say("max_error", key=key, error=error, idx=idx, expected=shown_e, got=shown_g)
    return None


def matches(expected, got):
    return all(k in got and compare(k, v, got[k]) is None for k, v in expected.items())


def unpack(ret, names, call):
    """The raw return of a call as ``{output name: value}``; a ``Failure`` when it has another arity."""
    if len(names) == 1:
        return {names[0]: ret}
    if not isinstance(ret, (tuple, list)) or len(ret) != len(names):
        got = type(ret).__name__ + (f" of length {len(ret)}" if isinstance(ret, (tuple, list)) else "")
        raise Failure(say("must_return", call=call, names=", ".join(names), got=got))
    return dict(zip(names, ret))
