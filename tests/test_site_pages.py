"""The web edition's pages as tools/make_site.py stages them for Sphinx (Sphinx itself is not run
here: tests/browser/test_site.py builds and reads the site): every chapter in every language
built, the sidebar's table of contents in teaching order, the run-it-locally note, the answer
keys' outputs and figures, and nothing a learner should write or cannot see: no solution, no
hidden test, no provided reference code, no output that prints reference code."""
import dataclasses
import re

import nbformat
import pytest

from pipeline_helpers import (
    FORBIDDEN_ANYWHERE,
    FORBIDDEN_IN_CODE,
    LESSONS,
    ROOT,
    exercise_names,
    read_nb,
    snippets_in,
    solution_snippets,
)
from tools import make_site
from tools.paths import ANSWER_KEYS

EVERY_SOLUTION = {s for name in LESSONS for obj in exercise_names(name) for s in solution_snippets(obj)}
SOLUTION_LINES = {line for snippet in EVERY_SOLUTION for line in snippet}


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """{language code: folder} of the Sphinx sources of every language whose notebooks exist."""
    languages = make_site.available_languages(list(make_site.LANGUAGES))
    folders, found = {}, make_site.settings() | {"repository": ""}  # the setting as committed: empty
    for lang in languages:
        folders[lang.code] = tmp_path_factory.mktemp(lang.code)
        make_site.stage(lang, languages, folders[lang.code], found)
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
        assert make_site.LANGUAGES[code].lab_command in note and f"{name}.ipynb" in note, f"{code}/{name}: {note}"
        # no repository address set: no clone command and no stand-in address, but how to get the course
        assert "git clone" not in note and "<" not in note and make_site.LANGUAGES[code].no_repository in note


@pytest.mark.parametrize("repository", ["", "https://example.org/course.git"])
def test_the_repository_setting_reaches_every_page_or_none(repository, tmp_path):
    """With the setting empty no page names an address (no `git clone`, no citation URL, no header or footer
    link); set, every page's note clones it, the citation and the header and footer link to it."""
    import jinja2

    lang = make_site.LANGUAGES["en"]
    found = make_site.settings() | {"repository": repository}
    make_site.stage(lang, [lang], tmp_path, found)
    notes = [(tmp_path / "index.md").read_text(encoding="utf-8")] + [
        next(c.source for c in read_nb(tmp_path / f"{name}.ipynb").cells if c.cell_type == "markdown")
        for name in LESSONS]
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path / "_templates"))
    context = {"course_repository": repository, "course_footer": lang.footer, "course_authors": found["authors"],
               "root_doc": "index", "pathto": lambda name, *flags: name}
    header, footer = (templates.get_template(t).render(context) for t in ("repository-button.html",
                                                                           "course-footer.html"))
    assert "LICENSE.txt" in footer and (tmp_path / "extra" / "LICENSE.txt").exists()
    if repository:
        assert all(f"git clone {repository} shousi-transformer" in note for note in notes)
        assert f"\\url{{{repository}}}" in notes[0]
        assert f'href="{repository}"' in header and f'href="{repository}"' in footer
    else:
        assert not any("git clone" in note or "://" in note.split(":::")[1] for note in notes)
        assert "howpublished" not in notes[0] and "href" not in header and "course-repository" not in footer


def test_make_site_names_the_empty_setting_and_where_it_is(monkeypatch, tmp_path):
    monkeypatch.delenv("SITE_REPOSITORY", raising=False)
    settings = tmp_path / "settings.toml"
    settings.write_text('repository = ""\nyear = 2026\n', encoding="utf-8")
    monkeypatch.setattr(make_site, "SETTINGS", settings)
    monkeypatch.setattr(make_site.subprocess, "run", lambda *a, **k: dataclasses.make_dataclass(
        "Proc", ["returncode", "stdout"])(1, ""))  # no origin remote
    found = make_site.settings()
    assert found["repository"] == "" and f"`repository` in {settings}" in found["repository_from"]


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


def test_every_page_says_how_to_run_its_own_edition(staged):
    for code, name, page in pages(staged):
        note = next(c.source for c in page.cells if c.cell_type == "markdown").split(":::")[1]
        command = make_site.LANGUAGES[code].lab_command
        assert f"\n{command}\n" in note, f"{code}/{name}: the note does not say `{command}`"
        assert ("COURSE_LANG=en" in note) == (code == "en"), f"{code}/{name}: {note}"


def test_every_figure_has_its_title_as_alt_text_and_a_numbered_caption(staged):
    """The title comes from the cell's call of a course figure function (its title= or the default)."""
    for code, name, page in pages(staged):
        number = 0
        for cell in (c for c in page.cells if c.cell_type == "code"):
            drawn = sum("image/png" in o.get("data", {}) for o in cell.outputs)
            figures = cell.metadata.get("course_figures", [])
            assert len(figures) == drawn, f"{code}/{name}: cell {cell.id} draws {drawn}, describes {len(figures)}"
            for figure in figures:
                number += 1
                assert len(figure["alt"]) >= 8 and not figure["alt"].endswith(".png"), figure
                assert figure["caption"] == make_site.LANGUAGES[code].figure.format(n=number, title=figure["alt"])


def test_figure_titles_are_read_from_the_call_or_the_functions_default():
    defaults = make_site.plot_titles()
    assert defaults["plot_attention"] == "Attention weights"
    source = ('plot_attention(w, title="Given")\nplot_heads(w)\nplot_mask_row(m, ["a"], title=f"w={w}")\n'
              'ax.plot(x)\n')
    assert make_site.figure_titles(source, defaults) == ["Given", defaults["plot_heads"], "w=…"]


def test_both_editions_have_the_same_section_anchors(staged):
    """The language switch keeps the section: the anchor of each heading is made of its cell's id, which
    both editions share, so every anchor of a page exists in the other edition's page."""
    if len(staged) < 2:
        pytest.skip("one language built")
    anchor = re.compile(r"^\((sec-[\w-]+)\)=$", re.M)
    for name in LESSONS:
        found = {code: [a for c in read_nb(folder / f"{name}.ipynb").cells if c.cell_type == "markdown"
                        for a in anchor.findall(c.source)] for code, folder in staged.items()}
        zh, en = found["zh"], found["en"]
        assert zh and zh == en, f"{name}: anchors differ: {sorted(set(zh) ^ set(en))[:5]}"
        assert len(set(zh)) == len(zh), f"{name}: an anchor twice"


def test_section_anchors_skip_fenced_code():
    source = "## A\n\n```python\n# not a heading\n```\n\n### B\n"
    marked = make_site.add_section_anchors(source, "03_cell_7")
    assert marked.count("(sec-03-cell-7-") == 2 and "(sec-03-cell-7-0)=\n\n## A" in marked
    assert "(sec-03-cell-7-1)=\n\n### B" in marked and "# not a heading" in marked


def test_the_download_button_ships_each_chapters_self_study_notebook(staged):
    for code, folder in staged.items():
        for name in LESSONS:
            shipped = folder / "extra" / "notebooks" / f"{name}.ipynb"
            original = make_site.LANGUAGES[code].notebooks / f"{name}.ipynb"
            assert shipped.read_bytes() == original.read_bytes(), f"{code}/{name}"


def test_the_landing_page_picks_the_browsers_language_falling_back_to_the_first():
    langs = [make_site.LANGUAGES["zh"], make_site.LANGUAGES["en"]]
    page = make_site.landing_page(langs)
    assert "navigator.languages" in page and 'const built = ["zh", "en"]' in page
    assert '<noscript><meta http-equiv="refresh" content="0; url=zh/index.html">' in page


def test_repository_comes_from_the_environment_then_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("SITE_REPOSITORY", "https://example.org/course.git")
    found = make_site.settings()
    assert (found["repository"], found["repository_from"]) == ("https://example.org/course.git", "from SITE_REPOSITORY")
    assert found["authors"] and isinstance(found["year"], int)
    note = make_site.run_locally_note(make_site.LANGUAGES["en"], "text", found["repository"])
    assert "git clone https://example.org/course.git shousi-transformer" in note
    monkeypatch.delenv("SITE_REPOSITORY")
    settings = tmp_path / "settings.toml"
    settings.write_text('repository = "https://example.org/set.git"\nyear = 2026\n', encoding="utf-8")
    monkeypatch.setattr(make_site, "SETTINGS", settings)
    assert make_site.settings()["repository"] == "https://example.org/set.git"


def test_a_stale_english_cell_is_one_warning_line(monkeypatch):
    """`make site` prints one line per markdown cell whose English is missing, fuzzy or stale."""
    lines = {LESSONS[0]: ["00: markdown cell 3 ('# x'): its English is marked fuzzy (the Chinese changed): ..."],
             LESSONS[1]: ["01: markdown cell 5 ('y') has no English: ...", "lessons/en/01.po: the entry 'z' matches "
                          "no markdown cell of the lesson: ..."]}
    monkeypatch.setattr(make_site.translate, "problems", lambda name: lines.get(name, []))
    warned = make_site.stale_translations(make_site.LANGUAGES["en"])
    assert warned == [f"site: en: warning: {lines[LESSONS[0]][0]}", f"site: en: warning: {lines[LESSONS[1]][0]}"]
    assert make_site.stale_translations(make_site.LANGUAGES["zh"]) == []
