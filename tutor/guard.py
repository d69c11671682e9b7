""""From scratch" enforcement: what a learner's object may not call while it is being checked.

Two rules, applied by ``tutor.checks`` around every call into the learner's code (construction,
forward, backward):

1. The PyTorch built-ins an exercise replaces (``F.scaled_dot_product_attention``,
   ``nn.MultiheadAttention``, ``F.layer_norm``, ``nn.LayerNorm``, ``nn.Transformer*``,
   ``F.rms_norm``, ...) must not run. A ``sys.setprofile`` hook sees every Python ``call`` and
   every C ``c_call``, so renaming a built-in (``sdpa = F.scaled_dot_product_attention``
   before the check) does not hide it.
2. The reference package ``solutions`` must not be what is graded: an object that is, subclasses
   or wraps it is refused before it runs (``refuse_reference``), and any frame whose code lives in
   the ``solutions/`` directory while the learner's code runs is a violation.

``nn.Linear``, ``nn.Embedding``, ``F.softmax``, ``torch.softmax``, ``F.dropout`` and the
learner's (or the notebook's provided) earlier-chapter functions stay allowed.
"""
import functools
import importlib.util
import inspect
import os
import sys

FORBIDDEN_MESSAGE = ("从零实现：检查运行时调用了内置的 {what}，请用基本张量运算自己写 / "
                     "From scratch: your code called the built-in {what} while it was checked; "
                     "write it yourself with basic tensor operations")
REFERENCE_MESSAGE = ("被检查的对象来自参考实现 solutions（{what}），请提交你自己的实现 / "
                     "The object under check comes from the reference package solutions ({what}); "
                     "submit your own implementation")


class FromScratchViolation(AssertionError):
    """A forbidden built-in or the reference package ran inside the learner's code."""


def _solutions_dir():
    spec = importlib.util.find_spec("solutions")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0]) + os.sep


# The one table of the built-ins the exercises replace: dotted path -> the name a message shows.
# The run-time guard below resolves each path to the object; the submission audit
# (``grader.hardening``) resolves the learner's names (aliases included) to paths and looks them up.
FORBIDDEN_BUILTINS = {
    "torch.nn.functional.scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "torch._scaled_dot_product_attention_math": "torch._scaled_dot_product_attention_math",
    "torch.nn.functional.multi_head_attention_forward": "F.multi_head_attention_forward",
    "torch.nn.MultiheadAttention": "nn.MultiheadAttention",
    "torch.nn.functional.layer_norm": "F.layer_norm",
    "torch.layer_norm": "torch.layer_norm",
    "torch.native_layer_norm": "torch.native_layer_norm",
    "torch.nn.LayerNorm": "nn.LayerNorm",
    "torch.nn.functional.rms_norm": "F.rms_norm",
    "torch.rms_norm": "torch.rms_norm",
    "torch.nn.RMSNorm": "nn.RMSNorm",
    "torch.nn.Transformer": "nn.Transformer",
    "torch.nn.TransformerEncoder": "nn.TransformerEncoder",
    "torch.nn.TransformerDecoder": "nn.TransformerDecoder",
    "torch.nn.TransformerEncoderLayer": "nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoderLayer": "nn.TransformerDecoderLayer",
}
# Built-ins only some exercises replace (check name -> the same kind of table): a loss written from
# scratch may not call PyTorch's loss, a backward pass written by hand may not call autograd.
_AUTOGRAD = {"torch.autograd.grad": "torch.autograd.grad", "torch.autograd.backward": "torch.autograd.backward",
             "torch.Tensor.backward": "Tensor.backward", "torch.func.grad": "torch.func.grad",
             "torch.func.vjp": "torch.func.vjp"}
CHECK_FORBIDDEN = {
    "cross_entropy": {"torch.nn.functional.cross_entropy": "F.cross_entropy",
                      "torch.nn.functional.nll_loss": "F.nll_loss",
                      "torch.nn.CrossEntropyLoss": "nn.CrossEntropyLoss", "torch.nn.NLLLoss": "nn.NLLLoss"},
    "softmax_backward": _AUTOGRAD,
    "layer_norm_backward": _AUTOGRAD,
    "batch_norm_forward": {"torch.nn.functional.batch_norm": "F.batch_norm", "torch.batch_norm": "torch.batch_norm",
                           "torch.native_batch_norm": "torch.native_batch_norm",
                           "torch.nn.BatchNorm1d": "nn.BatchNorm1d"},
    "batch_norm_backward": _AUTOGRAD,
    "mlp_backward": _AUTOGRAD,
    # clip_grad_norm_ runs inside a wrapper that torch.nn.utils' other clipping helpers share: refusing it refuses them
    "clip_grad_norm": {"torch.nn.utils.clip_grad_norm_": "torch.nn.utils.clip_grad_norm_",
                       "torch.nn.utils.clip_grad_norm": "torch.nn.utils.clip_grad_norm"},
    "online_softmax": {"torch.softmax": "torch.softmax", "torch.nn.functional.softmax": "F.softmax",
                       "torch.Tensor.softmax": "Tensor.softmax", "torch.special.softmax": "torch.special.softmax",
                       "torch.logsumexp": "torch.logsumexp", "torch.Tensor.logsumexp": "Tensor.logsumexp"},
    "quantize_int8": {"torch.quantize_per_channel": "torch.quantize_per_channel",
                      "torch.quantize_per_tensor": "torch.quantize_per_tensor"},
    "AdamW": {"torch.optim.AdamW": "torch.optim.AdamW", "torch.optim.Adam": "torch.optim.Adam",
              "torch.optim.adamw.adamw": "torch.optim.adamw.adamw", "torch.optim.adam.adam": "torch.optim.adam.adam"},
}


def forbidden_for(names=()):
    """The forbidden table (dotted path -> shown name) while the exercises ``names`` are checked."""
    table = dict(FORBIDDEN_BUILTINS)
    for name in names:
        table.update(CHECK_FORBIDDEN.get(name, {}))
    return table


def _resolve(path):
    """The object at a dotted path (``torch.nn.functional.layer_norm``), or None where this torch lacks it."""
    import importlib

    parts = path.split(".")
    for split in range(len(parts), 0, -1):  # the longest importable module prefix
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


@functools.cache
def _forbidden(check=None):
    """(code objects of forbidden Python functions, builtins by id) -> readable names, for ``check``."""
    codes, builtins = {}, {}
    for path, name in forbidden_for([check]).items():
        obj = _resolve(path)
        if obj is None:
            continue
        if inspect.isclass(obj):
            for method in ("__init__", "forward"):
                fn = obj.__dict__.get(method)
                if fn is not None and hasattr(fn, "__code__"):
                    codes[fn.__code__] = name
        elif hasattr(obj, "__code__"):
            codes[obj.__code__] = name
        else:
            builtins[id(obj)] = (obj, name)  # keep a reference: the id must stay valid
    return codes, {k: v[1] for k, v in builtins.items()}, [v[0] for v in builtins.values()]


def refuse_reference(obj):
    """Raise ``FromScratchViolation`` when ``obj`` is, subclasses or wraps the ``solutions`` package."""
    seen = obj
    if isinstance(obj, functools.partial):
        seen = obj.func
    seen = inspect.unwrap(seen) if callable(seen) else seen
    candidates = list(inspect.getmro(seen)) if inspect.isclass(seen) else [seen, type(seen)]
    root = _solutions_dir()
    for cand in candidates:
        module = getattr(cand, "__module__", None) or ""
        if module == "solutions" or module.startswith("solutions."):
            raise FromScratchViolation(REFERENCE_MESSAGE.format(what=f"{module}.{getattr(cand, '__qualname__', cand)}"))
        code = cand.__code__ if inspect.isfunction(cand) else None
        if (root and code is not None and os.path.isabs(code.co_filename)
                and os.path.realpath(code.co_filename).startswith(root)):
            raise FromScratchViolation(REFERENCE_MESSAGE.format(what=code.co_filename))


class from_scratch:
    """Context manager: while active (on the calling thread), forbidden built-ins (those of every
    exercise, and those of ``check``: ``CHECK_FORBIDDEN``) and reference code are violations.

    The first violation is raised from inside the offending call and also recorded, so a learner's
    ``try/except`` cannot swallow it: leaving the block re-raises it.
    """

    def __init__(self, check=None):
        self.violation = None
        self._codes, self._builtins, _ = _forbidden(check)
        self._root = _solutions_dir()
        self._files = {}  # co_filename -> is it inside solutions/?

    def _in_reference(self, filename):
        hit = self._files.get(filename)
        if hit is None:
            # "<frozen abc>", "<string>": not files; realpath would resolve them against the cwd
            hit = (bool(self._root) and os.path.isabs(filename)
                   and os.path.realpath(filename).startswith(self._root))
            self._files[filename] = hit
        return hit

    def _profile(self, frame, event, arg):
        what = None
        if event == "call":
            code = frame.f_code
            what = self._codes.get(code)
            if what is None and self._in_reference(code.co_filename):
                self.violation = FromScratchViolation(REFERENCE_MESSAGE.format(
                    what=f"{os.path.basename(code.co_filename)}:{code.co_name}"))
                raise self.violation
        elif event == "c_call":
            what = self._builtins.get(id(arg))
        if what is not None:
            self.violation = FromScratchViolation(FORBIDDEN_MESSAGE.format(what=what))
            raise self.violation

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, exc_type, exc, tb):
        sys.setprofile(self._previous)
        if self.violation is not None and exc is not self.violation:
            raise self.violation
        return False
