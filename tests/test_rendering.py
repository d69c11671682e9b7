"""Markdown renders as the author meant: no literal ``**`` or ``__`` in what a reader sees.

CommonMark opens and closes emphasis by its flanking rules: a closing ``**`` right after a
punctuation mark (a full-width ``）``, ``”``) and right before a letter (most Chinese characters)
is not right-flanking, so it is shown as two asterisks. JupyterLab first takes the math out of a
markdown cell (it puts ``@@N@@``, punctuation, in its place), then renders the rest as CommonMark
(GFM tables). This test does the same with markdown-it-py in CommonMark mode, drops code spans and
code blocks (where ``**`` and ``__`` are meant literally), and fails on any ``**`` or ``__`` left in
the visible text of any markdown cell of either edition.
"""
import re

import pytest
from markdown_it import MarkdownIt

from pipeline_helpers import LESSONS, ROOT, read_nb

MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"\$[^$\n]+\$")
CODE = re.compile(r"<(code|pre)\b[^>]*>.*?</\1>", re.S)
TAG = re.compile(r"<[^>]+>")
LITERAL = re.compile(r"\*\*|__")


def visible_text(markdown):
    """The text a reader sees of one markdown cell, math replaced as JupyterLab replaces it."""
    text = INLINE_MATH.sub("@@1@@", DISPLAY_MATH.sub("@@0@@", markdown))
    return TAG.sub("", CODE.sub("", MD.render(text)))


def literal_markup(markdown):
    """Each ``**`` or ``__`` shown literally, with a little context."""
    text = visible_text(markdown)
    return [text[max(0, m.start() - 25):m.end() + 25].replace("\n", " ") for m in LITERAL.finditer(text)]


@pytest.mark.parametrize("edition", ["", "en"])
@pytest.mark.parametrize("name", LESSONS)
def test_no_literal_emphasis_markers(name, edition):
    path = ROOT / "notebooks" / edition / f"{name}.ipynb"
    found = [(i, hit) for i, cell in enumerate(read_nb(path).cells) if cell.cell_type == "markdown"
             for hit in literal_markup(cell.source)]
    assert not found, (f"{path.relative_to(ROOT)}: bold or emphasis shown as literal markers (cell, context): {found}; "
                       "in the lesson, put the ** around the words, with the full-width brackets outside")


@pytest.mark.parametrize("markdown", [
    "在**留出集（held-out set）**上的精确匹配",       # closes after ）, before a letter: not right-flanking
    "**预热（warmup）**让学习率",
    "**ViT（Vision Transformer）**把图像当成 token 序列",
])
def test_the_rule_sees_a_broken_span(markdown):
    assert literal_markup(markdown), markdown


@pytest.mark.parametrize("markdown", [
    "在**留出集**（held-out set）上的精确匹配",
    "**除以 $d_k$ 而不是 $\\sqrt{d_k}$**：方差变成 1",  # math is punctuation to CommonMark, as in JupyterLab
    "`x ** 2` and `__init__` in code, and a fenced block:\n\n```python\ny = x ** 2\n```",
    "two **bold** words and *one* emphasised",
])
def test_the_rule_spares_what_renders(markdown):
    assert not literal_markup(markdown), markdown
