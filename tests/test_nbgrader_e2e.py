"""nbgrader end to end, the way an instructor uses it, in a temporary course directory.

Every chapter with graded cells goes into one course with a fresh gradebook
(``generate_assignment``, ``db student import``), with three submissions per chapter -- the
source notebook (must get full marks), the untouched release (must get zero, without crashing)
and the source with one component replaced by a classic wrong implementation (must lose
exactly that component's points) -- then one ``autograde`` and one
``generate_feedback`` run over all of them (nbgrader starts once, not once per chapter). Scores are read from the gradebook API, never from
the CLI's exit status. ``nbgrader.validator.Validator`` judges every autograded source (passes)
and release (every graded cell fails), and runs its own execution on one chapter.
"""
import inspect
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.preprocessors import CheckCellMetadata
from nbgrader.validator import Validator

import solutions
from pipeline_helpers import LESSONS, ROOT, build, graded_cells, nbgrader, nbgrader_meta, read_nb

pytestmark = pytest.mark.slow  # real nbgrader runs: `make test-fast` leaves them out

COURSE_ID = build.load_nbgrader_config().CourseDirectory.course_id
GRADED = [n for n in LESSONS if any("grade_id" in c.metadata for c in build.read_lesson(n))]

WRONG_ATTENTION_NUMPY = '''
def attention_numpy(Q, K, V, mask=None):
    """Wrong on purpose: forgets the 1/sqrt(d_k) scaling."""
    scores = Q @ np.swapaxes(K, -1, -2)  # (..., T_q, T_k), not scaled
    if mask is not None:
        mask = np.asarray(mask).astype(bool)
        scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)  # (..., T_q, T_k)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights @ V, weights  # (..., T_q, d_v)
'''.strip()

WRONG_MHA = '''
class MultiHeadAttention(nn.Module):
    """Wrong on purpose: merges the heads without moving H back next to d_k."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout_p = dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv, mask=None):
        B, T_q, _ = x_q.shape
        T_k = x_kv.size(1)
        q = self.W_q(x_q).view(B, T_q, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_q, d_k)
        k = self.W_k(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        v = self.W_v(x_kv).view(B, T_k, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T_k, d_k)
        out, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)
        out = out.reshape(B, T_q, self.d_model)  # bug: (B, H, T_q, d_k) read as (B, T_q, d_model)
        return self.W_o(out), attn
'''.strip()



def edited(component, old, new):
    """The reference source of ``component`` with one classic mistake edited in (``old`` -> ``new``)."""
    source = inspect.getsource(getattr(solutions, component)).rstrip()
    assert source.count(old) == 1, f"solutions.{component} no longer holds {old!r} exactly once"
    return source.replace(old, new)


# chapter -> (component replaced, wrong source or (old line, new line), grade_ids that must lose their points)
WRONG = {
    "01_attention": ("attention_numpy", WRONG_ATTENTION_NUMPY, {"attention_numpy_matches_reference"}),
    "02_multihead": ("MultiHeadAttention", WRONG_MHA, {"mha_matches_reference"}),
    # the positional table added whole, not sliced to T
    "03_positional": ("PositionalEncoding", edited("PositionalEncoding", "x = x + self.pe[:, : x.size(1)]",
                                                  "x = x + self.pe"), {"pe_module_matches_reference"}),
    # the activation forgotten: two linear layers collapse into one
    "04_ffn_layernorm": ("FeedForward", edited("FeedForward", "self.activation(self.fc1(x))", "self.fc1(x)"),
                         {"ffn_matches_reference"}),
    # the encoder's padding mask not passed on: both of the encoder layer's tests fail
    "05_layers": ("EncoderLayer", edited("EncoderLayer", "self.self_attn(x, x, src_mask)", "self.self_attn(x, x)"),
                  {"encoder_layer_ignores_padding", "encoder_layer_matches_reference"}),
    # greedy decoding that never stops early
    "06_transformer": ("Transformer", edited("Transformer", "            if finished.all():\n                break\n",
                                             ""), {"greedy_decode_stops_at_eos"}),
    # the loss averaged over PAD positions too
    "07_copy_task": ("copy_loss", edited("copy_loss", ", ignore_index=pad_id)", ")"), {"copy_loss_ignores_pad"}),
    # the KV cache counted without its factor 2 (K only, no V)
    "08_gpt": ("kv_cache_bytes", edited("kv_cache_bytes", "return 2 * num_layers", "return num_layers"),
               {"kv_cache_bytes_table"}),
    # the drill bank (its cells carry the drill docstrings, so the answer is edited in place, see
    # wrong_submission): the padding mask inverted costs that drill only, no other drill calls it
    "09_drills": ("make_pad_mask", ("return (tokens != pad_id)[:, None, None, :]", "return (tokens == pad_id)[:, None, None, :]"),
                  {"drill_make_pad_mask"}),
}


def nbgrader_config():
    return build.load_nbgrader_config()


def wrong_submission(name):
    """The source notebook with one component's reference code replaced by a wrong one."""
    component, wrong_source, _ = WRONG[name]
    nb = read_nb(ROOT / "source" / name / f"{name}.ipynb")
    if isinstance(wrong_source, tuple):  # (line of the answer, wrong line): edited in the exercise cell
        old, new = wrong_source
        cells = [c for c in nb.cells if nbgrader_meta(c).get("solution") and old in c.source]
        assert len(cells) == 1, f"{name}: no single exercise cell holds {old!r}"
        cells[0].source = cells[0].source.replace(old, new)
        return nb
    reference = inspect.getsource(getattr(solutions, component)).rstrip()
    cells = [c for c in nb.cells if nbgrader_meta(c).get("solution") and reference in c.source]
    assert len(cells) == 1, f"{name}: no single exercise cell holds solutions.{component}"
    cells[0].source = cells[0].source.replace(reference, wrong_source)
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One temporary course holding every graded chapter, autograded in one nbgrader run.

    Returns {chapter: {"max": max score, "scores": {student: score},
    "cells": {student: {grade_id: (score, max_score)}}}} plus "_root" (the course directory).
    """
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    built = [n for n in GRADED if (ROOT / "source" / n / f"{n}.ipynb").exists()]  # others fail in `graded`
    for name in built:
        shutil.copytree(ROOT / "source" / name, course / "source" / name)
    nbgrader("generate_assignment", "*", "--force", cwd=course)  # records the assignments in the gradebook
    submissions = {}
    for name in built:
        submissions[("perfect", name)] = read_nb(ROOT / "source" / name / f"{name}.ipynb")
        submissions[("untouched", name)] = read_nb(course / "release" / name / f"{name}.ipynb")
        if name in WRONG:
            submissions[("one_wrong", name)] = wrong_submission(name)
    students = sorted({student for student, _ in submissions})
    (course / "students.csv").write_text("id\n" + "\n".join(students) + "\n")
    nbgrader("db", "student", "import", "students.csv", cwd=course)
    for (student, name), nb in submissions.items():
        folder = course / "submitted" / student / name
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{name}.ipynb"))
    nbgrader("autograde", "*", "--force", cwd=course)
    results = {"_root": course}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        for name in built:
            result = results[name] = {"max": gb.find_assignment(name).max_score, "scores": {}, "cells": {}}
            for student, chapter in submissions:
                if chapter == name:
                    result["scores"][student] = gb.find_submission(name, student).score
                    notebook = gb.find_submission_notebook(name, name, student)
                    result["cells"][student] = {g.name: (g.score, g.max_score) for g in notebook.grades}
    return results


@pytest.fixture(params=GRADED)
def graded(request, course):
    name = request.param
    assert name in course, f"source/{name}/{name}.ipynb missing -- run `make build`"
    return {"name": name, "root": course["_root"], **course[name]}


def test_points_add_up(graded):
    source = read_nb(ROOT / "source" / graded["name"] / f"{graded['name']}.ipynb")
    assert graded["max"] == sum(nbgrader_meta(c)["points"] for c in graded_cells(source)) > 0


def test_source_as_submission_gets_full_marks(graded):
    lost = {k: v for k, v in graded["cells"]["perfect"].items() if v[0] != v[1]}
    assert not lost, f"{graded['name']}: the reference loses points in {lost}"
    assert graded["scores"]["perfect"] == graded["max"]


def test_untouched_release_gets_zero(graded):
    earned = {k: v for k, v in graded["cells"]["untouched"].items() if v[0] != 0}
    assert not earned, f"{graded['name']}: the untouched stubs earn points in {earned}"
    assert graded["scores"]["untouched"] == 0
    assert len(graded["cells"]["untouched"]) == len(graded["cells"]["perfect"])


def test_untouched_release_runs_past_every_stub(graded):
    """A learner who has not started gets errors only where they must write code or where a test
    calls it: every read-only text/demo cell runs (earlier chapters' pieces are provided)."""
    path = graded["root"] / "autograded" / "untouched" / graded["name"] / f"{graded['name']}.ipynb"
    crashed = [c.metadata["nbgrader"]["grade_id"] for c in read_nb(path).cells
               if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)
               and not (nbgrader_meta(c).get("solution") or nbgrader_meta(c).get("grade"))]
    assert not crashed, f"{graded['name']}: read-only cells fail before the exercises are done: {crashed}"


def test_one_wrong_component_loses_exactly_its_points(graded):
    assert graded["name"] in WRONG, f"add a wrong-component case for {graded['name']} to WRONG"
    component, _, expected = WRONG[graded["name"]]
    cells = graded["cells"]["one_wrong"]
    assert expected <= set(cells), f"unknown grade_ids {sorted(expected - set(cells))}"
    lost = {k for k, (score, top) in cells.items() if score != top}
    assert lost == expected, f"a wrong {component} lost {sorted(lost)}, expected exactly {sorted(expected)}"
    assert graded["scores"]["one_wrong"] == graded["max"] - sum(cells[k][1] for k in expected)


def test_generate_feedback_writes_html(course):
    root = course["_root"]
    nbgrader("generate_feedback", "*", "--force", cwd=root)
    for name in GRADED:
        assert name in course, f"source/{name}/{name}.ipynb missing -- run `make build`"
        for student, score in course[name]["scores"].items():
            html = (root / "feedback" / student / name / f"{name}.html").read_text(encoding="utf-8")
            assert f"Score: {score:.1f} / {course[name]['max']:.1f}" in html, f"feedback/{student}/{name}"


def validator(execute, invert=False):
    """``nbgrader.validator.Validator`` with the course config; ``execute=False`` judges the
    outputs a notebook already has (those autograde produced) instead of running it again."""
    v = Validator(config=nbgrader_config(), invert=invert)
    if not execute:
        v.preprocessors = [CheckCellMetadata]
    return v


def test_validator_passes_every_autograded_source(graded):
    """Every source notebook, as autograde executed it, passes the Validator."""
    path = graded["root"] / "autograded" / "perfect" / graded["name"] / f"{graded['name']}.ipynb"
    results = validator(execute=False).validate(str(path))
    assert results == {}, f"{graded['name']}: {results}"


def test_validator_fails_every_graded_cell_of_the_autograded_release(graded):
    path = graded["root"] / "autograded" / "untouched" / graded["name"] / f"{graded['name']}.ipynb"
    results = validator(execute=False, invert=True).validate(str(path))
    assert set(results) <= {"passed"}, results
    assert not results.get("passed"), f"{graded['name']}: graded cells pass on the stubs: {results['passed']}"


@pytest.mark.parametrize("name", GRADED[:1])
def test_validator_executes_source_and_release(name):
    """The Validator's own execution path (what a learner's Validate button runs), on one chapter."""
    source = ROOT / "source" / name / f"{name}.ipynb"
    assert validator(execute=True).validate(str(source)) == {}
    results = validator(execute=True, invert=True).validate(str(ROOT / "release" / name / f"{name}.ipynb"))
    assert set(results) <= {"passed"} and not results.get("passed"), results
