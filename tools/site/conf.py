"""Sphinx configuration of the web edition. tools/make_site.py copies this folder next to the pages
it stages, with site.json: this language and the languages built (docs/MAINTAINING.md, "The web
edition")."""
import json
import logging
import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

SITE = json.loads((Path(__file__).parent / "site.json").read_text(encoding="utf-8"))

project = html_title = SITE["title"]
author = SITE["authors"]
language = SITE["sphinx_language"]
root_doc = "index"
extensions = ["myst_nb", "sphinx_copybutton", "sphinx.ext.mathjax", "sphinx-mathjax-offline"]
exclude_patterns = ["_templates", "_static", "extra"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_extra_path = ["extra"]  # notebooks/<chapter>.ipynb (the download button's), LICENSE.txt, LICENSE-text.txt
html_css_files = ["course.css"]
html_js_files = ["course.js"]

# MyST-NB renders the outputs stored in the staged notebooks; it never runs a kernel.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

CHINESE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff01-\uff5e]+"
                     r"(?:[\s\u00b7]*[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff01-\uff5e]+)*")


def chinese_spans(text):
    """``text`` as HTML with each run of Chinese in <span lang="zh"> (on the English pages only)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text if SITE["language"] == "zh" else CHINESE.sub(lambda m: f'<span lang="zh">{m.group()}</span>', text)


html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "logo": {"text": chinese_spans(SITE["title"])},  # the sidebar's title
    "show_toc_level": 2,
    "use_download_button": False,  # the page's notebook (stubs and outputs) is not the course's own
    "use_fullscreen_button": False,
    "use_repository_button": False,
    # No top navbar (the search button is in the article header instead). pydata-sphinx-theme 0.20 draws its
    # own ☰ and contents buttons in that navbar, before the article header's, and binds its phone dialogs to
    # the first `.primary-toggle`/`.secondary-toggle` of the page (querySelector): at phone widths the visible
    # buttons did nothing (pydata-sphinx-theme #2451, sphinx-book-theme #988). No release fixes it: 0.24.0
    # binds the same way, and sphinx-book-theme 1.4.0, the newest, requires pydata-sphinx-theme==0.20.0.
    # Without a navbar only the article header's buttons are left, as sphinx-book-theme PR #1000 proposes.
    "navbar_persistent": [],
    "article_header_end": ["language-switch.html", "download-notebook.html", "repository-button.html",
                           "theme-switcher.html", "search-button.html", "toggle-secondary-sidebar.html"],
    # The footer: authors, repository, licences, citation (CITATION.cff, tools/site/settings.toml).
    "footer_content_items": ["course-footer.html"],
}
# The search field atop the sidebar at desktop widths; on a phone the article header's search button
# (sphinx-book-theme shows one or the other at 992 px).
html_sidebars = {"**": ["navbar-logo.html", "search-button-field.html", "sbt-sidebar-nav.html"]}
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None  # no build date: a rebuild of unchanged pages changes nothing
# In the configuration (not only read by language_links), so that Sphinx renders every page again
# when a language is added or removed.
html_context = {"course_language": SITE["language"], "course_languages_built": SITE["languages"],
                "course_chapters": SITE["chapters"], "course_download": SITE["download"],
                "course_footer": SITE["footer"], "course_repository": SITE["repository"],
                "default_mode": "auto"}  # dark mode follows the system (figures keep a white card, course.css)

# Chinese search: jieba splits the text into words for the index. Sphinx would load jieba's own
# dictionary a second time as a user dictionary (seconds on every build) unless told none.
html_search_options = {"dict": ""}
logging.getLogger("jieba").setLevel(logging.WARNING)  # not its "Building prefix dict ..." lines

# Copy buttons on the code a reader runs: code cells and shell blocks, not outputs.
copybutton_selector = "div.cell_input div.highlight pre, div.highlight-bash div.highlight pre"


def language_links(app, pagename, templatename, context, doctree):
    """``course_languages`` for _templates/language-switch.html: (code, label, href) of the same
    page in every language built; every language lives in a sibling folder of this one."""
    up = "../" * (pagename.count("/") + 1)
    target = app.builder.get_target_uri(pagename)
    context["course_languages"] = [(code, label, f"{up}{code}/{target}") for code, label in SITE["languages"]]
    context["course_authors"] = chinese_spans(SITE["authors"])


def chinese_in_template_words(app, pagename, templatename, context, doctree):
    """lang="zh" on the Chinese of words the theme's templates show on English pages: the sidebar's link
    home (sphinx-book-theme sets root_title) and the previous/next links' titles (HTML already)."""
    context["root_title"] = chinese_spans(SITE["title"])
    for key in ("prev", "next"):
        if SITE["language"] != "zh" and context.get(key) and context[key].get("title"):
            title = CHINESE.sub(lambda m: f'<span lang="zh">{m.group()}</span>', context[key]["title"])
            context[key] = {**context[key], "title": title}


NOT_PROSE = (nodes.literal_block, nodes.raw, nodes.math, nodes.math_block, nodes.comment, nodes.image)


class ChineseSpans(SphinxTransform):
    """English pages: each run of Chinese text becomes <span lang="zh"> (docutils writes a class
    ``language-zh`` as the lang attribute), so that browsers and screen readers read it as Chinese."""
    default_priority = 880

    def apply(self):
        if SITE["language"] == "zh":
            return
        for text in list(self.document.findall(nodes.Text)):
            parent = text.parent
            if (parent is None or not CHINESE.search(text) or isinstance(parent, NOT_PROSE)
                    or any(isinstance(a, NOT_PROSE) for a in _ancestors(parent))
                    or "language-zh" in parent.get("classes", [])):
                continue
            pieces, at = [], 0
            for match in CHINESE.finditer(text):
                if match.start() > at:
                    pieces.append(nodes.Text(text[at:match.start()]))
                pieces.append(nodes.inline(match.group(), match.group(), classes=["language-zh"]))
                at = match.end()
            if at < len(text):
                pieces.append(nodes.Text(text[at:]))
            parent.replace(text, pieces)


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


class FigureCaptions(SphinxTransform):
    """Each figure of a notebook output gets its alt text (the figure's title) and a numbered caption,
    from the cell's ``course_figures`` metadata (tools/make_site.py: publishable)."""
    default_priority = 870

    def apply(self):
        number = 0
        for cell in list(self.document.findall(nodes.container)):
            figures = cell.get("cell_metadata", {}).get("course_figures") if cell.get("nb_element") == "cell_code" \
                else None
            if not figures:
                continue
            images = [node for node in cell.findall(nodes.image) if not isinstance(node.parent, nodes.figure)]
            for image, figure in zip(images, figures, strict=False):
                image["alt"] = figure["alt"]
                caption = nodes.caption(figure["caption"], figure["caption"])
                number += 1
                wrapper = nodes.figure("", classes=["course-figure"], ids=[f"figure-{number}"])
                image.replace_self(wrapper)
                wrapper += [image, caption]


def setup(app):
    # Before the theme renders its header items to drop the empty ones (the switch would be one of them).
    app.connect("html-page-context", language_links, priority=400)
    app.connect("html-page-context", chinese_in_template_words, priority=900)  # after the theme's own
    app.add_transform(FigureCaptions)
    app.add_transform(ChineseSpans)
