"""The whole cycle of a class in a real browser, on the class of `make class-up` (issue 34), through
the hub's login page as the real accounts:

the instructor releases 01 in Formgrader; Alice and Bob fetch it from the Assignment List; Alice's
answers are right, Bob's have the chapter's classic mistake (no 1/sqrt(d_k)); each validates and
submits; the TA collects, autogrades and releases feedback in Formgrader; Alice and Bob fetch and
open their own feedback. The grades equal, cell by cell, a plain serial `nbgrader autograde` of the
same notebooks. A screenshot of each step lands in build/class-screenshots/.

The answers are written into each student's fetched notebook as that student (the test does not type
a chapter's code); everything else is clicked. `make test-class` (root, Linux).
"""
import re
import subprocess
from urllib.parse import quote

import nbformat
import pytest

from classroom import COURSE, EXCHANGE, REPO, sh
from tools import simulate_class
from tools.class_up import PASSWORDS

pytestmark = [pytest.mark.browser, pytest.mark.classroom, pytest.mark.slow]
A = "01_attention"
SHOTS = REPO / "build" / "class-screenshots"
SPAWN_MS = 180_000  # a user's server starting on a loaded 2-core machine
GRADE_MS = 300_000  # autograde of one notebook, generate feedback


@pytest.fixture(scope="module")
def shot():
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    taken = []

    def take(page, name):
        path = SHOTS / f"{len(taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path))
        taken.append(path)

    take.taken = taken
    return take


@pytest.fixture(scope="module")
def clean(klass):
    """Nothing of 01 released, handed in, collected or fetched yet (as root: a class reused from the
    attack tests starts over)."""
    for path in [EXCHANGE / "outbound" / A, *(EXCHANGE / "inbound").iterdir(), *(EXCHANGE / "feedback").iterdir(),
                 *[COURSE / d for d in ("submitted", "autograded", "feedback")]]:
        subprocess.run(["rm", "-rf", str(path)], check=True)
    for student in ("alice", "bob"):
        assert sh(student, f"rm -rf {A} .local/share/jupyter/nbgrader_cache").returncode == 0
    return klass


def login(browser, hub, user):
    """A tab logged in to the hub as ``user`` (password from class-up's file), on its JupyterLab."""
    password = dict(line.split() for line in PASSWORDS.read_text().splitlines())[user]
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(hub + "hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(f"/user/{user}/lab"), timeout=SPAWN_MS)
    page.locator("#jp-main-dock-panel").wait_for()
    return page


def menu(page, top, item):
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=top).click()
    page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(f"^{re.escape(item)}$")).click()


def formgrader(page, user, path=""):
    """Formgrader in its own tab (JupyterHub's CSP stops it inside JupyterLab's iframe)."""
    page.goto(page.url.split(f"/user/{user}/")[0] + f"/user/{user}/formgrader{path}")


def ok(page, expect, text):
    modal = page.locator(".modal:visible")
    expect(modal).to_contain_text(text, timeout=GRADE_MS)
    modal.locator("button", has_text="OK").click()
    expect(page.locator(".modal-backdrop")).to_have_count(0)  # faded out: the next screenshot shows the page


def answer(student, notebook):
    """``student`` saves ``notebook`` over their fetched copy (as that account)."""
    out = subprocess.run(["runuser", "-u", student, "--", "tee", f"/home/{student}/{A}/{A}.ipynb"],
                         input=nbformat.writes(notebook), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def serial_grades(tmp_path, submissions):
    """The same notebooks graded by one plain `nbgrader autograde` in a fresh course."""
    course = tmp_path / "serial"
    course.mkdir()
    simulate_class.setup_course(course, [A], REPO / "source")
    for student, submission in submissions.items():
        simulate_class.hand_in(course, student, A, submission)
    simulate_class.nbgrader(course, "autograde", A)
    return simulate_class.read_gradebook(course)


def test_release_fetch_submit_collect_grade_feedback(browser, expect, clean, shot, tmp_path):
    hub = clean
    info = simulate_class.analyse(A, REPO / "source")
    submissions = {"alice": simulate_class.make_submission("perfect", info),
                   "bob": simulate_class.make_submission("classic_mistake", info)}

    instructor = login(browser, hub, "instructor")
    shot(instructor, "instructor-lab")
    assert instructor.request.get(hub + "user/instructor/formgrader").ok
    formgrader(instructor, "instructor")
    row = instructor.locator("tr", has=instructor.locator("a", has_text=A))
    row.locator(".glyphicon-cloud-upload").click()
    ok(instructor, expect, f"Successfully released '{A}'")
    shot(instructor, "instructor-released")

    students = {}
    for student in ("alice", "bob"):
        page = students[student] = login(browser, hub, student)
        assert page.request.get(hub + f"user/{student}/formgrader").status == 404  # students have no Formgrader
        menu(page, "Nbgrader", "Assignment List")
        page.locator("#released_assignments_list .list_item", has_text=A).get_by_role("button", name="Fetch").click()
        expect(page.locator("#fetched_assignments_list")).to_contain_text(A, timeout=SPAWN_MS)
        shot(page, f"{student}-fetched")
        answer(student, submissions[student].notebook)
        page.goto(hub + f"user/{student}/lab/tree/{A}/{A}.ipynb")
        page.locator(".jp-NotebookPanel:visible .jp-Toolbar").get_by_text("Validate", exact=True).click()
        message = page.locator(".jp-Dialog #validation-message")
        message.wait_for(timeout=GRADE_MS)
        expect(message).to_have_class(re.compile("validation-success" if student == "alice" else "validation-failed"))
        shot(page, f"{student}-validated")
        page.locator(".jp-Dialog").get_by_role("button").first.click()
        menu(page, "Nbgrader", "Assignment List")
        page.locator("#fetched_assignments_list .list_item", has_text=A).get_by_role("button", name="Submit").click()
        expect(page.locator("#submitted_assignments_list")).to_contain_text(A, timeout=SPAWN_MS)
        shot(page, f"{student}-submitted")

    ta = login(browser, hub, "ta")
    formgrader(ta, "ta")
    row = ta.locator("tr", has=ta.locator("a", has_text=A))
    row.locator(".glyphicon-cloud-download").click()
    ok(ta, expect, f"Successfully collected submissions of '{A}'")
    shot(ta, "ta-collected")
    formgrader(ta, "ta", f"/manage_submissions/{A}")
    for student in ("alice", "bob"):
        ta.locator("tr", has=ta.locator("td", has_text=student)).locator(".glyphicon-flash").click()
        ok(ta, expect, f"Successfully autograded '{A}' for student '{student}'")
    shot(ta, "ta-autograded")
    formgrader(ta, "ta")
    row = ta.locator("tr", has=ta.locator("a", has_text=A))
    row.locator(".glyphicon-comment").click()
    ok(ta, expect, f"Successfully generated feedback of '{A}'")
    row.locator(".glyphicon-envelope").click()
    ok(ta, expect, f"Successfully released feedback of '{A}'")
    shot(ta, "ta-feedback-released")

    pages = {}
    for student, page in students.items():
        menu(page, "Nbgrader", "Assignment List")
        page.locator("#submitted_assignments_list .list_item", has_text=A).get_by_role(
            "button", name="Fetch Feedback").click()
        link = page.locator("#submitted_assignments_list").get_by_text("(view feedback)")
        expect(link).to_be_visible(timeout=SPAWN_MS)
        (feedback,) = sh(student, f"ls {A}/feedback/*/{A}.html").stdout.splitlines()
        page.goto(hub + f"user/{student}/files/{quote(feedback)}")
        expect(page.locator("body")).to_contain_text("Score")
        shot(page, f"{student}-feedback")
        pages[student] = page.locator("body").inner_text()

    hub_grades = simulate_class.read_gradebook(COURSE)
    serial = serial_grades(tmp_path, submissions)
    for student in ("alice", "bob"):
        assert hub_grades[(student, A)] == serial[(student, A)], student
        grades = hub_grades[(student, A)].values()
        total = f"Score: {sum(g.score for g in grades)} / {sum(g.max_score for g in grades)}"
        assert total in pages[student], (student, total)  # the page each fetched is their own
    assert hub_grades[("alice", A)] != hub_grades[("bob", A)]  # Bob's mistake cost him points
