"""The web edition's pages as tools/make_site.py stages them for Sphinx (Sphinx itself is not run
here: tests/browser/test_site.py builds and reads the site): every chapter in every language
built, the sidebar's table of contents in teaching order, the run-it-locally note, the answer
keys' outputs and figures, and nothing a learner should write or cannot see: no solution, no
hidden test, no provided reference code, no output that prints reference code."""
import dataclasses
import re

import nbformat
import pytest
from test_leaks import FORBIDDEN_ANYWHERE, FORBIDDEN_IN_CODE, exercise_names, snippets_in, solution_snippets

from pipeline_helpers import LESSONS, ROOT, read_nb
from tools import make_site
from tools.paths import ANSWER_KEYS

EVERY_SOLUTION = {s for name in LESSONS for obj in exercise_names(name) for s in solution_snippets(obj)}
SOLUTION_LINES = {line for snippet in EVERY_SOLUTION for line in snippet}


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """{language code: folder} of the Sphinx sources of every language whose notebooks exist."""
    languages = make_site.available_languages(list(make_site.LANGUAGES))
    folders = {}
    for lang in languages:
        folders[lang.code] = tmp_path_factory.mktemp(lang.code)
        make_site.stage(lang, languages, folders[lang.code])
    return folders


def pages(staged):
    return [(code, name, read_nb(folder / f"{name}.ipynb")) for code, folder in staged.items() for name in LESSONS]


def answer_key(code, name):
    """The answer key a page of language ``code`` takes its outputs from: its own edition's."""
    return ANSWER_KEYS / ("en" if code == "en" else "") / f"{name}.ipynb"


def shown(page):
    """Snippets of what the page renders: code not removed, and every output's text."""
    code = [c.source for c in page.cells if c.cell_type == "code"
            and make_site.PROVIDED_TAG not in c.metadata.get("tags", [])]
    outputs = [make_site.output_text(o) for c in page.cells if c.cell_type == "code" for o in c.outputs]
    return snippets_in(code + outputs)


def test_chinese_is_always_built(staged):
    assert "zh" in staged


def test_sidebar_lists_every_chapter_in_teaching_order(staged):
    for code, folder in staged.items():
        index = (folder / "index.md").read_text(encoding="utf-8")
        toctree = re.search(r"```\{toctree\}\n(.*?)```", index, re.S).group(1)
        entries = [line for line in toctree.splitlines() if line and not line.startswith(":")]
        assert entries == LESSONS, f"{code}: the sidebar lists {entries}"
        assert sorted(p.stem for p in folder.glob("*.ipynb")) == LESSONS


def test_every_page_has_a_title_and_the_run_locally_note(staged):
    for code, name, page in pages(staged):
        header = next(c.source for c in page.cells if c.cell_type == "markdown")
        title, note = header.split("\n")[0], header.split(":::")[1]
        assert title.startswith(f"# {name[:2]}"), f"{code}/{name}: the page's title is {title!r}"
        assert "git clone" in note and "make lab" in note and f"{name}.ipynb" in note, f"{code}/{name}: {note}"


def test_pages_show_the_answer_keys_outputs_and_figures(staged):
    """A cell whose code the page shows as the answer key ran it has the key's outputs, figures as
    PNG; an output is left out only when it prints reference code (a drill's reveal)."""
    for code, name, page in pages(staged):
        key = {c.id: c for c in read_nb(answer_key(code, name)).cells}
        for cell in page.cells:
            if cell.cell_type != "code" or cell.source != key[cell.id].source:
                continue
            solved = key[cell.id].outputs
            assert cell.outputs == [o for o in solved if o in cell.outputs], f"{code}/{name}: cell {cell.id}"
            for dropped in (o for o in solved if o not in cell.outputs):
                text = make_site.output_text(dropped)
                assert any(line in text for line in SOLUTION_LINES), f"{code}/{name}: {cell.id} lost {text[:200]!r}"
        figures = sum("image/png" in o.get("data", {}) for c in page.cells if c.cell_type == "code" for o in c.outputs)
        stated = sum("<Figure size" in o.get("data", {}).get("text/plain", "") for c in key.values()
                     if c.cell_type == "code" for o in c.outputs)
        assert figures == stated, f"{code}/{name}: {figures} PNG figures on the page, {stated} in the answer key"


def test_no_page_shows_a_solution_or_reference_code(staged):
    """What the site adds to the self-study notebook (outputs, provided cells) holds no line of any
    chapter's reference answers; the answer keys do, so the filter has work to do."""
    in_keys = 0
    for code, name, page in pages(staged):
        notebook = read_nb(make_site.LANGUAGES[code].notebooks / f"{name}.ipynb")
        openly = snippets_in(c.source for c in notebook.cells if c.cell_type == "code"
                             and not c.metadata.get("jupyter", {}).get("source_hidden"))
        leaked = sorted((shown(page) & EVERY_SOLUTION) - openly)
        assert not leaked, f"{code}/{name}: reference code on the page: {leaked[:3]}"
        key = read_nb(answer_key(code, name))
        in_keys += bool(snippets_in(make_site.output_text(o) for c in key.cells if c.cell_type == "code"
                                    for o in c.outputs) & EVERY_SOLUTION)
    assert in_keys, "no answer key prints reference code any more: the output filter is untested"


def test_no_page_carries_a_hidden_test_or_solution_marker(staged):
    for code, name, page in pages(staged):
        text = nbformat.writes(page)
        code_text = "\n".join(c.source for c in page.cells if c.cell_type == "code")
        for patterns, where in ((FORBIDDEN_ANYWHERE, text), (FORBIDDEN_IN_CODE, code_text)):
            for pattern, what in patterns:
                assert not pattern.search(where), f"{code}/{name}: {what} on the page"


def test_a_half_translated_language_is_an_error(tmp_path, monkeypatch):
    (tmp_path / f"{LESSONS[0]}.ipynb").write_text("{}", encoding="utf-8")
    monkeypatch.setitem(make_site.LANGUAGES, "en", dataclasses.replace(make_site.LANGUAGES["en"], notebooks=tmp_path))
    with pytest.raises(make_site.SiteError, match=LESSONS[1]):
        make_site.available_languages(["zh", "en"])


def test_site_packages_are_pinned_and_make_installs_them():
    pins = [line for line in (ROOT / "requirements-site.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.]+", p) for p in pins), pins
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements-site.txt" in makefile and re.search(r"^site-serve: site$", makefile, re.M)
