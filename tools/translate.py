"""The English edition's catalogues: one gettext catalogue per lesson, ``lessons/en/NN_topic.po``.

Each markdown cell of ``lessons/NN_topic.py`` is one entry: its Chinese text (as the build writes it)
is the msgid, its English the msgstr. Entries are keyed by the text, as gettext keys them, so a cell
inserted or moved leaves the others alone. Code cells are written once for both languages (their
comments are English, their messages bilingual). ``tools/build.py`` writes ``notebooks/en/`` from the
catalogues; any PO editor (Poedit, Lokalize, Weblate, a text editor) edits them.

    .venv/bin/python -m tools.translate update [NN_topic ...]   # catalogues follow the lessons
    .venv/bin/python -m tools.translate check [NN_topic ...]    # what has no current English (exit 1)

``update`` adds an entry for each new Chinese cell. A cell whose Chinese changed gets the English of
the old text marked ``fuzzy``, with the old Chinese as ``#| msgid`` so that the change is visible;
gettext (and the build) use no fuzzy entry. Revise the English, delete the ``fuzzy`` flag and the
``#| msgid`` lines, then ``make build``. An entry no cell uses any more is kept as obsolete (``#~``)
and comes back if its cell does. The other catalogues serve as a compendium (as for ``msgmerge
--compendium``): a cell moved to another lesson (a chapter split or renamed) takes its English along,
unchanged text as translated, changed text as fuzzy. ``update`` of every lesson then deletes the
catalogues whose lesson is gone.
"""
import argparse
import difflib
import re
import sys

import polib

from tools import build

WRAP = 0  # no wrapping: one line of a cell, one line of the catalogue (readable diffs)
SIMILAR = 0.5  # a changed cell inherits the English of the unused entry at least this similar (difflib ratio)
HEADER = {"Project-Id-Version": "shousi-transformer", "Language": "en", "MIME-Version": "1.0",
          "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit"}
# Chinese characters and full-width punctuation: none may be left in the English prose outside code.
CHINESE = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff01-\uff5e]")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def path(name):
    return build.CATALOGUES / f"{name}.po"


def load(name):
    file = path(name)
    return polib.pofile(str(file), wrapwidth=WRAP) if file.exists() else polib.POFile(wrapwidth=WRAP)


def _similar(entries, text):
    """The entry among ``entries`` whose Chinese is most like ``text``, if at least SIMILAR alike; else None."""
    score, best = max(((difflib.SequenceMatcher(None, e.msgid, text).ratio(), i) for i, e in enumerate(entries)),
                      default=(0, None))
    return entries[best] if score >= SIMILAR else None


def compendium(name):
    """The translated entries of every other catalogue in lessons/en/ (lessons gone included), obsolete ones
    too: a cell that moved out of a lesson already updated is obsolete there, its English still good."""
    return [e for file in sorted(build.CATALOGUES.glob("*.po")) if file.stem != name
            for e in polib.pofile(str(file), wrapwidth=WRAP) if e.msgstr and not e.fuzzy]


def update(name):
    """Bring lessons/en/<name>.po in step with the lesson; returns how many entries became fuzzy."""
    old, cells = load(name), list(dict.fromkeys(build.markdown_sources(name)))
    by_text = {e.msgid: e for e in old}
    unused = [e for e in old if e.msgid not in set(cells) and e.msgstr]  # changed or deleted cells
    others = None  # read only when a cell is not in this catalogue
    catalogue = polib.POFile(wrapwidth=WRAP)
    catalogue.metadata = dict(HEADER)
    fuzzy = 0
    for text in cells:
        entry = by_text.get(text)
        if entry is None or not entry.msgstr:  # new, or still untranslated: another catalogue may have it
            others = compendium(name) if others is None else others
            same = next((e for e in others if e.msgid == text), None)
            entry, previous = polib.POEntry(msgid=text, msgstr=same.msgstr if same else ""), None
            if same is None:
                previous = _similar(unused, text) or _similar(others, text)
            if previous is not None:
                if previous in unused:
                    unused.remove(previous)
                entry.msgstr, entry.flags = previous.msgstr, ["fuzzy"]
                entry.previous_msgid = previous.previous_msgid or previous.msgid
                fuzzy += 1
        entry.obsolete = False
        catalogue.append(entry)
    for entry in unused:
        entry.obsolete = True
        catalogue.append(entry)
    build.CATALOGUES.mkdir(exist_ok=True)
    catalogue.save(str(path(name)))
    return fuzzy


def orphans():
    """Catalogues in lessons/en/ whose lesson no longer exists."""
    return [f for f in sorted(build.CATALOGUES.glob("*.po")) if f.stem not in build.lesson_names()]


def chinese_outside_code(text):
    """The Chinese characters of ``text`` outside code spans and fenced code."""
    return "".join(CHINESE.findall(CODE.sub("", text)))


def problems(name):
    """One line per markdown cell of the lesson without current English — missing, stale (its English
    is for an older Chinese text, or fuzzy) or still holding Chinese prose — and per catalogue entry that
    no cell uses; each line says how to fix it."""
    cells, found = build.markdown_sources(name), []
    entries = {e.msgid: e for e in load(name) if not e.obsolete}
    stale = [e for e in entries.values() if e.msgid not in set(cells) and e.msgstr]
    fix = (f"run `.venv/bin/python -m tools.translate update {name}`, then write the English of the entries "
           f"it marks fuzzy or leaves empty in lessons/en/{name}.po (and delete the fuzzy flag)")
    for number, text in enumerate(cells, 1):
        entry, first = entries.get(text), text.split("\n")[0][:60]
        where = f"{name}: markdown cell {number} ({first!r})"
        if entry is None and _similar(stale, text):
            stale.remove(_similar(stale, text))
            found.append(f"{where} changed since it was translated (lessons/en/{name}.po holds English for "
                         f"an older text): {fix}")
        elif entry is None or not entry.msgstr:
            found.append(f"{where} has no English: {fix}")
        elif entry.fuzzy:
            found.append(f"{where}: its English is marked fuzzy (the Chinese changed): revise it in "
                         f"lessons/en/{name}.po and delete the fuzzy flag")
        elif chinese_outside_code(entry.msgstr):
            found.append(f"{where}: its English still holds Chinese {chinese_outside_code(entry.msgstr)[:20]!r} "
                         f"outside code: translate it in lessons/en/{name}.po")
    found += [f"lessons/en/{name}.po: the entry {e.msgid.split(chr(10))[0][:60]!r} matches no markdown cell of "
              f"the lesson: run `.venv/bin/python -m tools.translate update {name}` (it keeps it as obsolete)"
              for e in stale]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["update", "check"])
    parser.add_argument("names", nargs="*", metavar="NN_topic", help="these lessons only (default: all)")
    args = parser.parse_args(argv)
    available = build.lesson_names()
    unknown = sorted(set(args.names) - set(available))
    if unknown:
        parser.error(f"no lesson file for {unknown}; available: {available}")
    names = args.names or available
    if args.command == "update":
        for name in names:
            fuzzy = update(name)
            print(f"lessons/en/{name}.po: {len(build.markdown_sources(name))} cells"
                  + (f", {fuzzy} marked fuzzy (their Chinese changed)" if fuzzy else ""))
        for file in [] if args.names else orphans():
            file.unlink()
            print(f"lessons/en/{file.name}: deleted, its lesson is gone (its English was offered to the others)")
        return
    found = [f"lessons/en/{f.name}: no lesson lessons/{f.stem}.py: run `.venv/bin/python -m tools.translate update`, "
             f"which gives its English to the lessons that took its cells and deletes it" for f in orphans()]
    found += [line for name in names for line in problems(name)]
    print("\n".join(found) or f"every markdown cell of {len(names)} lessons has current English")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
