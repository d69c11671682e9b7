"""Regenerate data/tang_poems.txt, chapter 08's corpus, byte for byte from the chinese-poetry npm package.

A maintainer tool: learners never run it (the file is committed). It needs the npm package and
OpenCC, neither of which the course installs:

    npm install --prefix /tmp/cp --no-save chinese-poetry@2.0.1
    python3 -m venv /tmp/cc && /tmp/cc/bin/pip install opencc==1.4.2
    /tmp/cc/bin/python tools/make_corpus.py /tmp/cp/node_modules/chinese-poetry

Rules (data/README.md explains them):

1. every poem of 全唐诗 (``dist/quantangshi/poet.tang.<N>.json``, files in the order of N, poems in
   file order), its ``paragraphs`` joined;
2. kept only in regular form: 4 or 8 lines of the same length, 5 or 7 Chinese characters
   (U+4E00..U+9FFF), ending alternately in "，" and "。" — no other character;
3. converted from traditional to simplified characters with OpenCC's ``t2s`` configuration (the
   form is checked again after conversion); exact duplicates dropped (the first one kept);
4. ordered by the SHA-256 of the poem's UTF-8 text (a fixed shuffle, so the last ``VAL_POEMS``
   poems, the validation split, are a random sample of poets and periods);
5. a character that occurs fewer than ``MIN_COUNT`` times in the training poems (all but the last
   ``VAL_POEMS``) is replaced by ``UNK`` everywhere; every validation character is thus in the
   training vocabulary.

Writes one poem per line (UTF-8, "\\n" line ends) and prints the counts and the SHA-256 that
``solutions.gpt_data.load_poems`` checks.
"""
import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

PACKAGE, PACKAGE_VERSION = "chinese-poetry", "2.0.1"
OPENCC_VERSION = "1.4.2"
VAL_POEMS = 1000
MIN_COUNT = 10
UNK = "□"  # U+25A1, the mark Chinese editions print for a character they cannot give
OUT = Path(__file__).resolve().parents[1] / "data" / "tang_poems.txt"
LINE = re.compile(r"([\u4e00-\u9fff]+)([，。])")


def regular_form(poem):
    """True when ``poem`` is 4 or 8 lines of 5 or 7 Chinese characters, alternately ending in ，and 。."""
    lines = LINE.findall(poem)
    if "".join(text + mark for text, mark in lines) != poem or len(lines) not in (4, 8):
        return False
    length = len(lines[0][0])
    return length in (5, 7) and all(len(text) == length and mark == "，。"[i % 2]
                                    for i, (text, mark) in enumerate(lines))


def read_package(root):
    """The poems of 全唐诗 in the package at ``root``, paragraphs joined, in file and poem order."""
    meta = json.loads((root / "package.json").read_text(encoding="utf-8"))
    if (meta.get("name"), meta.get("version")) != (PACKAGE, PACKAGE_VERSION):
        sys.exit(f"{root} holds {meta.get('name')} {meta.get('version')}, not {PACKAGE} {PACKAGE_VERSION}")
    files = sorted((root / "dist" / "quantangshi").glob("poet.tang.*.json"), key=lambda p: int(p.name.split(".")[2]))
    for path in files:
        for entry in json.loads(path.read_text(encoding="utf-8")):
            yield "".join(part.strip() for part in entry["paragraphs"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help=f"the installed {PACKAGE} folder (…/node_modules/{PACKAGE})")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    try:
        import opencc
    except ImportError:
        sys.exit(f"needs OpenCC: pip install opencc=={OPENCC_VERSION}")
    if opencc.__version__ != OPENCC_VERSION:
        sys.exit(f"OpenCC {opencc.__version__} installed; the committed file was made with {OPENCC_VERSION}")
    converter = opencc.OpenCC("t2s")
    total = regular = 0
    poems = {}  # text -> None: exact duplicates dropped, first one kept
    for poem in read_package(args.package):
        total += 1
        if regular_form(poem):
            regular += 1
            simplified = converter.convert(poem)
            if regular_form(simplified):
                poems.setdefault(simplified, None)
    poems = sorted(poems, key=lambda p: hashlib.sha256(p.encode("utf-8")).hexdigest())
    counts = Counter("".join(poems[:-VAL_POEMS]))
    rare = {ch for ch, n in counts.items() if n < MIN_COUNT}
    poems = ["".join(UNK if ch in rare else ch for ch in poem) for poem in poems]
    data = "".join(poem + "\n" for poem in poems).encode("utf-8")
    args.out.write_bytes(data)
    text = data.decode("utf-8")
    unk_share = text.count(UNK) / sum(ch not in "，。\n" for ch in text)
    print(f"{total} poems read, {regular} in regular form, {len(poems)} after converting and removing duplicates "
          f"({len(poems) - VAL_POEMS} train, {VAL_POEMS} validation)")
    print(f"{len(text)} characters, {len(data)} bytes, {len(set(text))} distinct "
          f"({len(rare)} rare characters -> {UNK}, {unk_share:.2%} of the poem characters)")
    print(f"sha256 {hashlib.sha256(data).hexdigest()}  {args.out.name}")


if __name__ == "__main__":
    main()
