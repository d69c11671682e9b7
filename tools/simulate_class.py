"""Grade a simulated class with the documented nbgrader instructor commands and check every score.

A temporary course directory gets the repository's ``nbgrader_config.py`` and ``source/``
assignments; ``nbgrader generate_assignment`` fills its gradebook. Each student hands in one kind
of submission for every assignment — perfect, untouched, partial, hostile or broken — copied into
``submitted/<student>/<assignment>/``. Then ``nbgrader autograde``, ``generate_feedback`` and
``export`` run as an instructor would run them, and each grade cell's score (gradebook) and each
assignment's total (exported CSV) is compared with what that submission should get.

Expected scores are computed, never written down: a grade cell fails when the names it uses
depend (through the notebook's cells, by static analysis) on an exercise the submission broke,
when the kernel was lost before it, or when it belongs to an exercise whose code reaches the
grading machinery; its points come from the source notebook's metadata.

This is the one grading harness: tests/test_nbgrader_e2e.py (every chapter: perfect, untouched,
its classic mistake from ``MUTATIONS``), tests/test_class_simulation.py, tests/test_idiom_grading.py
and benchmarks/grade_class.py build their courses with it, and every test and benchmark runs the
nbgrader CLI through its ``nbgrader()``.

    .venv/bin/python -m tools.simulate_class                      # every assignment in source/
    .venv/bin/python -m tools.simulate_class 01_attention -s perfect -s torch_allclose
    .venv/bin/python -m tools.simulate_class --list               # the submission kinds
    .venv/bin/python -m tools.simulate_class --idioms             # every kind and every right-answer idiom
"""
import argparse
import ast
import contextlib
import copy
import csv
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import nbformat

from grader import feedback
from grader.audit import defined, read_names
from grader.execution import KERNEL_LOST
from tools.paths import ROOT

BIN = Path(sys.executable).parent  # nbgrader and alembic (nbgrader runs it) live next to python
STUBBORN_LOOP = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
MEMORY_BOMB = "keep = []\nwhile True:\n    keep.append(bytearray(10**8))  # 100 MB more each time"
STUB_LINE = re.compile(r"^(\s*)raise NotImplementedError\(.*\)\s*$", re.M)

# Code a hostile learner adds to the first exercise of an otherwise perfect answer, keyed by
# submission kind: (code, reach, patches). Each one, left unchecked, would turn a failing
# implementation into a pass (or hide the failure). ``reach`` is what the audit must void:
# "exercise" (the run-time integrity check can see and undo it, or it touches nothing later
# exercises use) or "later" (nothing can undo it: that exercise and every later one). ``patches``:
# it changes what the integrity check watches, so the first hidden check after it fails too.
TAMPERING = {
    "torch_allclose": ("torch.allclose = lambda *args, **kwargs: True", "exercise", True),
    "numpy_testing": ("import numpy.testing as npt\n"
                      "npt.assert_allclose = lambda *args, **kwargs: None\n"
                      "np.allclose = lambda *args, **kwargs: True", "exercise", True),
    "torch_testing_alias": ("t = torch\nt.testing.assert_close = lambda *args, **kwargs: None", "exercise", True),
    "builtins_assertionerror": ("import builtins\nbuiltins.AssertionError = KeyboardInterrupt", "exercise", True),
    "patch_grading_module": ("import tutor.grading\ntutor.grading.grade = lambda *args, **kwargs: None",
                             "exercise", False),  # tutor.grading refuses the write at run time
    "poison_sys_modules": ("import sys, types\nfake = types.ModuleType('tutor.grading')\n"
                           "fake.grade = lambda *args, **kwargs: None\nsys.modules['tutor.grading'] = fake",
                           "later", False),
    "exec_string": ("exec('import builtins; builtins.AssertionError = KeyboardInterrupt')", "exercise", True),
    "dunder_escape": ("(1).__class__.__base__.__subclasses__()", "later", False),
    "lying_tensor": ("class Liar(torch.Tensor):\n"
                     "    @classmethod\n"
                     "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                     "        return True", "exercise", False),
    "tensor_subclass": ("class Zero(torch.Tensor):\n"
                        "    def abs(self):\n"
                        "        return torch.zeros(())", "exercise", False),
    "frame_walk": ("def peek():\n"
                   "    yield me.gi_frame.f_back.f_back.f_locals\n"
                   "me = peek()", "later", False),
    "rewrite_grading_file": ("open('grading_notes.txt', 'w').write('def grade(*a): pass')", "later", False),
    "shell_magic": ("!echo 'def grade(*a): pass' > grading_notes.txt", "later", False),
}

# Right answers that call the built-in the exercise replaces: only the checks' from-scratch
# guard can tell them from the learner's own code.
BUILTIN_CHEATS = {
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    if mask is not None:
        mask = mask.bool()
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)  # (..., T_q, d_v)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = torch.nan_to_num(scores.softmax(dim=-1))  # (..., T_q, T_k)
    return torch.nan_to_num(out), attn
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x_q, x_kv, mask=None):
        B, T_q, _ = x_q.shape
        q = self.W_q(x_q).view(B, T_q, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_q, d_k)
        k = self.W_k(x_kv).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        v = self.W_v(x_kv).view(B, -1, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        _, attn = scaled_dot_product_attention(q, k, v, mask)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.bool())
        return self.W_o(out.transpose(1, 2).reshape(B, T_q, self.d_model)), attn  # (B, T_q, d_model)
''',
    "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)
''',
}


class Mutation(NamedTuple):
    """A classic mistake made by editing the reference answer of one exercise."""
    component: str  # the exercise's name (a def or class of a solution cell)
    mistake: str    # its diagnosis id in tutor.mistakes.MISTAKES: the feedback must name it
    edits: list     # [(text that stands once in the reference answer, replacement)]
    visible: bool = False  # the visible tests catch it too (not only the hidden checks)


# The classic mistake of each graded chapter, keyed by lesson name: the simulated
# ``classic_mistake`` student and tests/test_nbgrader_e2e.py hand it in. The grade cells it costs
# are computed (``expected_failures``), never listed here, and the feedback must name the mistake.
MUTATIONS = {
    # the scores not scaled: the module built on the function fails its check too
    "01_attention": Mutation("scaled_dot_product_attention", "no_scale", [
        ("scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)", "scores = Q @ K.transpose(-2, -1)")]),
    "02_multihead": Mutation("MultiHeadAttention", "merge_heads_no_transpose", [
        ("out = out.transpose(1, 2).contiguous().view(B, T_q, self.d_model)",
         "out = out.contiguous().view(B, T_q, self.d_model)")]),
    # the positional table added whole, not sliced to T
    "03_positional": Mutation("PositionalEncoding", "pe_not_sliced", [
        ("x = x + self.pe[:, : x.size(1)]", "x = x + self.pe")]),
    "04_ffn_layernorm": Mutation("ResidualLayerNorm", "missing_residual", [
        ("return self.ln(x + sublayer_out)", "return self.ln(sublayer_out)")]),
    # the padding mask not passed on: the visible padding test fails as well as the hidden check
    "05_layers": Mutation("EncoderLayer", "src_mask_missing", [
        ("self.self_attn(x, x, src_mask)", "self.self_attn(x, x)")], visible=True),
    # the embeddings not multiplied by sqrt(d_model): the forward check fails; greedy_decode, graded on its
    # own (a scripted model, a provided Transformer), does not
    "06_transformer": Mutation("Transformer", "embed_not_scaled", [
        ("self.src_embed(src) * math.sqrt(self.d_model)", "self.src_embed(src)"),
        ("self.tgt_embed(tgt_in) * math.sqrt(self.d_model)", "self.tgt_embed(tgt_in)")]),
    # the loss averaged over PAD positions too (training still updates the model)
    "07_copy_task": Mutation("copy_loss", "loss_includes_pad", [(", ignore_index=pad_id)", ")")]),
    # SiLU on the up branch instead of the gate: SwiGLU's check fails, and through it GPTBlock's and GPT's
    "08_gpt": Mutation("SwiGLU", "swiglu_gate_wrong_branch", [
        ("F.silu(self.gate_proj(x)) * self.up_proj(x)", "self.gate_proj(x) * F.silu(self.up_proj(x))")]),
    # the KV cache counted without its factor 2 (K only, no V)
    "09_decoding": Mutation("kv_cache_bytes", "kv_cache_only_k", [("return 2 * num_layers", "return num_layers")]),
    # the query rows masked too: costs that drill only, no other drill calls it
    "10_drills": Mutation("make_pad_mask", "pad_mask_queries", [
        ("return (tokens != pad_id)[:, None, None, :]",
         "return (tokens != pad_id)[:, None, None, :] & (tokens != pad_id)[:, None, :, None]")]),
    # pair counts not weighted by word frequency: other merges, so learn_bpe's cell fails (its check and its visible
    # test of Sennrich's first merges); the round trip, which learns merges too, still decodes what it encodes
    "11_tokenizers": Mutation("learn_bpe", "bpe_pairs_not_weighted", [
        ("pairs[pair] = pairs.get(pair, 0) + freq", "pairs[pair] = pairs.get(pair, 0) + 1")]),
    # the online softmax's running sum not rescaled when the max grows (the rising row of the visible tests)
    "13_efficiency": Mutation("online_softmax", "online_no_rescale", [
        ("s = s * torch.exp(m - m_new) + torch.exp(x_j - m_new)", "s = s + torch.exp(x_j - m_new)")], visible=True),
    # advantages normalised over the whole batch instead of each group: grpo_loss's cell fails (its check, and its
    # visible test of a group with equal rewards, which then gets gradients)
    "12_posttrain": Mutation("grpo_loss", "advantages_whole_batch", [
        ("groups = rewards.view(-1, group_size)", "groups = rewards.view(1, -1)")], visible=True),
}


@dataclass
class Notebook:
    """What the static analysis knows about one source notebook."""
    name: str
    source: nbformat.NotebookNode
    release: nbformat.NotebookNode
    points: dict = field(default_factory=dict)       # grade_id -> points
    grade_index: dict = field(default_factory=dict)  # grade_id -> cell index
    needs: dict = field(default_factory=dict)        # grade_id -> exercise names the cell depends on
    judged: dict = field(default_factory=dict)       # grade_id -> exercises its hidden checks' objects depend on
    exercises: list = field(default_factory=list)    # [(cell index, names defined)] in order


@dataclass
class Submission:
    """One student's hand-in for one assignment and the grade cells it must fail."""
    notebook: object          # NotebookNode, raw text (str) or None (nothing handed in)
    fails: set                # grade_ids expected to score 0
    extra_files: dict = field(default_factory=dict)  # file name -> NotebookNode
    diagnosis: str = ""       # text the feedback must show (a classic mistake's explanation)
    filename: str = ""        # the notebook's file name, when not <assignment>.ipynb (a renamed hand-in)


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def _bindings(stmt):
    """(names a top-level statement binds, names it reads)."""
    defined, used = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is stmt:
            defined.add(node.name)
        elif isinstance(node, ast.alias):
            defined.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):  # locals and arguments shadow globals
        used -= defined
        defined = {stmt.name}
    return defined, used


COMPOUND = (ast.With, ast.For, ast.While, ast.If, ast.Try)


def _loads(nodes):
    return set().union(*(read_names(node) for node in nodes))


def _flow(stmts, depends, solution, reached):
    """Tag names with the exercises their values come from, statement by statement in execution
    order; compound statements (with, for, while, if, try) are followed into their bodies, so a
    name re-bound inside a block does not inherit what its previous value depended on."""
    for stmt in stmts:
        if not isinstance(stmt, COMPOUND):
            defined, used = _bindings(stmt)
            needs = set().union(*(depends.get(n, set()) for n in used))
            if solution and isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                needs.add(stmt.name)
            for n in defined:
                depends[n] = needs
            reached |= needs
            continue
        header = [getattr(stmt, "test", None), getattr(stmt, "iter", None)]
        header += [item.context_expr for item in getattr(stmt, "items", [])]
        needs = set().union(*(depends.get(n, set()) for n in _loads([h for h in header if h is not None])))
        reached |= needs
        targets = [getattr(stmt, "target", None)] + [item.optional_vars for item in getattr(stmt, "items", [])]
        for target in (t for t in targets if t is not None):
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    depends[n.id] = needs
        blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
        blocks += [handler.body for handler in getattr(stmt, "handlers", [])]
        for _ in range(2 if isinstance(stmt, (ast.For, ast.While)) else 1):  # loop-carried values
            for block in blocks:
                _flow(block, depends, solution, reached)


def analyse(name, source_dir):
    """Read ``source/<name>/<name>.ipynb`` and the release made from it; work out dependencies.

    Statement by statement, every name is tagged with the exercises its current value was
    computed from (a function or class is tagged with what its body reads when defined).
    """
    source = nbformat.read(source_dir / name / f"{name}.ipynb", as_version=4)
    release = nbformat.read(source_dir.parent / "release" / name / f"{name}.ipynb", as_version=4)
    info = Notebook(name, source, release)
    depends = {}  # name -> exercise names its value depends on
    for index, cell in enumerate(source.cells):
        if cell.cell_type != "code":
            continue
        meta = _meta(cell)
        if meta.get("grade"):  # the hidden checks come first: ``grade("<check name>", <object>)``
            judged = [arg for node in ast.walk(ast.parse(cell.source)) if isinstance(node, ast.Call)
                      and isinstance(node.func, ast.Name) and node.func.id == "grade" for arg in node.args[1:]]
            info.judged[meta["grade_id"]] = set().union(*(depends.get(n, set()) for n in _loads(judged)))
        reached = set()
        _flow(ast.parse(cell.source).body, depends, bool(meta.get("solution")), reached)
        if meta.get("solution"):
            info.exercises.append((index, defined(cell.source)))  # what the audit takes for the exercise
        if meta.get("grade"):
            info.points[meta["grade_id"]] = float(meta["points"])
            info.grade_index[meta["grade_id"]] = index
            info.needs[meta["grade_id"]] = reached
    return info


def _solution_code(source_cell):
    """The reference answer as a learner would type it (solution markers dropped)."""
    from tools.build import strip_markers

    return strip_markers(source_cell.source)


def _perfect(info):
    nb = copy.deepcopy(info.release)
    for index, _ in info.exercises:
        nb.cells[index].source = _solution_code(info.source.cells[index])
    return nb


def _owner(info, index):
    """The solution cell of the exercise that cell ``index`` belongs to (as ``AuditSubmission`` sees it)."""
    starts = [i for i, _ in info.exercises]
    return max([i for i in starts if i <= index], default=starts[0])


def _failing(info, broken, after=None, voided=None, later=False):
    """grade_ids that fail when ``broken`` exercises are wrong; optionally every grade cell after
    cell ``after`` (the kernel lost there), and the grade cells of the exercise that holds cell
    ``voided`` (the audit flags code there) and, with ``later``, of every exercise after it."""
    fails = {g for g, needs in info.needs.items() if needs & set(broken)}
    if after is not None:
        fails |= {g for g, i in info.grade_index.items() if i > after}
    if voided is not None:
        start = _owner(info, voided)
        fails |= {g for g, i in info.grade_index.items()
                  if _owner(info, i) == start or (later and _owner(info, i) > start)}
    return fails


def _first_check_after(info, index):
    """The first grade cell after cell ``index`` that runs a hidden check (as a set, maybe empty)."""
    checked = sorted((i, g) for g, i in info.grade_index.items() if i > index and _checks_in(info, g))
    return {g for _, g in checked[:1]}


def _stub_with(cell_source, replacement):
    return STUB_LINE.sub(lambda m: m.group(1) + replacement.replace("\n", "\n" + m.group(1)), cell_source)


def catalogue_mistakes():
    """``[(check name, wrong object, mistake id, cell source)]`` from catalogue/wrong_*.py; entries whose code
    calls the reference (``R[...]``) are left out: a notebook has no ``R``."""
    import importlib

    found = []
    for path in sorted((ROOT / "catalogue").glob("wrong_*.py")):
        module = importlib.import_module(f"catalogue.{path.stem}")
        cells = [(check, obj, mid, _as_cell(path.read_text(), obj.__name__)) for check, obj, mid in module.CASES]
        found += [entry for entry in cells
                  if not any(isinstance(n, ast.Name) and n.id == "R" for n in ast.walk(ast.parse(entry[3])))]
    return found


def _as_cell(module_source, target):
    """The code of ``target`` from a catalogue module, as a notebook cell would hold it: the
    module's absolute imports, then every top-level definition ``target`` needs (transitively),
    in module order. What the module takes from ``load()`` (the reference, which the notebook
    provides under the same names) is left out."""
    body = ast.parse(module_source).body
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom)) and not getattr(s, "level", 0)]
    provided = set()
    for stmt in body:  # `R = load()`, `MultiHeadAttention = R["MultiHeadAttention"]`, ...
        defined, used = _bindings(stmt)
        if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and ("load" in used or used & provided):
            provided |= defined
    definitions = [(stmt, defined, used) for stmt, (defined, used) in ((s, _bindings(s)) for s in body)
                   if not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Expr)) and not defined & provided]
    needed, keep = {target}, set()
    while True:
        grown = {i for i, (_, defined, _) in enumerate(definitions) if defined & needed}
        if grown <= keep:
            break
        keep |= grown
        for i in grown:
            needed |= definitions[i][2]
    lines = module_source.splitlines()
    chunks = [lines[s.lineno - 1:s.end_lineno] for s in imports]
    chunks += [lines[min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]) - 1:s.end_lineno]
               for i, (s, _, _) in enumerate(definitions) if i in keep]
    return "\n\n".join("\n".join(chunk) for chunk in chunks)


def expected_failures(info, mutation):
    """grade_ids a classic mistake costs: the graded cells whose hidden check judges an object
    built from its exercise (through later exercises too) -- its visible tests pass, the shapes
    stay right -- or, when the visible tests catch it too, every graded cell that uses the exercise."""
    if mutation.visible:
        return _failing(info, [mutation.component])
    return {g for g, judged in info.judged.items() if mutation.component in judged}


def reference_answer(info, name):
    """(cell index, reference answer as a learner types it) of the exercise that defines ``name``."""
    index = next((i for i, names in info.exercises if name in names), None)
    if index is None:
        raise ValueError(f"no exercise of {info.name} defines {name}")
    return index, _solution_code(info.source.cells[index])


def _mutated(info, perfect):
    """The reference answer with the chapter's classic mistake (``MUTATIONS``) edited in; the
    feedback must name the mistake."""
    from tutor.mistakes import explain

    if not info.points:
        return Submission(perfect, set())  # an ungraded chapter: nothing to lose
    if info.name not in MUTATIONS:
        raise ValueError(f"add a MUTATIONS entry for {info.name}: Mutation(<exercise>, <diagnosis id in "
                         "tutor.mistakes.MISTAKES>, [(<text of its reference answer>, <wrong text>)]) in "
                         "tools/simulate_class.py: a classic mistake (visible=True if the visible tests catch it)")
    mutation = MUTATIONS[info.name]
    index, answer = reference_answer(info, mutation.component)
    for text, replacement in mutation.edits:
        if answer.count(text) != 1:
            raise ValueError(f"MUTATIONS[{info.name!r}]: {text!r} does not stand once in the reference answer")
        answer = answer.replace(text, replacement)
    nb = copy.deepcopy(perfect)
    nb.cells[index].source = answer
    return Submission(nb, expected_failures(info, mutation), diagnosis=explain(mutation.mistake))


def plantable(info, entry, unchecked=False):
    """The grade_ids that catalogue ``entry`` (``catalogue_mistakes()``) fails when planted in chapter
    ``info`` (the cells that run its check), or None where that is not certain: its check must name an
    exercise of this chapter, and every graded cell that uses that exercise must run that check alone.
    With ``unchecked``, cells that use it and run no check at all are allowed too (catalogue classes
    are not written to pass the visible tests: such a cell may pass or fail, and names no mistake)."""
    check = entry[0]
    cells = {g: _checks_in(info, g) for g, needs in info.needs.items() if check in needs}
    checked = {g for g, checks in cells.items() if checks == {check}}
    if not any(check in names for _, names in info.exercises) or not checked:
        return None
    allowed = {g for g, checks in cells.items() if checks == {check} or (unchecked and not checks)}
    return checked if allowed == set(cells) else None


def plant(info, perfect, entry):
    """``perfect`` with catalogue ``entry`` planted: the exercise's cell rebinds the name to the wrong
    version, as a learner's later definition would; the ``Submission`` fails the cells that run its
    check (``plantable``), and its feedback must name the entry's mistake."""
    from tutor.mistakes import explain

    check, obj, mid, module_source = entry
    index = next(i for i, names in info.exercises if check in names)
    nb = copy.deepcopy(perfect)
    nb.cells[index].source += f"\n\n{module_source}\n\n{check} = {obj.__name__}\n"
    return Submission(nb, plantable(info, entry, unchecked=True), diagnosis=explain(mid) if mid else "")


def _catalogue_mistake(info, perfect):
    """The last catalogue mistake (catalogue/wrong_*.py) ``plantable`` in this chapter, planted."""
    for entry in reversed(catalogue_mistakes()):
        if plantable(info, entry):
            return plant(info, perfect, entry)
    return Submission(perfect, set())  # no such catalogue mistake for this chapter


def _tamper_one_exercise(info, perfect):
    """The perfect answer with ``torch.allclose`` replaced in the second exercise (the first where
    there is one): the audit voids that exercise's graded cells, the run-time integrity check fails
    the first hidden check after the line and puts ``torch.allclose`` back, and every other
    exercise keeps its points."""
    index, _ = info.exercises[min(1, len(info.exercises) - 1)]
    nb = copy.deepcopy(perfect)
    # torch imported first: chapter 11 is pure Python, where the line alone is a NameError and no tampering
    nb.cells[index].source += "\n\nimport torch\n" + TAMPERING["torch_allclose"][0]
    return Submission(nb, _failing(info, [], voided=index) | _first_check_after(info, index))


def idioms_by_exercise():
    """{(chapter, exercise name): [Idiom, ...]} from catalogue/idioms/ (right answers
    written the ways people really write Python)."""
    from catalogue.idioms import IDIOMS

    found = {}
    for idiom in IDIOMS:
        found.setdefault((idiom.chapter, idiom.exercise), []).append(idiom)
    return found


def idiom_kinds():
    """``idioms_0`` … ``idioms_{n-1}``: student k hands in the k-th idiom of every exercise that has one."""
    return [f"idioms_{k}" for k in range(max(map(len, idioms_by_exercise().values()), default=0))]


def _idioms(info, perfect, k):
    """The perfect answer with the k-th idiom of each exercise in place of the reference code (its
    extra cells inserted after the exercise cell, as a learner inserts cells): full marks. None when
    no exercise of this chapter has a k-th idiom (nothing to hand in)."""
    table = idioms_by_exercise()
    chosen = [(index, table[(info.name, names[0])][k]) for index, names in info.exercises
              if k < len(table.get((info.name, names[0]), []))]
    if not chosen:
        return None
    nb = copy.deepcopy(perfect)
    for index, idiom in reversed(chosen):  # from the end, so earlier indices stay valid
        first, *extra = idiom.cells
        nb.cells[index].source = first
        nb.cells[index + 1:index + 1] = [nbformat.v4.new_code_cell(code) for code in extra]
    return Submission(nb, set())


def _checks_in(info, grade_id):
    """Check names a grade cell's hidden test calls (``grade("<name>", ...)``)."""
    source = info.source.cells[info.grade_index[grade_id]].source
    return set(re.findall(r"grade\(['\"](\w+)['\"]", source))


def make_submission(kind, info):
    """Build submission ``kind`` for one assignment (see ``KINDS``)."""
    if kind not in KINDS and not kind.startswith("idioms_"):
        raise ValueError(f"unknown submission kind {kind!r}; see --list")
    if kind == "missing_notebook":
        return Submission(None, set(info.points))
    if kind == "invalid_json":
        return Submission(nbformat.writes(info.release)[:-200], set(info.points))
    if not info.exercises:
        return Submission(copy.deepcopy(info.release), set())  # nothing to write: handed in as released
    perfect = _perfect(info)
    first, first_names = info.exercises[0]
    last, _ = info.exercises[-1]
    every = [n for _, names in info.exercises for n in names]
    if kind == "perfect":
        return Submission(perfect, set())
    if kind == "untouched":
        return Submission(copy.deepcopy(info.release), _failing(info, every))
    if kind == "partial":
        done = len(info.exercises) // 2
        nb = copy.deepcopy(info.release)
        for index, _ in info.exercises[:done]:
            nb.cells[index].source = _solution_code(info.source.cells[index])
        return Submission(nb, _failing(info, [n for _, names in info.exercises[done:] for n in names]))
    if kind == "infinite_loop":
        nb = copy.deepcopy(perfect)
        nb.cells[first].source = _stub_with(info.release.cells[first].source, "while True:\n    pass")
        return Submission(nb, _failing(info, first_names))
    if kind == "stubborn_loop":  # swallows the interrupt that ends an ordinary timeout
        nb = copy.deepcopy(perfect)
        nb.cells[last].source = _stub_with(info.release.cells[last].source, STUBBORN_LOOP)
        return Submission(nb, _failing(info, [], after=last - 1))
    if kind == "memory_bomb":  # fills the memory in a loop: the kernel's cap stops it, in its own exercise
        nb = copy.deepcopy(perfect)
        nb.cells[first].source = _stub_with(info.release.cells[first].source, MEMORY_BOMB)
        return Submission(nb, _failing(info, first_names))
    if kind == "renamed_notebook":  # a browser's second download
        return Submission(perfect, set(), filename=f"{info.name} (1).ipynb")
    if kind == "misnamed_notebook":  # nothing tells which assignment it is: refused, 0 points
        return Submission(perfect, set(info.points), filename="homework.ipynb")
    if kind == "selfstudy_copy":  # the notebooks/ edition (what `make lab` opens), answers written in
        nb = nbformat.read(ROOT / "notebooks" / f"{info.name}.ipynb", as_version=4)
        answers = {info.source.cells[i].id: _solution_code(info.source.cells[i]) for i, _ in info.exercises}
        for cell in nb.cells:
            cell.source = answers.get(cell.get("id"), cell.source)
        return Submission(nb, set())
    if kind == "kernel_dies":
        nb = copy.deepcopy(perfect)
        nb.cells[last].source += "\n\n__import__('os')._exit(1)"
        return Submission(nb, _failing(info, [], after=last - 1))
    if kind == "huge_print":
        nb = copy.deepcopy(perfect)
        nb.cells[first].source += "\n\nfor i in range(100_000):\n    print(i, 'spam ' * 10)"
        return Submission(nb, set())
    if kind in ("deleted_test_cells", "edited_test_cells", "stripped_test_metadata"):
        nb = copy.deepcopy(info.release)
        fails = _failing(info, every)
        for index in sorted((info.grade_index[g] for g in fails), reverse=True):
            if kind == "deleted_test_cells":
                del nb.cells[index]
            elif kind == "edited_test_cells":
                nb.cells[index].source = "pass  # tests removed"
            else:
                del nb.cells[index].metadata["nbgrader"]
                nb.cells[index].source = "pass"
        return Submission(nb, fails)
    if kind == "edited_readonly_cell":
        nb = copy.deepcopy(info.release)
        setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells[setup].source += "\n" + TAMPERING["patch_grading_module"][0]
        return Submission(nb, _failing(info, every))
    if kind == "rebind_grade_name":
        nb = copy.deepcopy(info.release)
        nb.cells[first].source += "\n\ngrade = lambda *args, **kwargs: None"
        return Submission(nb, _failing(info, every))
    if kind in TAMPERING:
        code, reach, patches = TAMPERING[kind]
        nb = copy.deepcopy(perfect)
        nb.cells[first].source += "\n\n" + code
        fails = _failing(info, [], voided=first, later=reach == "later")
        return Submission(nb, fails | (_first_check_after(info, first) if patches else set()))
    if kind == "tamper_one_exercise":
        return _tamper_one_exercise(info, perfect)
    if kind == "import_reference":  # later checks whose object calls the reference fail the run-time guard
        nb = copy.deepcopy(perfect)
        nb.cells[first].source = f"from solutions import {', '.join(first_names)}"
        checked = {g for g, judged in info.judged.items() if judged & set(first_names)}
        return Submission(nb, _failing(info, [], voided=first) | checked)
    if kind.startswith("idioms_"):
        return _idioms(info, perfect, int(kind.removeprefix("idioms_")))
    if kind == "forbidden_builtin":
        nb = copy.deepcopy(perfect)
        broken, voided = [], set()
        for index, names in info.exercises:
            cheats = [n for n in names if n in BUILTIN_CHEATS]
            if cheats:  # a later definition in the same cell replaces the learner's one
                nb.cells[index].source += "\n\n" + "\n\n".join(BUILTIN_CHEATS[n].strip() for n in cheats)
                broken += cheats
                voided |= _failing(info, [], voided=index)
        return Submission(nb, _failing(info, broken) | voided)
    if kind == "classic_mistake":
        return _mutated(info, perfect)
    if kind == "catalogue_mistake":
        return _catalogue_mistake(info, perfect)
    if kind == "extra_notebook":
        return Submission(perfect, set(), extra_files={"scratch.ipynb": copy.deepcopy(perfect)})
    if kind == "other_kernel_name":
        nb = copy.deepcopy(perfect)
        nb.metadata["kernelspec"] = {"name": "my-conda-env", "display_name": "Mine", "language": "python"}
        return Submission(nb, set())
    raise ValueError(f"unknown submission kind {kind!r}; see --list")


KINDS = ["perfect", "untouched", "partial", "classic_mistake", "catalogue_mistake", "infinite_loop", "stubborn_loop",
         "memory_bomb", "renamed_notebook", "misnamed_notebook", "selfstudy_copy",
         "kernel_dies", "huge_print", "deleted_test_cells", "edited_test_cells", "stripped_test_metadata",
         "edited_readonly_cell", "rebind_grade_name", *TAMPERING, "tamper_one_exercise", "import_reference",
         "forbidden_builtin", "missing_notebook", "extra_notebook", "other_kernel_name", "invalid_json"]


def nbgrader(course, *args, check=True):
    """Run one command of this environment's nbgrader in ``course`` (the one way every script and
    test runs it); return the CompletedProcess (``stdout``, ``stderr``, ``returncode``)."""
    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}  # set only in its kernels
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # nbgrader runs `alembic` for a new gradebook
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc


@contextlib.contextmanager
def private_postgres():
    """A PostgreSQL server of its own (tools/postgres.sh) in a short, world-readable folder;
    NBGRADER_DB_URL points nbgrader_config.py at it while the block runs; yields that URL."""
    folder = tempfile.mkdtemp(prefix="pg", dir="/tmp")
    os.chmod(folder, 0o755)  # as root the server runs as `postgres`, which must reach it
    env = dict(os.environ, POSTGRES_DIR=folder)
    script = str(ROOT / "tools" / "postgres.sh")
    subprocess.run([script, "start"], env=env, check=True)
    os.environ["NBGRADER_DB_URL"] = subprocess.run([script, "url"], env=env, check=True, capture_output=True,
                                                   text=True).stdout.strip()
    try:
        yield os.environ["NBGRADER_DB_URL"]
    finally:
        del os.environ["NBGRADER_DB_URL"]
        subprocess.run([script, "stop"], env=env)
        shutil.rmtree(folder, ignore_errors=True)


def setup_course(course, assignments, source_dir, timeout=None, config=()):
    """Course dir with the repository's config (plus an optional shorter cell timeout and ``config``, more
    lines of nbgrader config) and ``assignments`` recorded in its gradebook by one ``generate_assignment``."""
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    lines = [f"c.Execute.timeout = {timeout}  # a hanging cell costs less"] if timeout is not None else []
    lines += config
    if lines:
        with open(course / "nbgrader_config.py", "a") as f:
            f.write("\n# this simulated course only\n" + "".join(f"{line}\n" for line in lines))
    for name in assignments:  # source/ or the English class's en/source/ (COURSE_LANG=en), as in the repository
        shutil.copytree(source_dir / name, course / source_dir.relative_to(ROOT) / name)
    nbgrader(course, "generate_assignment", "*", "--force")


def hand_in(course, student, assignment, submission):
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2025-01-01 12:00:00 UTC")
    if submission.notebook is None:
        return
    path = folder / (submission.filename or f"{assignment}.ipynb")
    if isinstance(submission.notebook, str):
        path.write_text(submission.notebook)
    else:
        nbformat.write(submission.notebook, path)
    for name, nb in submission.extra_files.items():
        nbformat.write(nb, folder / name)


class Grade(NamedTuple):
    """One grade cell of one submission, as the gradebook holds it."""
    score: float
    max_score: float
    manual: bool  # flagged for manual grading


def read_gradebook(course, db_url=None, course_id="shousi-transformer"):
    """{(student, assignment): {grade_id: Grade}} of ``course``'s SQLite gradebook, or of ``db_url``."""
    from nbgrader.api import Gradebook, MissingEntry
    out = {}
    with Gradebook(db_url or f"sqlite:///{course / 'gradebook.db'}", course_id=course_id) as gb:
        for assignment in gb.assignments:
            for student in gb.students:
                try:
                    sub = gb.find_submission(assignment.name, student.id)
                except MissingEntry:
                    continue
                for nb in sub.notebooks:
                    out[(student.id, assignment.name)] = {
                        g.name: Grade(g.auto_score, g.max_score, g.needs_manual_grade) for g in nb.grades}
    return out


def read_export(course):
    """{(student, assignment): raw_score} from ``nbgrader export``'s grades.csv."""
    with open(course / "grades.csv") as f:
        return {(row["student_id"], row["assignment"]): float(row["raw_score"]) for row in csv.DictReader(f)}


def feedback_problems(course, student, assignment):
    """What is wrong with a submission's feedback page (``grader.feedback.SealedFeedback``): a failed
    grade cell without its ❌ verdict, or a line its grading kernel produced (an error's text, a
    print) that reached the page."""
    autograded = course / "autograded" / student / assignment / f"{assignment}.ipynb"
    page_file = course / "feedback" / student / assignment / f"{assignment}.html"
    if not autograded.exists():
        return []
    if not page_file.exists():
        return ["graded, but no feedback page was generated"]
    page = html.unescape(re.sub(r"<[^>]+>", "", page_file.read_text()))
    failed, produced = 0, set()
    for cell in nbformat.read(autograded, as_version=4).cells:
        outputs = cell.get("outputs", []) if _meta(cell).get("grade") else []
        failed += any(o.output_type == "error" for o in outputs)
        for out in outputs:
            if out.output_type == "error" and out.ename not in ("IntegrityError", "FromScratchViolation"):
                produced.add(out.evalue.splitlines()[0] if out.evalue else "")
            elif out.output_type == "stream":
                produced.update(line for line in out.text.splitlines() if len(line) > 20)
    problems = [f"{failed} failed grade cells, {page.count('❌')} ❌ verdicts in the feedback"] \
        if page.count("❌") < failed else []
    known = {line for kind in feedback.KINDS for line in feedback.verdict_lines(feedback.Verdict(kind))} | {KERNEL_LOST}
    return problems + [f"the kernel's line {line[:80]!r} reached the feedback"
                       for line in sorted(produced - known) if line and line in page]


def _feedback_shows(course, student, assignment, text):
    pages = list((course / "feedback" / student / assignment).glob("*.html"))
    return any(html.escape(text, quote=False) in p.read_text() for p in pages)


def simulate(assignments, kinds, source_dir=ROOT / "source", workdir=None, timeout=30, log=print):
    """Grade ``kinds`` x ``assignments`` end to end; return (mismatches, timings, course dir)."""
    course = Path(workdir or tempfile.mkdtemp(prefix="class_sim_"))
    course.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    setup_course(course, assignments, source_dir, timeout)
    infos = {a: analyse(a, source_dir) for a in assignments}
    expected, diagnoses, cell_counts = {}, {}, {}
    roster = course / "roster.csv"  # one `nbgrader db student import` for the whole class
    roster.write_text("id,first_name,last_name\n" + "".join(f"{s},sim,{s}\n" for s in kinds))
    nbgrader(course, "db", "student", "import", str(roster))
    for student in kinds:
        for a in assignments:
            sub = make_submission(student, infos[a])
            if sub is None:  # this kind has nothing to hand in for this assignment
                continue
            hand_in(course, student, a, sub)
            if isinstance(sub.notebook, nbformat.NotebookNode):  # its cells, and the grade cells nbgrader restores
                handed_in = {_meta(c).get("grade_id") for c in sub.notebook.cells}
                cell_counts[(student, a)] = len(sub.notebook.cells) + len(set(infos[a].points) - handed_in)
            expected[(student, a)] = {g: (0.0 if g in sub.fails else p) for g, p in infos[a].points.items()}
            diagnoses[(student, a)] = sub.diagnosis
    timings = {"setup_s": time.perf_counter() - started}
    mismatches = []
    t0 = time.perf_counter()  # nbgrader starts once per command, whatever the number of assignments
    proc = nbgrader(course, "autograde", "*", check=False)
    timings["autograde_s"] = time.perf_counter() - t0
    output = proc.stdout + proc.stderr
    failed = set(re.findall(r"error processing assignment '[^']*' for student '([^']*)'", output))
    if failed - ({"invalid_json"} & set(kinds)) or (proc.returncode != 0) != bool(failed):
        mismatches.append(f"autograde rc={proc.returncode}, failed for {sorted(failed)}:\n{output[-3000:]}")
    proc = nbgrader(course, "generate_feedback", "*", check=False)
    if proc.returncode != 0:
        mismatches.append(f"generate_feedback rc={proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    nbgrader(course, "export")
    timings["total_s"] = time.perf_counter() - started
    book, exported = read_gradebook(course), read_export(course)
    for (student, a), cells in sorted(expected.items()):
        got = book.get((student, a), {})
        for grade_id, points in cells.items():
            score, _, manual = got.get(grade_id, (None, None, None))
            if student == "invalid_json":  # nbgrader cannot read it: no score, flagged for manual grading
                score = 0.0 if score is None and manual else score
            if student == "missing_notebook":  # no notebook, so no grade at all (the export counts 0)
                score = 0.0 if (student, a) not in book else score
            if score is None or score != points:  # never scored, or missing from the gradebook, is not a 0
                mismatches.append(f"{student}/{a}/{grade_id}: score {score}, expected {points}")
            if student != "invalid_json" and manual:
                mismatches.append(f"{student}/{a}/{grade_id}: flagged for manual grading")
        if exported.get((student, a)) != sum(cells.values()):
            mismatches.append(f"{student}/{a}: exported {exported.get((student, a))}, expected {sum(cells.values())}")
        mismatches += [f"{student}/{a}/{p}" for p in feedback_problems(course, student, a)]
        graded_nb = course / "autograded" / student / a / f"{a}.ipynb"
        whole = student in ("perfect", "selfstudy_copy", "renamed_notebook") and graded_nb.exists()
        if whole and len(nbformat.read(graded_nb, as_version=4).cells) != cell_counts[(student, a)]:
            mismatches.append(f"{student}/{a}: the graded notebook's cells are not the submission's and the grade "
                              "cells restored (duplicated?)")
        if diagnoses.get((student, a)) and not _feedback_shows(course, student, a, diagnoses[(student, a)]):
            mismatches.append(f"{student}/{a}: feedback does not name the mistake {diagnoses[(student, a)][:60]!r}")
    log(f"{len(kinds)} students x {len(assignments)} assignments graded in {timings['total_s']:.1f} s "
        f"({course})")
    return mismatches, timings, course


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every folder in source/")
    parser.add_argument("-s", "--submission", action="append", help="a kind from --list (default: all kinds)")
    parser.add_argument("--idioms", action="store_true",
                        help="also hand in every idiom of catalogue/idioms/ (right answers: full marks)")
    parser.add_argument("--timeout", type=int, default=30, help="per-cell timeout in the simulation")
    parser.add_argument("--workdir", help="course directory to create (default: a temp dir, kept)")
    parser.add_argument("--list", action="store_true", help="print the submission kinds and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(KINDS + idiom_kinds()))
        return 0
    kinds = list(args.submission or KINDS)
    unknown = [k for k in kinds if k not in KINDS and not re.fullmatch(r"idioms_\d+", k)]
    if unknown:
        parser.error(f"unknown submission kinds {unknown}; see --list")
    kinds += idiom_kinds() if args.idioms else []
    assignments = args.assignments or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    mismatches, timings, _ = simulate(assignments, kinds, workdir=args.workdir, timeout=args.timeout)
    for key, value in timings.items():
        print(f"{key:<32s} {value:7.1f}")
    for line in mismatches:
        print("MISMATCH", line)
    print("all scores as expected" if not mismatches else f"{len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
