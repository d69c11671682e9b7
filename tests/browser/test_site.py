"""The web edition in a real browser: `make site`, then `make site-serve` on a free port, read by
Playwright in Debian's Chromium with every request that leaves the server refused (the site must
work offline). Every page of every language loads with its links, images (real alt text) and math;
the language switch lands on the same chapter and section; Chinese and English text have real fonts;
code has copy buttons. On a phone (390×844) and a desktop (1,366×768), light and dark: the menu opens
and lists the chapters, search finds a term in each language, no page scrolls sideways (only code
scrolls, inside its box), the contents is not clipped.
Screenshots: build/browser-screenshots/site-*.png (site-phone-*, site-desktop-*).
"""
import json
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

from pipeline_helpers import fonts_for, installed_families
from tools import make_site

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)  # the environment running pytest: `make test-browser` uses .venv

BUILD_S = 900  # a cold build of both languages on a loaded 2-core machine
CHAPTER = "01_attention"  # math, figures, exercises and provided code
SIZES = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1366, "height": 768}}
LOOKS = [(size, scheme) for size in SIZES for scheme in ("light", "dark")]
SEARCH_TERMS = {"zh": "注意力", "en": "softmax"}
# Width the page may exceed the window by: none (a code block, an output, a table or a formula scrolls
# inside its own box, which does not widen the page).
OVERFLOW_JS = "() => document.scrollingElement.scrollWidth - window.innerWidth"
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


def open_tab(browser, base, viewport=None, scheme="light", locale="zh-CN"):
    """A HiDPI tab that may reach only the site's server: any other request is refused and listed."""
    context = browser.new_context(viewport=viewport or {"width": 1400, "height": 900}, device_scale_factor=2,
                                  color_scheme=scheme, locale=locale)
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
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error"
            and "favicon" not in (msg.location or {}).get("url", "") else None)
    return page


@pytest.fixture
def tab(browser, site):
    """A desktop tab (1,400 px) in light mode, in a Chinese-speaking browser."""
    page = open_tab(browser, site[0])
    yield page
    assert not page.context.outside, f"the site asked for something outside it: {page.context.outside[:5]}"
    page.context.close()


@pytest.fixture(params=LOOKS, ids=[f"{size}-{scheme}" for size, scheme in LOOKS])
def looked(request, browser, site):
    """A tab at phone or desktop size, in light or dark mode (the system's, which the site follows)."""
    size, scheme = request.param
    page = open_tab(browser, site[0], SIZES[size], scheme)
    page.size, page.scheme = size, scheme
    yield page
    assert not page.context.outside, f"the site asked for something outside it: {page.context.outside[:5]}"
    page.context.close()


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
    repository = make_site.settings()["repository"]
    tab.goto(base + "/")
    tab.wait_for_url(re.compile(r"/zh/index\.html$"))  # the landing page sends a Chinese browser to zh/
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
            alts = tab.eval_on_selector_all("img", "imgs => imgs.map(i => i.getAttribute('alt') || '')")
            bad = [a for a in alts if len(a) < 8 or re.search(r"\.(png|svg|jpe?g)\b|^[\w./-]+$|^image$", a)]
            assert not bad, f"{url}: images without real alt text: {bad}"
            captions = tab.locator(".cell_output figcaption").all_text_contents()
            assert len(captions) == tab.locator(".cell_output img").count(), f"{url}: a figure without caption"
            assert all(re.match(rf"\s*(Figure|图) {k}\b", c) for k, c in enumerate(captions, 1)), captions
            footer = tab.locator(".course-footer").text_content()
            assert "contributors" in footer and tab.locator(".course-footer a[href$='#cite']").count() == 1, footer
            math = tab.locator(".math")
            assert math.count() == tab.locator(".math mjx-container").count(), f"{url}: math left untypeset"
            assert tab.locator("mjx-merror").count() == 0, f"{url}: MathJax could not read a formula"
            note = tab.locator(".admonition.tip").first.text_content()
            assert "make lab" in note, f"{url}: no run-it note"
            # the repository's address the build used (tools/site/settings.toml), or none and no stand-in
            assert (f"git clone {repository} " in note) if repository else ("git clone" not in note), note
            assert tab.locator(".course-footer a[href$='LICENSE.txt']").count() == 1, footer
            assert ("make lab COURSE_LANG=en" in note) == (lang == "en"), f"{url}: not this edition's command: {note}"
            if lang != "zh":  # every run of Chinese outside code is marked as Chinese
                unmarked = tab.evaluate(UNMARKED_CHINESE_JS)
                assert not unmarked, f"{url}: Chinese without lang=zh: {unmarked[:5]}"
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


UNMARKED_CHINESE_JS = """() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!/[\u4e00-\u9fff]/.test(node.textContent) || el.closest('pre, script, style, .highlight, dialog')) continue;
    if (el.offsetParent === null && !el.closest('.bd-sidebar-secondary, .bd-sidebar-primary')) continue;
    if (!(el.closest('[lang]').getAttribute('lang') || '').startsWith('zh')) found.push(node.textContent.trim());
  }
  return found;
}"""


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
            visible(tab, f".course-language-switch a[hreflang='{other}']").click()
            tab.wait_for_url(re.compile(rf"/{other}/{CHAPTER}\.html(#sec-[\w-]+)?$"))  # a section: see below
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


# ------------------------------------------------------------------ phone and desktop, light and dark


def chapter_titles(lang):
    """The first line (# ...) of every chapter's notebook in ``lang``, without the leading '# '."""
    folder = REPO / "notebooks" / ("en" if lang == "en" else "")
    titles = []
    for path in sorted(folder.glob("*.ipynb")):
        first = next(c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown")
        source = "".join(first["source"])
        titles.append(next(line for line in source.splitlines() if line.startswith("# "))[2:].strip())
    return titles


def visible(page, selector):
    """The one element of ``selector`` that is on screen (the theme renders some buttons twice)."""
    shown = [el for el in page.locator(selector).all() if el.is_visible()]
    assert len(shown) == 1, f"{len(shown)} visible {selector!r}"
    return shown[0]


def test_the_site_follows_the_systems_colour_scheme(looked, site):
    base, _ = site
    looked.goto(f"{base}/zh/{CHAPTER}.html")
    looked.wait_for_function(f"() => document.documentElement.dataset.theme === '{looked.scheme}'")
    background = looked.evaluate("() => getComputedStyle(document.body).backgroundColor")
    channels = [int(c) for c in re.findall(r"\d+", background)[:3]]
    assert (sum(channels) / 3 < 128) == (looked.scheme == "dark"), f"{looked.scheme}: background {background}"


def test_menu_opens_and_lists_the_chapters(looked, site, shots):
    base, languages = site
    for lang in languages:
        looked.goto(f"{base}/{lang}/{CHAPTER}.html")
        if looked.size == "phone":  # the sidebar is hidden until ☰ opens it as a dialog
            assert not looked.locator("#pst-primary-sidebar").is_visible()
            visible(looked, ".primary-toggle").click()
            menu = looked.locator("#pst-primary-sidebar-modal")
            menu.wait_for(state="visible")
            assert looked.evaluate("() => document.getElementById('pst-primary-sidebar-modal').open")
        else:
            menu = looked.locator("#pst-primary-sidebar")
            assert menu.is_visible()
        text = re.sub(r"\s+", " ", menu.inner_text())
        missing = [t for t in chapter_titles(lang) if re.sub(r"\s+", " ", t) not in text]
        assert not missing, f"{lang}: the menu lacks {missing}"
        shots(looked, f"site-{looked.size}-{lang}-{looked.scheme}-menu")
        if looked.size == "phone":
            menu.get_by_role("link", name=re.compile(r"^02")).first.click()
            looked.wait_for_url(re.compile(r"/02_[a-z_]+\.html"))


def test_contents_opens_and_is_not_clipped(looked, site, shots):
    base, languages = site
    for lang in languages:
        looked.goto(f"{base}/{lang}/{CHAPTER}.html")
        wait_for_math(looked)
        if looked.size == "phone":
            visible(looked, ".secondary-toggle").click()
            contents = looked.locator("#pst-secondary-sidebar-modal")
            contents.wait_for(state="visible")
        else:
            contents = looked.locator("#pst-secondary-sidebar")
            assert contents.is_visible(), "no contents at desktop width"
        box = contents.bounding_box()
        width = looked.evaluate("() => window.innerWidth")
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, f"{lang}: the contents box {box}"
        clipped = contents.evaluate("""box => { const edge = box.getBoundingClientRect().right;
            return [...box.querySelectorAll('a')].filter(a => a.getBoundingClientRect().right > edge + 0.5
                || a.scrollWidth > a.clientWidth + 1).map(a => a.innerText) }""")
        assert not clipped, f"{lang}: contents entries cut at the right: {clipped[:5]}"
        assert contents.evaluate("box => box.scrollWidth <= box.clientWidth"), f"{lang}: the contents scrolls sideways"
        assert contents.locator("a").count() >= 8
        shots(looked, f"site-{looked.size}-{lang}-{looked.scheme}-contents")


def test_search_from_the_page_finds_a_term_in_each_language(looked, site, shots):
    """The search button (the sidebar's field on a desktop, the header's on a phone), the query, the results page; its
    words are the page's language and snippets show no LaTeX."""
    base, languages = site
    for lang in languages:
        looked.goto(f"{base}/{lang}/{CHAPTER}.html")
        visible(looked, ".search-button__button").click()  # the sidebar's field, a phone's header button
        field = looked.locator("#pst-search-dialog input[name=q]")
        field.wait_for(state="visible")
        field.fill(SEARCH_TERMS[lang])
        field.press("Enter")
        looked.wait_for_url(re.compile(rf"/{lang}/search\.html\?q="))
        looked.locator("#search-results li a").filter(has_text=re.compile(r"^01")).first.wait_for()
        summary = looked.locator("#search-results p.search-summary")
        looked.wait_for_function("() => /\\d/.test(document.querySelector('#search-results p.search-summary')"
                                 "?.innerText || '')")  # "found N pages": the search has finished
        status = summary.inner_text()
        assert bool(re.search(r"[\u4e00-\u9fff]", status)) == (lang == "zh"), f"{lang}: search says {status!r}"
        looked.wait_for_function("() => document.querySelectorAll('#search-results p.context').length > 2")
        snippets = looked.locator("#search-results p.context").all_inner_texts()
        tex = [s for s in snippets if re.search(r"\\[a-zA-Z]+|\\\(|\\\[", s)]
        assert not tex, f"{lang}: raw LaTeX in search snippets: {tex[:2]}"
        assert not looked.errors, looked.errors
        shots(looked, f"site-{looked.size}-{lang}-{looked.scheme}-search")


@pytest.mark.parametrize("size", list(SIZES))
def test_no_page_scrolls_sideways(browser, site, size, shots):
    """Every page of every language, light mode, then chapter 01 in dark: the page is never wider than
    the window (a heading's long code name wraps; code, outputs, tables and formulas scroll in their box)."""
    base, languages = site
    pages = [f"{lang}/{p.stem}.html" for lang in languages
             for p in sorted((REPO / "build" / "site" / lang).glob("*.html"))]
    for scheme, todo in (("light", pages), ("dark", [f"{lang}/{CHAPTER}.html" for lang in languages])):
        tab = open_tab(browser, base, SIZES[size], scheme)
        try:
            wide = {}
            for url in todo:
                tab.goto(f"{base}/{url}")
                wait_for_math(tab)
                excess = tab.evaluate(OVERFLOW_JS)
                if excess > 0:
                    wide[url] = excess
            assert not wide, f"{size}, {scheme}: pages wider than the window by (px): {wide}"
            tab.goto(f"{base}/en/{CHAPTER}.html")
            shots(tab, f"site-{size}-en-{scheme}-chapter")
        finally:
            tab.context.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_language_switch_keeps_the_section(browser, site, size, shots):
    """From a section in the address, and from a section merely scrolled to: the other edition opens
    at the same section (the same cell's heading)."""
    base, languages = site
    if len(languages) < 2:
        pytest.skip("one language built: no switch")
    tab = open_tab(browser, base, SIZES[size])
    try:
        for lang, other in ((languages[0], languages[1]), (languages[1], languages[0])):
            tab.goto(f"{base}/{lang}/{CHAPTER}.html")
            anchors = tab.eval_on_selector_all("article section[id^='sec-']", "s => s.map(x => x.id)")
            assert len(anchors) > 5, anchors
            target = anchors[4]
            tab.goto(f"{base}/{lang}/{CHAPTER}.html#{target}")
            visible(tab, f".course-language-switch a[hreflang='{other}']").click()
            tab.wait_for_url(f"{base}/{other}/{CHAPTER}.html#{target}")
            assert tab.locator(f"section#{target}").count() == 1
            tab.goto(f"{base}/{lang}/{CHAPTER}.html")  # no anchor: the section on screen
            tab.evaluate(f"() => document.getElementById('{anchors[6]}').scrollIntoView({{behavior: 'instant'}})")
            tab.wait_for_function(f"() => (top => top > -5 && top < innerHeight / 4)(document.getElementById("
                                  f"'{anchors[6]}').getBoundingClientRect().top)")
            # A tap where the reader is (Playwright's click() would first scroll the sticky header "into view").
            visible(tab, f".course-language-switch a[hreflang='{other}']").evaluate("a => a.click()")
            tab.wait_for_url(re.compile(rf"/{other}/{CHAPTER}\.html#sec-"))
            assert tab.url.endswith("#" + anchors[6]), f"{size}: {tab.url}, expected #{anchors[6]}"
        shots(tab, f"site-{size}-language-switched-section")
    finally:
        tab.context.close()


@pytest.mark.parametrize("locale, lang", [("zh-CN", "zh"), ("en-US", "en"), ("en-GB", "en"), ("fr-FR", "zh")])
def test_the_landing_page_picks_the_browsers_language(browser, site, locale, lang):
    base, languages = site
    if lang not in languages:
        pytest.skip(f"{lang} is not built")
    tab = open_tab(browser, base, locale=locale)
    try:
        tab.goto(base + "/")
        tab.wait_for_url(f"{base}/{lang}/index.html")
    finally:
        tab.context.close()


def test_download_button_gives_the_chapters_self_study_notebook(tab, site):
    base, languages = site
    for lang in languages:
        tab.goto(f"{base}/{lang}/{CHAPTER}.html")
        button = tab.locator("a.course-download")
        assert button.count() == 1 and button.get_attribute("download") == f"{CHAPTER}.ipynb"
        with tab.expect_download() as download:
            button.click()
        got = Path(download.value.path()).read_bytes()
        expected = REPO / "notebooks" / ("en" if lang == "en" else "") / f"{CHAPTER}.ipynb"
        assert got == expected.read_bytes(), f"{lang}: the download is not {expected.relative_to(REPO)}"
