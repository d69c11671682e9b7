"""The comparison library: one check per contract component (COURSE_DESIGN §4, §5).

    from tutor.checks import CHECKS, run_check
    result = run_check("MultiHeadAttention", MultiHeadAttention)  # CheckResult(passed, case, message, diagnosis)
    result.assert_ok()                                            # AssertionError(message) on failure

Each topic module below (named like the ``solutions`` module it checks) declares its checks, their
cases, the known mistakes they can name and the wrong implementations that prove them; the engine
that runs them is ``tutor.engine`` (docs/ARCHITECTURE.md draws both).
"""
from ..engine import running
from ..engine.messages import say
from ..engine.specs import CHECKS, CheckResult, Status
from . import (
    attention,
    backward,
    copy_task,
    decoding,
    efficiency,
    ffn_norm,
    layers,
    llm,
    masks,
    mha,
    positional,
    posttrain,
    tokenizers,
    training,
    transformer,
)

TOPICS = (attention, mha, positional, ffn_norm, masks, layers, transformer, copy_task, llm, training, decoding,
          backward, tokenizers, posttrain, efficiency)
NOT_IMPLEMENTED = say("not_implemented")
MORE = say("more")

__all__ = ["CHECKS", "MORE", "NOT_IMPLEMENTED", "TOPICS", "CheckResult", "Status", "run_check"]


def run_check(name, obj):
    """Run the check ``name`` on the learner's object; never raises for a wrong answer."""
    if name not in CHECKS:
        raise KeyError(f"未知检查 / unknown check {name!r}; known: {', '.join(CHECKS)}")
    with running.sandbox():
        return CHECKS[name].run(obj)
