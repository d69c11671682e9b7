"""A reduced class graded end to end with the instructor's nbgrader commands (tools/simulate_class.py).

The simulation hands in one chapter for a class with one student of every kind the harness knows
(perfect, untouched, partial, hostile, tampering and broken submissions), runs ``autograde``,
``generate_feedback`` and ``export`` in a temporary course directory, and compares each grade cell's
score (gradebook) and each total (CSV) with the score computed from the source notebook's metadata.
tests/test_idiom_grading.py grades right answers written the ways people really write Python in every
chapter. Every chapter with every submission kind and every idiom is
``.venv/bin/python -m tools.simulate_class --idioms`` (minutes; not part of the test suite).
"""
import nbformat
import pytest

from grader.limits import MEMORY_ERRORS
from pipeline_helpers import graded_chapters
from tools import simulate_class
from tutor.mistakes import MISTAKES

pytestmark = pytest.mark.slow  # a class graded by real nbgrader: `make test-fast` leaves it out


# Every kind of submission the harness knows (tools/simulate_class.py, KINDS): the tampering kinds, the
# stubborn loop and edited test cells included, so that CI grades each of them.
CLASS = simulate_class.KINDS


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


def test_feedback_names_the_mistake_and_gives_back_no_line_of_the_kernel(simulated_class):
    """A classic mistake's feedback page names the mistake in Chinese and English (from the registry)
    and holds no line that the grading kernel produced (grader.feedback.SealedFeedback)."""
    _, _, course = simulated_class
    autograded = list((course / "autograded" / "classic_mistake").rglob("*.ipynb"))
    pages = list((course / "feedback" / "classic_mistake").rglob("*.html"))
    assert autograded and pages, "no feedback generated for the classic-mistake submission"
    page = simulate_class.html.unescape(pages[0].read_text())
    messages = [out.evalue for cell in nbformat.read(autograded[0], as_version=4).cells
                for out in cell.get("outputs", []) if out.output_type == "error" and out.ename == "TestFailure"]
    assert messages, "the classic mistake failed no test"
    for message in messages:
        assert message.splitlines()[0] not in page, f"the kernel's report reached the feedback: {message[:80]!r}"
    named = [mid for mid in MISTAKES if f"[{mid}]" in page]
    assert named, "the feedback names no classic mistake"
    for mid in named:
        zh, en = MISTAKES[mid]
        assert zh in page and en in page, mid


def test_a_memory_bomb_fails_in_its_own_cell_and_the_kernel_lives(simulated_class):
    """The memory_bomb student's stub allocates 100 MB at a time in a loop. Under the kernel's cap
    (RLIMIT_AS, nbgrader_config.py) an allocation fails with MemoryError inside the cell that called
    it, and the kernel lives on to run every later cell; without the cap the loop would fill the
    machine's memory until the kernel was killed (a lost kernel in every later cell)."""
    _, _, course = simulated_class
    notebooks = list((course / "autograded" / "memory_bomb").rglob("*.ipynb"))
    assert notebooks, "the memory bomb was not graded"
    outputs = [o for cell in nbformat.read(notebooks[0], as_version=4).cells for o in cell.get("outputs", [])]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert any(MEMORY_ERRORS.search(e) for e in errors), errors
    assert not any(e.startswith("KernelLost") for e in errors), "the kernel died: the cap did not stop the bomb"


def test_feedback_shows_no_traceback_or_path(simulated_class):
    """Feedback pages show one line per error: no Python traceback, no path of the grading machine."""
    _, _, course = simulated_class
    pages = list((course / "feedback").rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text()
        assert "Traceback (most recent call last)" not in text, page
        assert str(course) not in text and "site-packages" not in text, page


def test_demo_cells_are_not_run_and_the_rest_is(simulated_class):
    """autograde skips the source notebook's demo cells (one line each, grader.execution.DEMO_SKIPPED)
    and runs every other code cell of the perfect submission."""
    from grader.execution import DEMO_SKIPPED

    _, _, course = simulated_class
    autograded = next((course / "autograded" / "perfect").rglob("*.ipynb"))
    source = nbformat.read(course / "source" / autograded.parent.name / autograded.name, as_version=4)
    demos = {c.metadata["nbgrader"]["grade_id"] for c in source.cells if c.metadata.get("demo")}
    assert demos, f"{autograded.name} has no demo cell to skip"
    for cell in nbformat.read(autograded, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        if cell.metadata["nbgrader"]["grade_id"] in demos:
            assert [o.get("text") for o in cell.outputs] == [DEMO_SKIPPED], cell.source[:80]
        else:
            assert cell.execution_count is not None, f"not run: {cell.source[:80]}"
