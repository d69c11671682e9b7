"""The submission audit (``grader.audit``, applied by ``grader.audit_submission``) on its own, without
running nbgrader: it flags what reaches the grading machinery, never ordinary Python, and voids only
the exercise that holds it.

End to end through ``nbgrader autograde`` the same rules are proven by tests/test_class_simulation.py.
"""
import copy
import subprocess
import sys

import nbformat
import pytest
from nbgrader import utils

from grader.audit import audit_source, builtin_uses
from grader.audit_submission import AuditSubmission
from pipeline_helpers import graded_chapters
from tools import simulate_class
from tools.paths import ROOT

# Ordinary Python a learner writes; none of it may be flagged.
ORDINARY = {
    "getattr_picks_activation": "self.act = getattr(F, activation)",
    "setattr_on_self": "setattr(self, f'head_{i}', nn.Linear(4, 4))",
    "tensor_item_writes": "x = torch.zeros(3)\nx[0] = 1.0\nx.requires_grad = True",
    "optimizer_groups": "for group in optimizer.param_groups:\n    group['lr'] = 0.1",
    "dunders_for_itself": ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                           "    def __repr__(self):\n        return 'M'\n    def __call__(self, x):\n        return x\n"
                           "    def __getitem__(self, i):\n        return i"),
    "base_init_calls": ("class MultiHeadAttention(nn.Module):\n    def __init__(self):\n"
                        "        nn.Module.__init__(self)\n        super(MultiHeadAttention, self).__init__()\n"
                        "    def extra_repr(self):\n"
                        "        return f'{self.__class__.__name__} {type(self).__name__} {vars(self)}'"),
    "stdlib_imports": ("import io, typing, functools, itertools, collections, dataclasses, math, os\n"
                       "from typing import Optional\nimport torch.nn.functional as F2\ny = F2.relu(torch.ones(2))"),
    "decorators": ("@functools.lru_cache(maxsize=None)\ndef f(n):\n    return n\n\nclass A:\n    @staticmethod\n"
                   "    def g():\n        return 1\n\n@torch.no_grad()\ndef h(m):\n    return m"),
    "plot_and_backend_settings": ("plt.rcParams['figure.dpi'] = 100\ntorch.backends.cudnn.deterministic = True\n"
                                  "import os\nos.environ['KMP_DUPLICATE_LIB_OK'] = 'TRUE'"),
    "timing_magics": "%timeit x = 1\n",
    "cell_timing_magic": "%%time\ny = 2\n",
    "exec_of_plain_code": "exec('y = 3')",
    "read_a_file": "import os\np = os.path.join('a', 'b')\nwith open('data.txt') as f:\n    text = f.read()",
    "path_open_for_reading": "from pathlib import Path\nwith Path('data.txt').open() as f:\n    lines = f.read()",
    "string_methods_named_like_files": "s = 'a b'.replace(' ', '')\nparts = 'x.y'.split('.')\nw = s.copy() if 0 else s",
    "rebound_name": "F = object()\nF.x = 1",
    "helper_class_vars_repr": ("class Stats:\n    def __call__(self, x):\n        return x.mean(-1, keepdim=True)\n"
                               "    def __repr__(self):\n        return repr(vars(self))"),
    "class_split_over_cells": "def _forward(self, x):\n    return x\nLayerNorm.forward = _forward",
    "assert_and_fstring": "assert d_model % num_heads == 0, f'{d_model} % {num_heads} != 0'",
    "torch_save": "torch.save(model.state_dict(), 'copy.pt')",
    "parameter_named_like_a_module":
        "def scale(x, F=2.0, np=None):\n    F.weight = 1.0\n    np.data = x\n    return x * F",
    "local_rebinding_stays_local": "def f():\n    torch = {}\n    torch['x'] = 1\n\ntorch.manual_seed(0)",
}

# Code that reaches the grading machinery, beyond the end-to-end kinds of simulate_class.TAMPERING,
# with what it can affect: "exercise" (the run-time integrity check sees and undoes it, or later
# exercises do not use it) or "later" (nothing can undo it: every later exercise too).
HOSTILE = {
    "globals_builtins": ("globals()['__builtins__']['AssertionError'] = KeyboardInterrupt", "exercise"),
    "vars_of_module": ("vars(torch)['allclose'] = lambda *a, **k: True", "exercise"),
    "module_dict": ("torch.__dict__['allclose'] = lambda *a, **k: True", "exercise"),
    "setattr_on_module": ("setattr(torch, 'allclose', lambda *a, **k: True)", "exercise"),
    "object_setattr": ("object.__setattr__(torch, 'allclose', print)", "exercise"),
    "sys_modules_pop": ("import sys\nsys.modules.pop('tutor.grading')", "later"),
    "grade_globals": ('g = grade.__globals__', "later"),
    "grade_code": ('grade.__code__ = (lambda *a: None).__code__', "later"),
    "checks_alias": ('import tutor.checks as c\nc.run_check = lambda *a: None', "exercise"),
    "from_tutor": ('from tutor import checks\nchecks._compare = lambda *a: None', "later"),
    "exec_alias": ("e = exec\ne('x = 1')", "later"),
    "eval_computed": ("s = 'import builtins'\neval(compile(s, 'x', 'exec'))", "later"),
    "import_module_folded": ("import importlib\nm = importlib.import_module('sol' + 'utions')", "exercise"),
    "dunder_import": ("m = __import__('solutions')", "exercise"),
    "from_solutions": ('from solutions import MultiHeadAttention', "exercise"),
    "builtins_alias": ('import builtins as b\nb.print = None', "exercise"),
    "stderr_swapped": ('import sys, io\nsys.stderr = io.StringIO()', "later"),
    "patch_inside_forward":
        ('def forward(self, x):\n    torch.allclose = lambda *a, **k: True\n    return x', "exercise"),
    "gc_objects": ('import gc\nobjs = gc.get_objects()', "later"),
    "lambda_globals": ("(lambda: 0).__globals__['x'] = 1", "later"),
    "current_frame": ('import inspect\nf = inspect.currentframe().f_back', "later"),
    "shell": ('!rm -rf /tmp/x', "later"),
    "run_magic": ('%run other.py', "later"),
    "bash_magic": ('%%bash\necho hi', "later"),
    "path_write": ("from pathlib import Path\nPath('x.py').write_text('x')", "later"),
    "for_target": ('for torch.x in range(3):\n    pass', "exercise"),
    "open_for_writing": ("with open('f.py', 'w') as fh:\n    fh.write('x')", "later"),
    "module_call": ('nn.Module.__call__ = lambda self, *a: a', "later"),
    "tensor_eq": ('torch.Tensor.__eq__ = lambda a, b: True', "later"),
    "exec_literal_in_def": ("def f():\n    exec('import builtins\\nbuiltins.len = None')", "exercise"),
    "computed_getattr_on_grader": ("name = 'x'\nv = getattr(grade, name)", "later"),
    "type_with_tensor_base": ("X = type('X', (torch.Tensor,), {})", "exercise"),
    "torch_function_hook":
        ('class W:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n        return True',
         "exercise"),
    "subprocess": ("import subprocess\nsubprocess.run(['ls'])", "later"),
    "settrace": ('import sys\nsys.settrace(None)', "later"),
    "del_module_attr": ('del torch.allclose', "exercise"),
    "walrus_alias": ('(t := torch).allclose = None', "exercise"),
    "class_swap": ('x = torch.ones(2)\nx.__class__ = object', "later"),
    "function_defaults": ('from torch import allclose\nallclose.__defaults__ = (1.0,)', "later"),
    "append_mode": ("open('x', mode='a')", "later"),
    # every route of writing files or running programs, each spelled as real code spells it
    "os_execv": ("import os\nos.execv('/bin/sh', ['sh'])", "later"),
    "os_execl": ("import os\nos.execl('/bin/sh', 'sh')", "later"),
    "os_execvp_from": ("from os import execvp\nexecvp('sh', ['sh'])", "later"),
    "os_spawnlp": ("import os\nos.spawnlp(os.P_NOWAIT, 'sleep', 'sleep', '9')", "later"),
    "os_posix_spawn": ("import os\nos.posix_spawn('/bin/sleep', ['sleep', '9'], os.environ, setsid=True)", "later"),
    "os_open": ("import os\nfd = os.open('x.py', os.O_WRONLY | os.O_CREAT)", "later"),
    "path_open_write": ("import pathlib\npathlib.Path('nbgrader_config.py').open('a').write('x')", "later"),
    "path_open_mode_keyword": ("from pathlib import Path\nPath('x').open(mode='w')", "later"),
    "shutil_copyfile": ("import shutil\nshutil.copyfile('a', 'b')", "later"),
    "shutil_copy2": ("from shutil import copy2\ncopy2('a', 'b')", "later"),
    "sqlite3_connect": ("import sqlite3\nsqlite3.connect('gradebook.db')", "later"),
    "pty_spawn": ("import pty\npty.spawn('sh')", "later"),
    "ctypes_libc": ("import ctypes\nctypes.CDLL(None).system(b'id')", "later"),
}


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_audit_accepts_ordinary_code(name):
    assert audit_source(ORDINARY[name]) == []


@pytest.mark.parametrize("name", sorted(HOSTILE) + [f"e2e_{k}" for k in sorted(simulate_class.TAMPERING)])
def test_audit_flags_what_reaches_the_grading_with_its_reach(name):
    code, reach = simulate_class.TAMPERING[name[4:]][:2] if name.startswith("e2e_") else HOSTILE[name]
    found = audit_source(code)
    assert found, f"{name} not flagged"
    assert all(f.line >= 1 and f.zh and f.en.isascii() for f in found)
    assert ("exercise" if all(f.local for f in found) else "later") == reach, found


@pytest.mark.parametrize("name", sorted(simulate_class.BUILTIN_CHEATS))
def test_builtin_inside_an_implementation_is_found(name):
    assert builtin_uses(simulate_class.BUILTIN_CHEATS[name])


def test_builtin_found_by_any_name_and_only_inside_definitions():
    assert builtin_uses("from torch.nn.functional import layer_norm") == [(1, "F.layer_norm")]
    assert builtin_uses("import torch.nn.functional as fn\ndef f(x):\n    return fn.layer_norm(x, (4,))") \
        == [(3, "F.layer_norm")]
    assert not builtin_uses("ref = nn.MultiheadAttention(8, 2)  # a comparison outside the answer")
    assert not builtin_uses("class LayerNorm(nn.Module):\n    pass\n\ndef f():\n    return LayerNorm()")


def _audited(nb):
    """{grade_id: error name} for the graded cells the audit voids."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    AuditSubmission().preprocess(nb, {})
    return {cell.metadata["nbgrader"]["grade_id"]: out.ename for cell in nb.cells if utils.is_grade(cell)
            for out in cell.get("outputs", []) if out.output_type == "error"}


@pytest.mark.parametrize("chapter", graded_chapters())
def test_perfect_and_idiom_submissions_are_never_flagged(chapter):
    """Every exercise cell of the reference (graded and bonus) and every idiom, as handed in."""
    info = simulate_class.analyse(chapter, ROOT / "source")
    perfect = simulate_class._perfect(info)
    assert _audited(perfect) == {}
    for kind in simulate_class.idiom_kinds():
        submission = simulate_class.make_submission(kind, info)
        if submission is not None:
            assert _audited(submission.notebook) == {}, f"{kind} of {chapter} flagged"


def test_tampering_voids_only_its_own_exercise():
    """Chapter 01: ``torch.allclose`` replaced in the second exercise's cell voids that exercise's
    graded cells, with a message naming the line; the other three exercises keep theirs."""
    info = simulate_class.analyse("01_attention", ROOT / "source")
    nb = simulate_class._perfect(info)
    index, names = info.exercises[1]
    nb.cells[index].source += "\n\ntorch.allclose = lambda *args, **kwargs: True"
    voided = _audited(nb)
    own = {g for g, i in info.grade_index.items() if index < i < info.exercises[2][0]}
    assert own and set(voided) == own and set(voided.values()) == {"IntegrityError"}
    message = next(o.evalue for c in AuditSubmission().preprocess(copy.deepcopy(nb), {})[0].cells
                   if utils.is_grade(c) for o in c.outputs if o.output_type == "error")
    assert f"({names[0]})" in message and "torch.allclose" in message and "line" in message


def test_a_learner_added_cell_belongs_to_the_exercise_before_it():
    info = simulate_class.analyse("01_attention", ROOT / "source")
    nb = simulate_class._perfect(info)
    index, _ = info.exercises[2]
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell("import builtins\nbuiltins.len = None"))
    own = {g for g, i in info.grade_index.items() if index < i < info.exercises[3][0]}
    assert set(_audited(nb)) == own


def test_what_nothing_can_undo_voids_its_exercise_and_every_later_one():
    """``sys.modules`` poisoned in the second exercise: the first exercise keeps its points."""
    info = simulate_class.analyse("01_attention", ROOT / "source")
    nb = simulate_class._perfect(info)
    index, _ = info.exercises[1]
    nb.cells[index].source += "\n\nimport sys\nsys.modules['tutor.grading'] = None"
    later = {g for g, i in info.grade_index.items() if i > index}
    assert later and set(_audited(nb)) == later


def test_grade_fails_and_undoes_tampering_done_while_the_learners_code_runs():
    """Run time, the other half: ``grade`` verifies the machinery after the check too, fails that
    cell, and puts the original back, so the next exercise is graded by the real ``np.allclose``."""
    import numpy as np

    from catalogue.reference import load
    from tutor.grading import TestFailure, grade

    softmax, original = load()["softmax"], np.allclose

    def patching_softmax(x, axis=-1):
        np.allclose = lambda *args, **kwargs: True
        return softmax(x, axis)

    with pytest.raises(TestFailure, match="numpy.allclose"):
        grade("softmax", patching_softmax)
    assert np.allclose is original
    grade("softmax", softmax)  # clean again


def test_an_exercise_may_not_use_the_built_in_it_replaces_by_its_own_table():
    """``cross_entropy`` written from scratch may not call PyTorch's loss; other exercises may."""
    from tutor.guard import forbidden_for

    code = "def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0):\n" \
           "    return F.cross_entropy(logits.flatten(0, -2), target.flatten())"
    assert builtin_uses(code, forbidden=forbidden_for(["cross_entropy"])) == [(2, "F.cross_entropy")]
    assert builtin_uses(code, forbidden=forbidden_for(["copy_loss"])) == []


def test_the_checks_guard_refuses_autograd_in_a_hand_written_backward():
    import torch

    from catalogue.reference import load
    from tutor.checks import run_check

    def softmax_backward(y, grad_y, dim=-1):
        x = torch.log(y).detach().requires_grad_(True)
        return torch.autograd.grad(torch.softmax(x, dim), x, grad_y)[0]

    result = run_check("softmax_backward", softmax_backward)
    assert not result.passed and "torch.autograd.grad" in result.message
    assert run_check("softmax_backward", load()["softmax_backward"]).passed


def test_the_checks_guard_refuses_pytorchs_batch_norm_and_autograd_in_the_batch_norm_drills():
    import torch
    import torch.nn.functional as F

    from tutor.checks import run_check

    def batch_norm_forward(x, weight, bias, eps=1e-5):
        return F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)

    def batch_norm_backward(x, weight, grad_out, eps=1e-5):
        x, weight = x.detach().requires_grad_(True), weight.detach().requires_grad_(True)
        bias = torch.zeros_like(weight, requires_grad=True)
        out = batch_norm_forward(x, weight, bias, eps)
        return torch.autograd.grad(out, (x, weight, bias), grad_out)

    forward, backward = run_check("batch_norm_forward", batch_norm_forward), run_check("batch_norm_backward",
                                                                                       batch_norm_backward)
    assert not forward.passed and "F.batch_norm" in forward.message
    assert not backward.passed and "torch.autograd.grad" in backward.message


def test_the_audit_is_plain_code_without_nbgrader():
    code = "import sys, grader.audit\nassert not [m for m in sys.modules if m.split('.')[0] == 'nbgrader'], 'nbgrader'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_allow_lists_are_settings_of_the_preprocessor():
    from traitlets.config import Config

    assert audit_source("%load_ext autoreload\n") and not audit_source("%load_ext autoreload\n",
                                                                         safe_magics={"load_ext"})
    config = Config()
    config.AuditSubmission.safe_magics = ["time", "load_ext"]
    audit = AuditSubmission(config=config)
    assert audit.safe_magics == ["time", "load_ext"] and "torch.backends" in audit.config_paths
    assert AuditSubmission.class_traits()["config_paths"].help
