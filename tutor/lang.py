"""The course language: one switch, the environment variable ``COURSE_LANG``.

The Chinese edition shows every line ``"中文 / English"`` (COURSE_LANG unset or ``zh``). The English edition's
setup cell sets ``os.environ["COURSE_LANG"] = "en"`` (tools/build.py writes that line into the English
notebooks only, so a notebook carries its language wherever it runs: JupyterLab, Colab, nbval), and every line
``tutor`` shows is then English only.

The choice is made where a line is rendered, never by rewriting the bilingual tables:

* ``pick(zh, en)``: ``"zh / en"``, or ``en`` in the English edition (``say``/``explain`` of
  ``tutor.engine.messages`` and ``tutor.drills.reveal`` choose between the halves of their pairs the same way);
* ``text(line)``: a line written as one bilingual literal (``"尚未实现 / not implemented yet"``, a case label
  ``"无掩码 / no mask, B=2"``, a tag ``"期望 expected (2, 3)"``) as it is, or, in the English edition, with its
  Chinese halves taken out (``english_only``). ``tutor.grading`` and ``tutor.drills`` pass every line they
  print through it, so a message of a check module needs no change;
* ``english_code(source)``: the English notebooks' code (tools/build.py) and the reference a drill reveals:
  docstrings without their Chinese paragraph, other bilingual literals through ``english_only``.

A line whose Chinese is data (a poem, a corpus sample) keeps it: only a Chinese half paired with English by
``" / "``, and a Chinese tag before an English word, are taken out.
"""
import os
import re

VARIABLE = "COURSE_LANG"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")  # Han and CJK punctuation
_SEPARATOR = re.compile(r"）/ ?| / ")  # between a Chinese half and its English
# where a Chinese half can start: a line, a string literal, a clause of the English before it
_BOUNDARY = re.compile(r"(?:\"|「|: |; |\. |\? |! |, |\t| {2,})")
_FULLWIDTH_PUNCT = "，（"
_TAG = re.compile(r"(?:(?<=^)|(?<=[\s(\[{「（:,]))[\u3400-\u4dbf\u4e00-\u9fff]+ (?=[A-Za-z])")
_NORMALISE = [(re.compile(r"\s*（"), " ("), (re.compile(r"）"), ")"), (re.compile(r"，\s*"), ", "),
              (re.compile(r"：\s*"), ": "), (re.compile(r"；\s*"), "; "), (re.compile(r"、"), ", "),
              (re.compile(r"[「」]"), '"'), (re.compile(r"。"), ". ")]


def english():
    """True in the English edition (``COURSE_LANG=en``), read at each call."""
    return os.environ.get(VARIABLE, "").strip().lower() == "en"


def bilingual(zh, en):
    """``"zh / en"``; ``"zh）/ en"`` after a full-width parenthesis."""
    return f"{zh}{'/ ' if zh.endswith('）') else ' / '}{en}"


def pick(zh, en):
    """``zh / en`` (the Chinese edition) or ``en`` (the English edition)."""
    return en if english() else bilingual(zh, en)


def text(line):
    """``line`` as it is, or with its Chinese halves taken out in the English edition."""
    return english_only(line) if english() and isinstance(line, str) else line


def _boundaries(left):
    """Where a Chinese half may start in ``left``, right to left: after a boundary outside ASCII brackets."""
    depth, ends = 0, []
    found = reversed(list(_BOUNDARY.finditer(left)))
    closes, opens = ")]}", "([{"
    i = len(left)
    for m in found:  # right to left
        depth += sum(left[j] in closes for j in range(m.end(), i)) - sum(left[j] in opens for j in range(m.end(), i))
        i = m.end()
        if depth <= 0:
            depth = 0
            ends.append(m.end())
    return ends + [0]


def _drop_pairs(line):
    """Take out each Chinese half that ``" / "`` pairs with the English after it."""
    pos = 0
    while True:
        sep = _SEPARATOR.search(line, pos)
        if sep is None:
            return line
        if CJK.match(line, sep.end()):  # Chinese on both sides (a sample, a poem's lines): data
            pos = sep.end()
            continue
        left = line[:sep.start() + (1 if sep.group().startswith("）") else 0)]
        start = next((b for b in _boundaries(left) if b >= pos and HAN.search(left, b)), None)
        if start is None:
            pos = sep.end()
            continue
        han = HAN.search(left, start)
        prefix = left[start:han.start()]
        cut = max((prefix.rfind(p) for p in _FULLWIDTH_PUNCT), default=-1)
        if cut >= 0:
            start += cut + 1
        line = line[:start] + line[sep.end():]
        pos = start


def _english_line(part):
    new = _drop_pairs(part)
    if HAN.search(new):
        untagged = _TAG.sub("", new)
        if HAN.search(untagged):
            return new
        new = untagged
    if new == part and HAN.search(part):
        return part
    for pattern, repl in _NORMALISE:
        new = pattern.sub(repl, new)
    return new.rstrip(" ") if new.endswith(". ") else new


def english_only(line):
    """The English of a bilingual ``line``: each ``中文 / English`` pair and each ``中文 English`` tag reduced to
    its English (a tag only where no other Chinese is left on its line), full-width punctuation made ASCII
    on a line so reduced. Chinese without English beside it (data) is kept."""
    if not CJK.search(line):
        return line
    return "\n".join(_english_line(part) for part in line.split("\n"))


_DOC_QUOTES = '"""'
# Code lines whose Chinese the generic reduction cannot take out (a message's Chinese half spread over a tuple and
# two literals), by their text without indentation: their English edition.
_ENGLISH_LINES = {
    'zh, en = ("缺失", "is missing") if data is None else ("已损坏", "is damaged")':  # solutions/gpt_data.py
        'en = "is missing" if data is None else "is damaged"',
    'raise ValueError(f"data/{path.name} {zh}：用 git checkout -- data/{path.name} 恢复，或按 data/README.md 运行 "':
        "raise ValueError(",
}


def _zh_start(content):
    """Where a Chinese paragraph starts in a docstring line's ``content``: 0 for ``中文：…`` or ``/ 中文…``, the
    index of `` / `` before Chinese that follows English, or None."""
    if content.startswith("中文：") or (content.startswith("/ ") and HAN.search(content[:12])):
        return 0
    sep = content.find(" / ")
    if sep > 0 and not HAN.search(content[:sep]) and HAN.search(content[sep + 3:sep + 15]):
        return sep
    return None


# "Attributes / 属性: ..." in a docstring: the Chinese tag of one English word
_INLINE_TAG = re.compile(r" / [\u3400-\u4dbf\u4e00-\u9fff]+"
                         r"(?=[:：](?: |$)[^\u3000-\u303f\u3400-\u9fff\uff00-\uffef]*$)")


def english_code(source):
    """The English edition of a code cell's ``source`` (and of a reference solution a drill reveals): every
    docstring without its Chinese (a ``中文：`` paragraph, a ``/ 中文`` half and the Chinese lines that carry
    it on), every other line with Chinese through ``english_only`` (a bilingual message keeps its English;
    data such as a poem is kept)."""
    out, in_doc, zh = [], False, False
    for line in source.split("\n"):
        count = line.count(_DOC_QUOTES)
        opens_here = not in_doc and count % 2 == 1
        if in_doc or opens_here:
            indent = line[:len(line) - len(line.lstrip())]
            body = line.lstrip()
            lead = _DOC_QUOTES if opens_here and body.startswith(_DOC_QUOTES) else ""
            content = body[len(lead):]
            closes = in_doc and count % 2 == 1
            tail = _DOC_QUOTES if closes and content.rstrip().endswith(_DOC_QUOTES) else ""
            if tail:
                content = content.rstrip()[:-len(tail)]
            if zh and (not HAN.search(content) or (_zh_start(_INLINE_TAG.sub("", content)) or 0) > 0):
                zh = False  # English again: a line without Chinese, or English with its Chinese after " / "
            if not zh:
                content = _INLINE_TAG.sub("", content)
                start = _zh_start(content)
                if start is not None:
                    zh = True
                    content = content[:start].rstrip()
                elif HAN.search(content):
                    content = english_only(content)
            else:
                content = ""
            if zh and not content and not lead and not tail:
                pass  # a Chinese line: dropped
            else:
                out.append(((indent + lead + content + tail).rstrip() if (lead or content or tail) else "", True))
            in_doc = (in_doc and count % 2 == 0) or opens_here
            if not in_doc:
                zh = False
        elif HAN.search(line):
            stripped = line.strip()
            line = (line[:len(line) - len(line.lstrip())] + _ENGLISH_LINES[stripped] if stripped in _ENGLISH_LINES
                    else english_only(line))
            if line.strip() not in ('f""', '""'):  # the Chinese half of a message split over two literals
                out.append((line, False))
        else:
            out.append((line, False))
    # inside a docstring: no blank line left before its closing """, none doubled
    cleaned = []
    for line, doc in out:
        if doc and line.strip() == _DOC_QUOTES and cleaned and cleaned[-1][1] and not cleaned[-1][0].strip():
            cleaned.pop()
        if doc and not line.strip() and cleaned and cleaned[-1][1] and not cleaned[-1][0].strip():
            continue
        cleaned.append((line, doc))
    return "\n".join(line for line, _ in cleaned)
