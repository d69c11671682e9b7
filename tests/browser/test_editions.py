"""Each edition opens its own JupyterLab workspace (issue 38): `make lab COURSE_LANG=en` shows the English
workspace/en/ without the Chinese session's tabs, and no kernel starts before the learner opens a notebook.

JupyterLab keeps the open tabs in a workspace on the server and reopens them, each notebook with a kernel,
when the page loads. One checkout and one Jupyter configuration, as a learner has: `make lab`, a Chinese
notebook opened (its kernel starts, its tab is saved in the workspace), the server stopped; then
`make lab COURSE_LANG=en` (whose Formgrader is the English class's), then `make lab` again.
Screenshots: build/browser-screenshots/lab-edition-*.png.
"""
import json
import time
import urllib.request

import pytest
from conftest import make_lab, working_tree_copy

pytestmark = pytest.mark.browser

CHAPTER = "01_attention.ipynb"
KERNEL_IDLE = "#jp-main-statusbar >> text=/\\| Idle/"
SETTLE_S = 8  # after the page is up: long enough for a restored tab to have started its kernel


def api(lab, path):
    with urllib.request.urlopen(f"{lab.base}/{path}?token={lab.token}", timeout=10) as response:
        return json.load(response)


def open_default(browser, lab):
    """The page `make lab` opens (the server's default URL), once its file browser lists a chapter."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(f"{lab.base}/?token={lab.token}")
    page.locator(".jp-DirListing-item", has_text=CHAPTER).first.wait_for()
    return context, page


def open_tabs(page):
    """Labels of the main area's tabs."""
    return page.locator("#jp-main-dock-panel .lm-TabBar-tabLabel").all_inner_texts()


def running(lab):
    return {"kernels": api(lab, "api/kernels"), "sessions": api(lab, "api/sessions")}


def assert_fresh(browser, lab, edition, folder, shots):
    """The edition's workspace opens on ``folder``, with no notebook tab and nothing running."""
    context, page = open_default(browser, lab)
    try:
        assert f"/lab/workspaces/course-{edition}" in page.url, page.url
        crumbs = page.locator(".jp-BreadCrumbs").inner_text()
        assert crumbs.replace(" ", "").rstrip("/").endswith(folder), crumbs
        time.sleep(SETTLE_S)
        tabs = [t for t in open_tabs(page) if t.endswith(".ipynb")]
        assert not tabs and page.locator(".jp-NotebookPanel").count() == 0, f"{edition}: tabs restored: {tabs}"
        assert running(lab) == {"kernels": [], "sessions": []}, f"{edition}: started on its own: {running(lab)}"
        shots(page, f"lab-edition-{edition}-opened")
    finally:
        context.close()


def test_each_edition_opens_its_own_workspace_and_starts_no_kernel(browser, tmp_path, shots):
    working_tree_copy(tmp_path / "course")
    with make_lab(tmp_path) as lab:  # the Chinese edition: a learner opens chapter 01
        context, page = open_default(browser, lab)
        assert "/lab/workspaces/course-zh" in page.url, page.url
        page.locator(".jp-DirListing-item", has_text=CHAPTER).first.dblclick()
        page.locator(KERNEL_IDLE).wait_for(timeout=180_000)
        deadline = time.monotonic() + 60
        while CHAPTER not in json.dumps(api(lab, "lab/api/workspaces/course-zh")) and time.monotonic() < deadline:
            time.sleep(1)  # JupyterLab saves its layout to the server shortly after a change
        saved = json.dumps(api(lab, "lab/api/workspaces/course-zh"))
        assert f"workspace/{CHAPTER}" in saved, "the open notebook never reached the workspace: the test proves nothing"
        assert len(running(lab)["kernels"]) == 1
        shots(page, "lab-edition-zh-notebook-open")
        context.close()

    with make_lab(tmp_path, "COURSE_LANG=en") as lab:
        assert_fresh(browser, lab, "en", "workspace/en", shots)
        saved = api(lab, "lab/api/workspaces/course-zh")  # the Chinese workspace is still there, untouched
        assert f"workspace/{CHAPTER}" in json.dumps(saved)
        # and its Formgrader is the English class's (docs/INSTRUCTOR.md, "An English class"): en/source/
        names = sorted(a["name"] for a in api(lab, "formgrader/api/assignments"))
        assert names == sorted(p.name for p in (lab.course / "en" / "source").iterdir()), names
        assert (lab.course / "en" / "gradebook.db").exists() and not (lab.course / "gradebook.db").exists()

    with make_lab(tmp_path) as lab:  # back to Chinese: opened afresh as well
        assert_fresh(browser, lab, "zh", "workspace", shots)
