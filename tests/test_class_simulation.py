"""A reduced class graded end to end with the instructor's nbgrader commands (tools/simulate_class.py),
and the out-of-kernel tampering audit (tutor/hardening.py) on its own.

The simulation hands in one chapter for a class of perfect, untouched, partial, hostile and broken
submissions, runs ``autograde``, ``generate_feedback`` and ``export`` in a temporary course
directory, and compares each grade cell's score (gradebook) and each total (CSV) with the score
computed from the source notebook's metadata. The whole course and every submission kind is
``.venv/bin/python tools/simulate_class.py`` (minutes; not part of the test suite).
"""
import inspect
import re
import sys
from pathlib import Path

import nbformat
import pytest

import solutions
from tutor.hardening import MODULE_NAMES, audit_source, builtin_uses

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import simulate_class  # noqa: E402

# One of each family; the other kinds are variations the full script runs.
CLASS = ["perfect", "untouched", "classic_mistake", "infinite_loop", "kernel_dies", "huge_print",
         "deleted_test_cells", "stripped_test_metadata", "edited_readonly_cell", "rebind_grade_name",
         "patch_grading_module", "import_reference", "forbidden_builtin", "missing_notebook",
         "invalid_json"]

# Things a learner's own code legitimately does; none of them may be flagged.
LEGIT = [
    "self.act = getattr(F, activation)",
    "setattr(self, f'head_{i}', nn.Linear(4, 4))",
    "x = torch.zeros(3)\nx[0] = 1.0\nx.requires_grad = True",
    "for group in optimizer.param_groups:\n    group['lr'] = 0.1",
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n    def __repr__(self):\n        return 'M'",
    "import math\nfrom typing import Optional\nimport torch.nn.functional as F2\ny = F2.relu(torch.ones(2))",
]


def graded_chapters():
    return [p.parent.name for p in sorted((ROOT / "source").glob("*/*.ipynb"))
            if any(c.metadata.get("nbgrader", {}).get("grade")
                   for c in nbformat.read(p, as_version=4).cells)]


@pytest.mark.parametrize("kind", sorted(simulate_class.TAMPERING))
def test_audit_flags_each_tampering(kind):
    found = audit_source(simulate_class.TAMPERING[kind])
    assert found, f"{kind} not flagged"
    line, zh, en = found[0]
    assert line >= 1 and zh and en.isascii()


@pytest.mark.parametrize("code", LEGIT)
def test_audit_accepts_ordinary_code(code):
    assert audit_source(code) == []


def test_audit_accepts_every_reference_answer():
    """The reference package is what a perfect learner writes: never flagged."""
    flagged = {}
    for name in dir(solutions):
        obj = getattr(solutions, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            found = audit_source(inspect.getsource(obj), set(MODULE_NAMES))
            if found:
                flagged[name] = found
    assert not flagged


@pytest.mark.parametrize("name", sorted(simulate_class.BUILTIN_CHEATS))
def test_builtin_inside_an_implementation_is_found(name):
    assert builtin_uses(simulate_class.BUILTIN_CHEATS[name])
    assert builtin_uses("from torch.nn.functional import layer_norm")
    assert not builtin_uses("ref = nn.MultiheadAttention(8, 2)  # a comparison outside the answer")


def test_audit_follows_aliases_and_magics():
    assert audit_source("T = torch.Tensor\nT.add = None")
    assert audit_source("%load_ext autoreload")
    assert audit_source("m = np\ndel m.testing")


@pytest.fixture(scope="module")
def simulated_class(tmp_path_factory):
    chapters = graded_chapters()
    if not chapters:
        pytest.skip("no graded chapter in source/ yet (run tools/build.py)")
    # 02: one exercise whose classic mistakes pass the visible tests, so the hidden check diagnoses.
    chapter = "02_multihead" if "02_multihead" in chapters else chapters[0]
    workdir = tmp_path_factory.mktemp("class") / "course"
    return simulate_class.simulate([chapter], CLASS, workdir=workdir, timeout=10, log=lambda *_: None)


def test_every_submission_gets_its_expected_score(simulated_class):
    mismatches, _, _ = simulated_class
    assert not mismatches, "\n".join(mismatches)


def test_feedback_shows_the_bilingual_messages(simulated_class):
    """A classic mistake's feedback HTML carries each failed test's message, in Chinese and English."""
    _, _, course = simulated_class
    autograded = list((course / "autograded" / "classic_mistake").rglob("*.ipynb"))
    pages = list((course / "feedback" / "classic_mistake").rglob("*.html"))
    assert autograded and pages, "no feedback generated for the classic-mistake submission"
    page = pages[0].read_text()
    messages = [out.evalue for cell in nbformat.read(autograded[0], as_version=4).cells
                for out in cell.get("outputs", []) if out.output_type == "error" and out.ename == "AssertionError"]
    assert messages, "the classic mistake failed no test"
    for message in messages:
        assert re.search(r"[\u4e00-\u9fff]", message) and re.search(r"[A-Za-z]{4,} [a-z]{2,}", message), \
            f"not 中文 and English: {message!r}"
        assert simulate_class.html.escape(message.splitlines()[0], quote=False) in page
    assert "诊断 / diagnosis" in page, "the feedback names no classic mistake"
