"""Cost: what a KV cache promises. Forward pre-hooks on the provided model count the tokens each
call is fed; a check that declares a ``Cost`` fails a recomputation with what was measured, even
when every token is right."""
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from .messages import explain, say
from .specs import CheckResult


@dataclass(frozen=True)
class Cost:
    """``watched(case) -> {name: module}``: the modules whose calls are counted on the learner's run;
    ``problems(cases) -> [(mistake id, measured note)]``: what the counts (``case.extra["seen"]``) show."""
    watched: Callable
    problems: Callable


@contextmanager
def tokens_seen(modules):
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


def fed(counts, limit=8):
    """'3, 1, 1, …（共 / total 9）': the tokens of each call, at most ``limit`` shown."""
    shown = ", ".join(str(c) for c in counts[:limit]) + (", …" if len(counts) > limit else "")
    return say("total", shown=shown, total=sum(counts))


def per_row(case, batch):
    """The counts measured on ``case``, in tokens per row of a batch of ``batch`` rows; None if none."""
    seen = (case.extra or {}).get("seen")
    return {k: [tokens // batch for tokens in v] for k, v in seen.items()} if seen else None


def measured(call, watched):
    """``call(fn, case, ...)`` that records, in ``case.extra["seen"]``, the tokens ``watched(case)`` see."""
    def run(fn, case, *args):
        modules = watched(case)
        if not modules:
            return call(fn, case, *args)
        with tokens_seen(modules) as seen:
            out = call(fn, case, *args)
        case.extra["seen"] = seen
        return out
    return run


def with_cost(result, name, cases, problems):
    """``result`` with the cost ``problems`` added (a right output that recomputes fails)."""
    if not problems:
        return result
    lines = [result.message if not result.passed else say("cost_broken", name=name)]
    for mid, note in problems:
        lines += [f"  {explain(mid)}", f"    {note}"]
    ids = tuple(dict.fromkeys(result.diagnoses + tuple(mid for mid, _ in problems)))
    return CheckResult(name, False, result.case or cases[0].label, "\n".join(lines), ids[0], ids)
