"""The class report's HTML page (``python -m grader.insight --html``, issue 39) opened in Chromium, offline.

A course directory whose gradebook holds a class of twelve made by hand (``grader.findings.record``,
no grading): each of three graded cells passed by some, failed by others with named mistakes, a
timeout, a memory kill, a lost kernel and a voided exercise. The page must load with every request
other than its own file refused, show every figure decoded, name the mistakes with the registry's
text, fit the window's width, and is saved as build/browser-screenshots/insight-report.png.
"""
import os

import pytest

from grader import findings, insight
from tools import simulate_class
from tutor.mistakes import MISTAKES

pytestmark = pytest.mark.browser

# (student, per cell: kind or a mistake id) for cells attn (2 points), mha (3 points), pe (1 point)
CLASS = [
    ("ada", "passed", "passed", "passed"), ("ben", "no_scale", "no_scale", "passed"),
    ("cai", "no_scale", "merge_heads_no_transpose", "pe_sin_cos_swapped"), ("dan", "passed", "timeout", "passed"),
    ("eva", "passed", "merge_heads_no_transpose", "passed"), ("fei", "memory", "memory", "memory"),
    ("gus", "passed", "passed", "pe_sin_cos_swapped"), ("hui", "not_implemented", "not_implemented", "passed"),
    ("ivy", "passed", "kernel_lost", "kernel_lost"), ("jun", "voided", "passed", "passed"),
    ("kim", "mask_inverted", "passed", "passed"), ("lin", "passed", "passed", "passed"),
]
CELLS = [("sdpa_matches_reference", 2.0), ("mha_matches_reference", 3.0), ("pe_matches_reference", 1.0)]


def _findings(student, outcomes):
    rows = []
    for position, ((grade_id, points), outcome) in enumerate(zip(CELLS, outcomes)):
        kind = outcome if outcome in ("passed", "not_implemented", "timeout", "memory", "kernel_lost", "voided") \
            else "failed"
        mistakes = (outcome,) if kind == "failed" else ()
        rows.append(findings.Finding(student, "01_attention", "01_attention", grade_id, position, kind == "passed",
                                     kind, mistakes, "无掩码 / no mask, B=2 H=2 T_q=3 T_k=5" if mistakes else None,
                                     points if kind == "passed" else 0.0, points))
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report page of the class above, written by the command line in its course directory."""
    from nbgrader.api import Gradebook

    course = tmp_path_factory.mktemp("insight_course")
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    os.environ["PATH"] = f"{simulate_class.BIN}{os.pathsep}{os.environ['PATH']}"  # nbgrader runs alembic
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment("01_attention")
        for student, *outcomes in CLASS:
            gradebook.add_student(student)
            findings.record(gradebook.engine, student, "01_attention", "01_attention", _findings(student, outcomes))
    cwd = os.getcwd()
    os.chdir(course)
    try:
        assert insight.main(["--html", "class_report.html"]) == 0
    finally:
        os.chdir(cwd)
    return course / "class_report.html"


def test_the_report_opens_offline_with_every_figure(browser, expect, shots, report):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1, locale="zh-CN")
    refused = []

    def only_the_file(route):
        if route.request.url == report.as_uri():
            route.continue_()
        else:
            refused.append(route.request.url[:80])
            route.abort()

    context.route("**/*", only_the_file)
    page = context.new_page()
    try:
        page.goto(report.as_uri())
        expect(page.locator("h1")).to_have_text("课堂报告 / Class report")
        images = page.locator("img")
        assert images.count() == 1 + 1 + 2 * len(CELLS)  # overview, pass rates; per cell a histogram and mistakes
        decoded = page.evaluate("[...document.images].map(i => i.complete && i.naturalWidth > 0)")
        assert all(decoded), decoded
        text = page.locator("body").inner_text()
        for mid in ("no_scale", "merge_heads_no_transpose", "pe_sin_cos_swapped", "mask_inverted"):
            assert MISTAKES[mid][0] in text and MISTAKES[mid][1] in text, mid
        assert "超时 / timed out: dan" in text and "审计作废 / voided by the audit: jun" in text
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"the page is {overflow} px wider than the window"
        assert not refused, refused
        page.screenshot(path=str(shots.dir / "insight-report.png"), full_page=True)  # the whole page, not the window
    finally:
        context.close()
