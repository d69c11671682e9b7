"""The web edition in a real browser: `make site`, then `make site-serve` on a free port, read by
Playwright in Debian's Chromium with every request that leaves the server refused (the site must
work offline). Every page of every language loads with its links, images and math; the language
switch lands on the same chapter; Chinese and English text have real fonts; code has copy buttons.
Screenshots: build/browser-screenshots/site-*.png.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_lab import fonts_for, installed_families

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)  # the environment running pytest: `make test-browser` uses .venv

BUILD_S = 900  # a cold build of both languages on a loaded 2-core machine
CHAPTER = "01_attention"  # math, figures, exercises and provided code
MAKE = ["make", "-o", f"{VENV}/.installed", "-o", f"{VENV}/.site-installed", f"VENV={VENV}"]


@pytest.fixture(scope="module")
def site(browser):
    """`make site` (its output kept in the report), then `make site-serve` on a free port; the base
    URL and the languages built."""
    pytest.importorskip("myst_nb", reason="the site's packages are not installed: `make site` installs "
                                          "requirements-site.txt (make test-browser does it)")
    start = time.perf_counter()
    proc = subprocess.run([*MAKE, "site"], cwd=REPO, capture_output=True, text=True, timeout=BUILD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"make site: {time.perf_counter() - start:.1f} s\n{proc.stdout}")
    languages = sorted(p.parent.name for p in (REPO / "build" / "site").glob("*/index.html"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([*MAKE, "site-serve", f"SITE_PORT={port}"], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + BUILD_S
        while True:
            assert server.poll() is None, f"`make site-serve` exited with {server.returncode}"
            try:
                urllib.request.urlopen(base + "/", timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"`make site-serve` did not serve on port {port}"
                time.sleep(0.5)
        yield base, languages
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


@pytest.fixture
def tab(browser, site):
    """A HiDPI tab that may reach only the site's server: any other request is refused and listed."""
    base, _ = site
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=2)
    context.set_default_timeout(30_000)
    context.outside = []

    def only_the_site(route):
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            context.outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_site)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    yield page
    assert not context.outside, f"the site asked for something outside it: {context.outside[:5]}"
    context.close()


def wait_for_math(page):
    """MathJax has typeset the page (it loads from the site's own _static/)."""
    page.wait_for_function("() => !document.querySelector('.math') || "
                           "(window.MathJax && MathJax.startup && MathJax.startup.promise && true)")
    page.evaluate("() => window.MathJax && MathJax.startup.promise")


def internal_links(page, base):
    """Absolute URLs (no fragment) of every link on the page that stays on the site."""
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    return {h.split("#")[0] for h in hrefs if h.startswith(base + "/")}


def test_every_page_loads_with_links_images_math_and_the_note(tab, site, shots):
    base, languages = site
    assert "zh" in languages, languages
    tab.goto(base + "/")
    tab.wait_for_url(re.compile(r"/zh/index\.html$"))  # the landing page sends a reader to the first language
    chapters = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
    checked_links, counts = set(), {}
    for lang in languages:
        todo, seen = [f"{base}/{lang}/index.html"], set()
        while todo:
            url = todo.pop()
            if url in seen:
                continue
            seen.add(url)
            tab.errors.clear()
            response = tab.goto(url)
            assert response.ok, f"{url}: HTTP {response.status}"
            wait_for_math(tab)
            assert not tab.errors, f"{url}: errors in the page: {tab.errors}"
            if url.endswith(("/search.html", "/genindex.html")):
                continue
            broken = tab.eval_on_selector_all("img", "imgs => imgs.filter(i => !i.complete || !i.naturalWidth)"
                                                     ".map(i => i.src)")
            assert not broken, f"{url}: images that did not load: {broken}"
            math = tab.locator(".math")
            assert math.count() == tab.locator(".math mjx-container").count(), f"{url}: math left untypeset"
            assert tab.locator("mjx-merror").count() == 0, f"{url}: MathJax could not read a formula"
            note = tab.locator(".admonition.tip").first
            assert "make lab" in note.text_content() and "git clone" in note.text_content(), f"{url}: no run-it note"
            links = internal_links(tab, base)
            for link in links - checked_links:
                checked_links.add(link)
                status = tab.request.get(link).status
                assert status == 200, f"{url} links to {link}: HTTP {status}"
            todo += [link for link in links if link.startswith(f"{base}/{lang}/") and link.endswith(".html")]
        pages = {u.rsplit("/", 1)[-1][:-5] for u in seen}
        assert set(chapters) | {"index"} <= pages, f"{lang}: pages not reached from the sidebar: " \
                                                    f"{sorted(set(chapters) - pages)}"
        counts[lang] = len(pages)
    print(f"pages per language (with search and index): {counts}; {len(checked_links)} links checked")


def test_chapter_has_figures_math_and_copy_buttons(tab, site, shots):
    base, languages = site
    for lang in languages:
        tab.goto(f"{base}/{lang}/{CHAPTER}.html")
        wait_for_math(tab)
        assert tab.locator(".math mjx-container").count() > 10, "chapter 01's formulas are not typeset"
        figures = tab.locator(".cell_output img")
        assert figures.count() >= 4, f"{lang}: {figures.count()} figures on chapter 01"
        sizes = figures.first.evaluate("i => [i.naturalWidth, i.clientWidth]")
        assert sizes[0] >= 1.9 * sizes[1] > 0, f"{lang}: the figure is not a sharp retina PNG: {sizes}"
        code_cells = tab.locator(".cell_input pre")
        assert tab.locator(".cell_input button.copybtn").count() == code_cells.count() > 0
        assert tab.locator(".cell_output button.copybtn").count() == 0, "outputs are not code to copy"
        shots(tab, f"site-{lang}-1-chapter-top")
        figures.first.scroll_into_view_if_needed()
        shots(tab, f"site-{lang}-2-figure")
        tab.locator(".math mjx-container").nth(3).scroll_into_view_if_needed()
        shots(tab, f"site-{lang}-3-math")


@pytest.mark.parametrize("lang, query", [("zh", "softmax"), ("zh", "注意力"), ("en", "softmax")])
def test_search_finds_the_chapter(tab, site, lang, query):
    """Sphinx's search page, in both languages (Chinese words are split by jieba when indexed)."""
    base, languages = site
    if lang not in languages:
        pytest.skip(f"{lang} is not built")
    tab.goto(f"{base}/{lang}/search.html?q={query}")
    results = tab.locator("#search-results li a").filter(has_text=re.compile(r"^01"))
    results.first.wait_for()
    assert not tab.errors, tab.errors


def test_copy_button_copies_the_code(browser, tab, site):
    base, _ = site
    tab.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    tab.goto(f"{base}/zh/{CHAPTER}.html")
    cell = tab.locator(".cell_input").nth(1)
    cell.hover()
    cell.locator("button.copybtn").click()
    copied = tab.evaluate("() => navigator.clipboard.readText()")
    assert copied.strip() and copied.strip() == cell.locator("pre").text_content().strip()


def test_language_switch_lands_on_the_same_chapter(tab, site, shots):
    base, languages = site
    tab.goto(f"{base}/zh/{CHAPTER}.html")
    switch = tab.locator(".course-language-switch")
    if languages == ["zh"]:
        assert switch.count() == 0, "a language switch with one language built"
        pytest.skip("only zh is built (no notebooks/en/ yet): no switch to test")
    for lang in languages:
        for other in (o for o in languages if o != lang):
            tab.goto(f"{base}/{lang}/{CHAPTER}.html")
            tab.locator(f".course-language-switch a[hreflang='{other}']").first.click()
            tab.wait_for_url(f"{base}/{other}/{CHAPTER}.html")
            assert tab.locator("html").get_attribute("lang").startswith(other[:2])
    if "en" in languages:  # the theme's own words (search, contents) in the page's language too
        tab.goto(f"{base}/en/{CHAPTER}.html")
        chrome = tab.locator(".bd-header, .bd-sidebar-secondary").all_text_contents()
        assert not re.search(r"[\u4e00-\u9fff]", " ".join(chrome)), f"Chinese in the English page's chrome: {chrome}"
    shots(tab, "site-language-switched")


def test_chinese_and_english_text_have_fonts(tab, site, shots):
    base, languages = site
    cjk = installed_families(":lang=zh")
    if not cjk:
        pytest.skip("no CJK font installed: `apt-get install fonts-noto-cjk`")
    tab.goto(f"{base}/zh/{CHAPTER}.html")
    title = tab.locator("article h1").first
    han = len(re.findall(r"[\u4e00-\u9fff]", title.text_content()))
    used = fonts_for(tab, title)
    assert han and sum(n for family, n in used.items() if family in cjk) >= han, (
        f"the {han} Chinese characters of the title were drawn with {used}, none a CJK font")
    latin = installed_families(":lang=en")
    for lang in languages:
        tab.goto(f"{base}/{lang}/{CHAPTER}.html")
        text = tab.locator("article p:not(.admonition-title)").filter(has_text=re.compile("[A-Za-z]{4}")).first
        used = fonts_for(tab, text)
        assert used and set(used) <= latin | cjk, f"{lang}: text drawn with {used}, not installed fonts"
        shots(text, f"site-{lang}-fonts")
