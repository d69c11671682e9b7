"""The course in a real browser: the learner's first chapter, fonts, formgrader, Validate and the
Assignment List, in JupyterLab started by `make lab` (see conftest.py). `make test-browser`.

Each scenario leaves screenshots in build/browser-screenshots/, named after its test.
"""
import io
import re

import numpy as np
import pytest
from PIL import Image

from pipeline_helpers import KERNEL_IDLE, NB, RUN_S, fonts_for, installed_families, menu, open_notebook
from tools import build
from tutor.mistakes import explain

pytestmark = pytest.mark.browser

CHAPTER = "01_attention"
NOTEBOOK = f"{CHAPTER}.ipynb"
WRONG_SOFTMAX = (  # the classic: no max subtracted, exp overflows for large inputs
    "def softmax(x, axis=-1):\n"
    "    e = np.exp(x)\n"
    "    return e / e.sum(axis=axis, keepdims=True)\n"
)
SERVER_TROUBLE = re.compile(r"^\[[EC] |Traceback \(most recent call last\)", re.M)


@pytest.fixture(autouse=True)
def quiet_server(browser, lab):  # browser first: without one, skip before starting a server
    """Every scenario leaves the server log free of errors (a 500 behind a page that looks fine)."""
    start = len(lab.log())
    yield
    new = lab.log()[start:]
    trouble = [line for line in new.splitlines() if SERVER_TROUBLE.search(line)]
    assert not trouble, "the server logged errors during this scenario:\n" + new[-4000:]


# ------------------------------------------------------------------ helpers


def cell_with(notebook, text):
    """The one cell whose source contains ``text``."""
    cell = notebook.locator(".jp-Cell").filter(has_text=text)
    assert cell.count() == 1, f"expected one cell containing {text!r}, found {cell.count()}"
    return cell


def run_cell(page, cell):
    """Select ``cell`` by its prompt and run it (Shift+Enter), as a learner would."""
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Shift+Enter")


def assert_figure(image, shots, name):
    """A rendered matplotlib figure: painted (not blank) and sharp on this HiDPI screen."""
    image.scroll_into_view_if_needed()
    natural_w, shown_w = image.evaluate("i => [i.naturalWidth, i.clientWidth]")
    pixels = np.asarray(Image.open(io.BytesIO(image.screenshot(path=str(shots.dir / f"{name}.png")))).convert("RGB"))
    inked = (pixels < 235).any(axis=-1).mean()
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    assert inked > 0.03 and colours > 30, f"{name}: the figure looks blank ({inked:.1%} inked, {colours} colours)"
    assert natural_w >= 1.9 * shown_w, (
        f"{name}: the PNG has {natural_w} px for {shown_w} CSS px: blurry on a HiDPI screen "
        "(tutor/plots/style.py turns on the retina format)")


# ------------------------------------------------------------------ the learner


def test_no_jupyter_news_prompt(page, lab, shots, expect):
    """A fresh browser is not asked about "official Jupyter news": make lab turns the announcements off."""
    open_notebook(page, lab, lab.learner_notebook(NOTEBOOK))
    page.wait_for_timeout(5000)  # when enabled, the question pops up within a second or two of the page
    expect(page.get_by_text(re.compile("Jupyter news"))).to_have_count(0)
    shots(page, "0-no-news-prompt")


def test_learner_runs_attention_to_first_stub(page, lab, shots, expect):
    """Markdown, MathJax and the ❌ line for an untouched stub; a wrong softmax gets its named mistake."""
    notebook = open_notebook(page, lab, lab.learner_notebook(NOTEBOOK))
    expect(notebook.locator(".jp-MarkdownCell h1").first).to_contain_text("01 缩放点积注意力")
    expect(notebook.locator(".jp-MarkdownCell table").first).to_contain_text("softmax_is_stable")
    section = cell_with(notebook, "注意力在做什么")
    expect(section.locator("mjx-container").first).to_be_attached()  # MathJax typeset the formula
    assert "$$" not in section.locator(".jp-RenderedMarkdown").text_content(), "raw TeX left in the page"
    shots(page, "1-learner-1-opened")

    menu(page, "Run", "Run All Cells")
    stub = cell_with(notebook, "def softmax(x, axis=-1):")
    check = stub.locator("xpath=following-sibling::div[contains(@class, 'jp-CodeCell')][1]")
    expect(check.locator(".jp-OutputArea")).to_contain_text(re.compile("❌ softmax.*not implemented", re.S),
                                                            timeout=RUN_S)
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    check.scroll_into_view_if_needed()
    shots(page, "1-learner-2-first-stub")

    stub.scroll_into_view_if_needed()
    stub.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(WRONG_SOFTMAX)
    page.keyboard.press("Shift+Enter")  # runs the stub, moves to the check cell
    page.keyboard.press("Shift+Enter")  # runs the check
    report = check.locator(".jp-OutputArea")
    expect(report).to_contain_text(explain("softmax_unstable"), timeout=RUN_S)
    expect(report).to_contain_text("❌ softmax")
    check.scroll_into_view_if_needed()
    shots(page, "1-learner-3-wrong-softmax")


def test_failed_cell_and_interrupt_each_get_one_line(page, lab, shots, expect):
    """A check after a solution cell that raised names the older definition it refuses to check; an
    interrupted check says so in one line, with no traceback through torch or the tutor."""
    notebook = open_notebook(page, lab, lab.learner_notebook(NOTEBOOK))
    menu(page, "Run", "Run All Cells")  # the setup cell's imports; the stubs' checks say "not implemented"
    stub = cell_with(notebook, "def softmax(x, axis=-1):")
    check = stub.locator("xpath=following-sibling::div[contains(@class, 'jp-CodeCell')][1]")
    report = check.locator(".jp-OutputArea")
    expect(report).to_contain_text("❌ softmax", timeout=RUN_S)
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)

    def run_stub_then_check(source):
        stub.scroll_into_view_if_needed()
        stub.locator(".cm-content").click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(source)
        page.keyboard.press("Shift+Enter")  # runs the stub, moves to the check cell
        page.wait_for_timeout(1000)
        page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)  # a cell that raised aborts the queued ones
        page.keyboard.press("Shift+Enter")  # runs the check

    run_stub_then_check(WRONG_SOFTMAX)
    expect(report).to_contain_text("❌ softmax", timeout=RUN_S)
    run_stub_then_check("def softmax(x, axis=-1):\n    return (x\n")  # a syntax error: the old softmax stays
    expect(report).to_contain_text(re.compile(r"\[\d+\] 运行出错.*older softmax", re.S), timeout=RUN_S)
    assert "Traceback" not in report.text_content()
    check.scroll_into_view_if_needed()
    shots(page, "1-learner-4-failed-cell")

    run_stub_then_check("def softmax(x, axis=-1):\n    while True:\n        pass\n")
    page.wait_for_timeout(3000)  # the check is now stuck in the learner's loop
    menu(page, "Kernel", "Interrupt Kernel")
    expect(report).to_contain_text("⏹️ softmax: 已中断 / interrupted", timeout=RUN_S)
    assert "module.py" not in report.text_content() and "Traceback" not in report.text_content()
    assert "could not go on" not in report.text_content(), "an interrupt is not a wrong return value"
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    check.scroll_into_view_if_needed()
    shots(page, "1-learner-5-interrupted")


def test_learner_figures_render(page, lab, shots):
    """The chapter's figures (they need no exercise) render as sharp, non-blank images."""
    notebook = open_notebook(page, lab, lab.learner_notebook(NOTEBOOK))
    run_cell(page, cell_with(notebook, "from tutor.plots import"))  # the setup cell
    for name, source in (("scaling", "plot_scaling_experiment(d_ks"), ("masks", "plot_mask_row([pad_mask")):
        cell = cell_with(notebook, source)
        run_cell(page, cell)
        image = cell.locator(".jp-OutputArea-output img")
        image.wait_for(timeout=RUN_S)
        assert_figure(image, shots, f"2-figure-{name}")
    shots(page, "2-figures-page")


def test_chinese_text_and_emoji_have_fonts(page, lab, shots):
    """Chinese text is drawn with a CJK font and ✅/❌ with a font that has them: no tofu boxes."""
    cjk = installed_families(":lang=zh")
    if not cjk:
        pytest.skip("no CJK font installed: `apt-get install fonts-noto-cjk` (Linux; see README)")
    notebook = open_notebook(page, lab, lab.learner_notebook(NOTEBOOK))
    title = notebook.locator(".jp-MarkdownCell h1").first
    han = len(re.findall(r"[\u4e00-\u9fff]", title.text_content()))
    used = fonts_for(page, title)
    assert sum(n for family, n in used.items() if family in cjk) >= han, (
        f"the {han} Chinese characters of the title were drawn with {used}, none of them a CJK font {sorted(cjk)}")
    shots(title, "3-fonts-chinese-title")

    marks = installed_families(":charset=2705 274c")
    if not marks:
        pytest.skip("no font has ✅/❌ (the checks' verdicts): `apt-get install fonts-noto-color-emoji`")
    howto = notebook.locator(".jp-MarkdownCell p").filter(has_text="✅/❌").first
    used = fonts_for(page, howto)
    assert sum(n for family, n in used.items() if family in marks) >= 2, (
        f"✅/❌ were drawn with {used}, none of them a font that has them {sorted(marks)}")
    shots(howto, "3-fonts-verdict-marks")


# ------------------------------------------------------------------ the instructor


def test_formgrader_lists_generates_and_previews(page, lab, shots, expect):
    """Formgrader lists every chapter, generates the student version of one, and previews it."""
    page.goto(lab.url())
    menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe[src*='formgrader']")
    names = sorted(p.name for p in (lab.course / "source").iterdir() if p.is_dir())
    assert names == build.lesson_names(), names
    for name in names:
        expect(frame.locator("td a", has_text=name).first).to_be_visible()
    expect(frame.locator("body")).not_to_contain_text("does not exist")  # e.g. the exchange
    shots(page, "4-formgrader-1-assignments")

    row = frame.locator("tr", has=frame.locator("a", has_text=CHAPTER))
    row.locator(".glyphicon-education").click()  # "Generate"
    modal = frame.locator(".modal:visible")
    expect(modal).to_contain_text(f"Successfully created the student version of '{CHAPTER}'", timeout=RUN_S)
    shots(page, "4-formgrader-2-generated")
    modal.locator("button", has_text="OK").click()

    row.locator(".glyphicon-search").click()  # "Preview": the file browser goes to release/<chapter>
    listing = page.locator(".jp-DirListing-item", has_text=NOTEBOOK)
    expect(page.locator(".jp-FileBrowser-crumbs")).to_contain_text(f"release/{CHAPTER}")
    listing.dblclick()
    student = page.locator(NB)
    stub = student.locator(".jp-Cell").filter(has_text="def softmax(x, axis=-1):")
    expect(stub).to_contain_text("NotImplementedError")
    expect(student).not_to_contain_text("BEGIN SOLUTION")
    stub.scroll_into_view_if_needed()
    shots(page, "4-formgrader-3-preview")


@pytest.mark.parametrize("which", ["unsolved", "solved"])
def test_validate_tells_the_truth(page, lab, shots, expect, which):
    """Validate fails an untouched learner notebook and passes a solved one (the answer key)."""
    path = (lab.learner_notebook(NOTEBOOK) if which == "unsolved"
            else (lab.course / "answer_keys" / NOTEBOOK).relative_to(lab.root()).as_posix())
    open_notebook(page, lab, path)
    page.locator(".jp-NotebookPanel:visible .jp-Toolbar").get_by_text("Validate", exact=True).click()
    message = page.locator(".jp-Dialog #validation-message")
    message.wait_for(timeout=RUN_S)
    shots(page, f"5-validate-{which}")
    if which == "unsolved":
        expect(message).to_have_class(re.compile("validation-failed"))
        expect(message).not_to_contain_text("Success")
    else:
        expect(message).to_have_class(re.compile("validation-success"))
        expect(message).to_contain_text("Success! Your notebook passes all the tests.")


# ------------------------------------------------------------------ the student


def test_student_assignment_list(page, lab, shots, expect):
    """As a student: the Assignment List loads its three sections without an error or exchange warning."""
    page.goto(lab.url())
    menu(page, "Nbgrader", "Assignment List")
    panel = page.locator("#assignments")
    for section in ("Released assignments", "Downloaded assignments", "Submitted assignments"):
        expect(panel).to_contain_text(section)
    for loading in ("released", "fetched", "submitted"):
        expect(panel.locator(f"#{loading}_assignments_list_loading")).to_be_hidden(timeout=RUN_S)
    shots(page, "6-student-assignment-list")
    text = panel.inner_text()
    assert not re.search(r"error|exchange directory|could not|unwritable", text, re.I), text


def test_released_chapter_reaches_the_student(page, lab, shots, expect):
    """Through the course-local exchange: the instructor releases a chapter, the student fetches it."""
    page.goto(lab.url())
    menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe[src*='formgrader']")
    frame.locator("tr", has=frame.locator("a", has_text=CHAPTER)).locator(".glyphicon-cloud-upload").click()
    modal = frame.locator(".modal:visible")
    expect(modal).to_contain_text(f"Successfully released '{CHAPTER}'", timeout=RUN_S)
    modal.locator("button", has_text="OK").click()

    menu(page, "Nbgrader", "Assignment List")
    offered = page.locator("#released_assignments_list .list_item", has_text=CHAPTER)
    offered.get_by_role("button", name="Fetch").click()
    expect(page.locator("#fetched_assignments_list")).to_contain_text(CHAPTER, timeout=RUN_S)
    shots(page, "7-student-fetched")
    assert not re.search(r"error|could not|unwritable", page.locator("#assignments").inner_text(), re.I)
