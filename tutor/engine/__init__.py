"""The check engine, read top-down (each module uses only the ones above it):

    specs       what a check is: Case, CheckResult/Status, Bug, Variant, FunctionCheck, ModuleCheck
    messages    every learner-facing line (MESSAGES) and every mistake's explanation (MISTAKES)
    compare     one output against the reference's
    diagnosis   which known mistake (a check's variants) reproduces the learner's outcome
    localise    a composite's parts alone, shared or tied parts, its wiring
    report      the diagnosis lines of a message
    cost        tokens a KV cache must not feed again
    running     the sandbox, the learner's module with the reference's weights, the case loop

The checks themselves live in ``tutor.checks.<topic>``; nothing here names a component.
"""
