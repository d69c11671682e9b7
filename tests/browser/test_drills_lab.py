"""The 手撕 drill bank's mock interview in JupyterLab (make lab, Chromium): a learner sees each
drill's timer, the verdict with the time taken, and the reference only after a pass."""
import re

import pytest

from pipeline_helpers import KERNEL_IDLE, RUN_S, menu, open_notebook
from tutor import drills, store

pytestmark = pytest.mark.browser
RIGHT_PAD_MASK = "def make_pad_mask(tokens, pad_id=0):\n    return (tokens != pad_id)[:, None, None, :]\n"


def test_mock_interview_shows_time_verdict_and_a_locked_reveal(page, lab, shots, expect):
    workspace = lab.course / "workspace"
    path = None
    for s in range(200):  # a draw that holds make_pad_mask, so the test can write one right answer
        candidate = drills.mock_interview(3, seed=s, folder=workspace)
        if "impl_make_pad_mask" in candidate.read_text(encoding="utf-8"):
            path = candidate
            break
        candidate.unlink()
    assert path is not None
    notebook = open_notebook(page, lab, path.relative_to(lab.root()).as_posix())
    expect(notebook.locator(".jp-MarkdownCell h1").first).to_contain_text("模拟面试")
    menu(page, "Run", "Run All Cells")
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    # by its input only: once revealed, the reference's source is in an output too
    stub = notebook.locator(".jp-Cell").filter(has=page.locator(".jp-InputArea", has_text="def make_pad_mask("))
    check = stub.locator("xpath=following-sibling::div[contains(@class, 'jp-CodeCell')][1]")
    reveal = stub.locator("xpath=following-sibling::div[contains(@class, 'jp-CodeCell')][2]")
    expect(check.locator(".jp-OutputArea")).to_contain_text("❌ make_pad_mask", timeout=RUN_S)
    expect(reveal.locator(".jp-OutputArea")).to_contain_text("🔒")
    shots(page, "drills-1-mock-interview-untouched")

    stub.scroll_into_view_if_needed()
    stub.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(RIGHT_PAD_MASK)
    for _ in range(3):  # the answer, its check, its reveal
        page.keyboard.press("Shift+Enter")
    expect(check.locator(".jp-OutputArea")).to_contain_text(re.compile(r"✅ make_pad_mask.*time taken \d+\.\d s", re.S),
                                                            timeout=RUN_S)
    expect(reveal.locator(".jp-OutputArea")).to_contain_text("📖 make_pad_mask", timeout=RUN_S)
    expect(reveal.locator(".jp-OutputArea")).to_contain_text("pad_mask_queries")
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    check.scroll_into_view_if_needed()
    shots(page, "drills-2-mock-interview-passed")
    assert '"make_pad_mask"' in (workspace / store.FILE).read_text(encoding="utf-8")


def test_mock_interview_from_a_new_cell_below_progress(page, lab, shots, expect):
    """Chapter 10's instructions work as written: select the progress cell, B for a new cell, run
    mock_interview() there (the cells of the chapter itself are read-only)."""
    before = set((lab.course / "workspace").glob("mock_interview_*.ipynb"))
    notebook = open_notebook(page, lab, lab.learner_notebook("10_drills.ipynb"))
    menu(page, "Run", "Run All Cells")  # the setup cell imports mock_interview
    page.locator(KERNEL_IDLE).wait_for(timeout=RUN_S)
    progress_cell = notebook.locator(".jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text="progress()"))
    progress_cell.scroll_into_view_if_needed()
    progress_cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.insert_text("mock_interview()")
    page.keyboard.press("Shift+Enter")
    new_cell = progress_cell.locator("xpath=following-sibling::div[contains(@class, 'jp-CodeCell')][1]")
    expect(new_cell.locator(".jp-OutputArea")).to_contain_text("🎲 模拟面试已生成", timeout=RUN_S)
    new_cell.scroll_into_view_if_needed()
    shots(page, "drills-0-mock-interview-from-a-new-cell")
    assert set((lab.course / "workspace").glob("mock_interview_*.ipynb")) - before
