"""Sphinx configuration of the web edition. tools/make_site.py copies this folder next to the pages
it stages, with site.json: this language and the languages built (docs/MAINTAINING.md, "The web
edition")."""
import json
import logging
from pathlib import Path

SITE = json.loads((Path(__file__).parent / "site.json").read_text(encoding="utf-8"))

project = html_title = SITE["title"]
language = SITE["sphinx_language"]
root_doc = "index"
extensions = ["myst_nb", "sphinx_copybutton", "sphinx.ext.mathjax", "sphinx-mathjax-offline"]
exclude_patterns = ["_templates", "_static"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["course.css"]

# MyST-NB renders the outputs stored in the staged notebooks; it never runs a kernel.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
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
    "article_header_end": ["language-switch.html", "theme-switcher.html", "search-button.html",
                           "toggle-secondary-sidebar.html"],
}
html_sidebars = {"**": ["navbar-logo.html", "sbt-sidebar-nav.html"]}  # the header has the search field
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None  # no build date: a rebuild of unchanged pages changes nothing
# In the configuration (not only read by language_links), so that Sphinx renders every page again
# when a language is added or removed.
html_context = {"course_language": SITE["language"], "course_languages_built": SITE["languages"],
                "default_mode": "light"}  # the figures are drawn on white

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


def setup(app):
    app.connect("html-page-context", language_links)
