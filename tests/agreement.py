"""The check and the visible tests of a graded cell, run on the same object (issue 36, item 2).

``visible_outcome(check, obj)`` runs the visible asserts of the graded cells that call
``check(<check>, <name>)`` (read from the source notebooks, the hidden part and the ``check`` calls
left out) in the chapter's namespace just before the exercise (``pipeline_helpers.namespace_before``:
setup, provided and reference code), with ``obj`` bound to ``<name>``. ``None`` when no graded cell
runs that check (a bonus).
"""
import ast
import functools
import inspect
import re

import torch

import contract
from pipeline_helpers import exercise_cells, graded_chapters, namespace_before, run_cell
from tutor.drills import LESSON as DRILL_LESSON

COMPONENTS = {c.name for c in contract.COMPONENTS}


def _globals_of(obj):
    """The namespace ``obj``'s code runs in (a function's, or a class's first own method's)."""
    members = vars(obj).values() if isinstance(obj, type) else [obj]
    for member in members:
        member = getattr(member, "__func__", member)
        if inspect.isfunction(member):
            return member.__globals__
    return {}

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)


def _visible(source):
    """(the visible statements of a graded cell as source, {check name: object name} it checks)."""
    tree = ast.parse(HIDDEN.sub("", source))
    body, checked = [], {}
    for node in tree.body:
        if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call)
                                             and getattr(i.context_expr.func, "id", "") == "test_cell"
                                             for i in node.items):
            for stmt in node.body:
                call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
                if call is not None and getattr(call.func, "id", "") == "check":
                    checked[call.args[0].value] = call.args[1].id
                else:
                    body.append(stmt)
        elif not (isinstance(node, ast.ImportFrom) and node.module == "tutor.grading"):
            body.append(node)
    return ast.unparse(ast.Module(body=body, type_ignores=[])), checked


@functools.cache
def visible_cells():
    """check name -> (chapter, exercise, object name, [visible sources of its graded cells]): the chapter that
    teaches it, whose cells have visible tests; the drill bank only for a check no other chapter grades (its
    drills, blank cells checked alone, may drill a later chapter's exercise, as chapter 13's)."""
    found = {}
    for chapter in sorted(graded_chapters(), key=lambda name: name == DRILL_LESSON):
        cells, exercises = exercise_cells(chapter)
        for exercise, (start, end) in exercises.items():
            for kind, source in cells[start + 1:end + 1]:
                if kind != "graded":
                    continue
                code, checked = _visible(source)
                for check, name in checked.items():
                    taught = contract.BY_NAME[check].chapter if check in contract.BY_NAME else None
                    entry = found.get(check)
                    if entry is None or (entry[0][:2] != taught and chapter[:2] == taught):
                        entry = found[check] = (chapter, exercise, name, [])  # the chapter that teaches it first
                    if entry[0] == chapter:
                        entry[3].append(code)
    return found


def visible_outcome(check, obj):
    """(passed, what failed) of the visible tests of ``check``'s graded cells on ``obj``; None: no cell.
    The cells from the exercise to its last graded cell run as the notebook runs them, each graded
    cell with its visible part only."""
    if check not in visible_cells():
        return None
    chapter, exercise, name, _ = visible_cells()[check]
    cells, exercises = exercise_cells(chapter)
    start, end = exercises[exercise]
    namespace = dict(namespace_before(chapter, exercise))
    run_cell(cells[start][1], namespace, f"<{chapter} {exercise}>")  # the exercise's other names: the reference
    # an entry built on its own module's classes (a catalogue.reference copy): a visible isinstance must see those
    home = _globals_of(obj)
    namespace.update({k: v for k, v in home.items() if k in namespace and isinstance(v, type) and k in COMPONENTS})
    namespace[name] = obj
    dtype = torch.get_default_dtype()
    try:
        torch.manual_seed(0)
        for i in range(start + 1, end + 1):
            kind, source = cells[i]
            run_cell(_visible(source)[0] if kind == "graded" else source, namespace, f"<{chapter} cell {i}>")
    except Exception as exc:  # an assert or a crash: the visible tests fail
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        torch.set_default_dtype(dtype)
    return True, ""


# Checks whose visible tests are weaker on purpose (COURSE_DESIGN §5: shapes and properties a learner can reason
# about; numbers are the hidden check's). A wrong entry may pass these visible tests; the learner still reads the
# check's ❌ first, since every graded cell runs ``check(...)`` before its visible asserts (tutor.grading.test_cell).
VISIBLE_WEAKER = {
    "AdamW": "three steps, two param groups and a LambdaLR against torch.optim.AdamW; tiny gradients (eps), "
             "a parameter without .grad and more steps show in the check",
    "GroupedQueryAttention": "shapes, the cache layout and MHA/MQA ends; not RoPE's pairing or a fully masked row",
    "LoRALinear": "no change at init, the trainable count and outputs equal through merge/unmerge; the scaling's value "
                  "and A's init show in the check",
    "PreLNResidual": "shapes and the residual; not which norm",
    "RMSNorm": "the shape and nn.RMSNorm with default weights; eps placement and a weight of 1 + w show in the check",
    "ResidualLayerNorm": "shapes and that the sublayer is used",
    "apply_rope": "norms kept and position 0 unchanged; not the pairing or the direction",
    "attention_flops_and_memory": "one hand-checkable size",
    "batch_norm_backward": "none: a drill's graded cell is its check's report alone",
    "batch_norm_forward": "none: a drill's graded cell is its check's report alone",
    "beam_search": "a greedy-equivalent table; length normalisation and finished beams show in the check",
    "clip_grad_norm": "one tensor clipped and returned norm; a generator and None grads show in the check",
    "dpo_loss": "log 2 with no preference and one margin at beta 1; where beta and the reference go shows in the check",
    "cross_entropy": "F.cross_entropy on one small case; smoothing and ignore_index combinations show in the check",
    "generate": "shapes and greedy = argmax; the cost and the generator show in the check",
    "layer_norm_backward": "shapes and autograd on one case; the eps and variance terms show in the check",
    "grpo_loss": "the gradient's sign in each group and the KL term alone; the std, the clip and the averaging show "
                 "in the check",
    "learn_bpe": "the Sennrich example's first merges; stopping and ties show in the check",
    "make_sliding_window_mask": "one window; off-by-one and causality show in the check",
    "mlp_backward": "none: a drill's graded cell is its check's report alone",
    "ppo_clip_loss": "ratio 1 and each clip bound on full masks; the mask and the averaging show in the check",
    "repeat_kv": "shapes and n_rep = 1; the head order shows in the check",
    "sample_next_token": "rows sum to 1 and greedy at temperature 0; the draw and ties show in the check",
    "sampling_probs": "rows sum to 1 and filtered tokens 0; the filter order shows in the check",
    "softmax_backward": "the last axis only; other axes show in the check",
    "tiled_attention": "the values against chapter 01's attention; whether a T_q x T_k matrix is built shows in the "
                       "check, which watches every operation",
}


def entries():
    """Every catalogue entry whose check has a graded cell: (label, check, object)."""
    import catalogue

    found = [("wrong", c, o) for c, o, _ in catalogue.cases("wrong")]
    found += [("right", c, o) for c, o in catalogue.cases("right")]
    for module in catalogue.realworld_modules():
        if hasattr(module, "HELD_OUT"):
            found += [("held out", c, o) for c, o, *_ in module.HELD_OUT]
        else:
            found += [("realworld", c, o) for c, o, *_ in module.CASES + getattr(module, "RIGHT", [])]
    return [(f"{kind}-{c}-{getattr(o, '__name__', o)}", c, o) for kind, c, o in found if c in visible_cells()]


def disagreement(check, obj, passed):
    """What is wrong when the check said ``passed`` on ``obj``, or None: a check that passes what the visible
    tests fail (✅ then ❌ in one cell), or visible tests that pass what the check fails where they are not
    listed as weaker on purpose."""
    visible, why = visible_outcome(check, obj)
    if passed and not visible:
        return f"the check passes, its visible tests fail ({why})"
    if not passed and visible and check not in VISIBLE_WEAKER:
        return "the check fails, its visible tests pass, and VISIBLE_WEAKER does not say why"
    return None
