"""Right answers written the ways people really write Python, graded end to end with the
instructor's nbgrader commands (tools/simulate_class.py), in every graded chapter: the first idiom
of every exercise in catalogue/idioms/ gets full marks, and a perfect answer with
``torch.allclose`` replaced inside one exercise loses that exercise's points only. Every idiom
(not only the first of each exercise) is ``.venv/bin/python -m tools.simulate_class --idioms``.

Its own file, so that pytest-xdist grades it beside tests/test_class_simulation.py, not after it.
"""
import pytest

from pipeline_helpers import graded_chapters
from tools import simulate_class

pytestmark = pytest.mark.slow  # a class graded by real nbgrader: `make test-fast` leaves it out


@pytest.fixture(scope="module")
def idiom_class(tmp_path_factory):
    chapters = graded_chapters()
    if not chapters:
        pytest.skip("no graded chapter in source/ yet (run tools/build.py)")
    workdir = tmp_path_factory.mktemp("idioms") / "course"
    return simulate_class.simulate(chapters, ["idioms_0", "tamper_one_exercise"], workdir=workdir, timeout=30,
                                   log=lambda *_: None)


def test_right_answers_in_ordinary_python_get_full_marks_and_tampering_costs_one_exercise(idiom_class):
    mismatches, _, course = idiom_class
    assert not mismatches, "\n".join(mismatches)
    graded = {p.parent.name for p in (course / "autograded" / "idioms_0").glob("*/*.ipynb")}
    assert graded == set(graded_chapters()), "every graded chapter has an idiom handed in"
