"""The web edition (`make site`): a static site per language from the notebooks, offline.

    notebooks/NN_topic.ipynb (zh), notebooks/en/NN_topic.ipynb (en)   the self-study text: stubs
  + answer_keys/NN_topic.ipynb (zh), answer_keys/en/NN_topic.ipynb (en)   the executed outputs, by cell id
    -> build/site-cache/<lang>/src/                                   staged pages (rewritten only when
                                                                      their bytes change)
    -> build/site-cache/<lang>/html/ -> build/site/<lang>/            Sphinx + MyST-NB, incremental

What a page shows (docs/MAINTAINING.md, "The web edition"): the self-study notebook's text and
code, exercises as the learner's stubs; the answer key's outputs (real numbers, PNG figures) of
every cell whose code is the same in both, so never the output of a solved exercise nor one that
prints reference code (a drill's reveal); code provided from earlier chapters (collapsed in the
notebook) is left out, its outputs stay. Nothing is executed here: the outputs are those
tools/build.py stored, and Sphinx re-renders only the pages whose staged file changed.

Usage (from the repository root): ``.venv/bin/python -m tools.make_site [--lang zh en]``.
A language is built when its notebook folder holds every chapter; one that holds none is
skipped with a note, a partial one is an error.
"""
import argparse
import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools import build, translate

ROOT = build.ROOT
SITE = ROOT / "build" / "site"
CACHE = ROOT / "build" / "site-cache"
CONFIG = ROOT / "tools" / "site"  # conf.py, templates and CSS, copied into every staged source
SOLUTION_REGION = re.compile(rf"^\s*{build.BEGIN_SOLUTION}\n(.*?)^\s*{build.END_SOLUTION}", re.M | re.S)
PROVIDED_TAG = "remove-input"  # MyST-NB: the cell's code is not rendered, its outputs are
SETTINGS = CONFIG / "settings.toml"  # the repository's address, the citation's year
CITATION = ROOT / "CITATION.cff"  # the authors (the footer and the citation)
LICENCES = {"LICENSE.txt": ROOT / "LICENSE", "LICENSE-text.txt": ROOT / "LICENSE-text"}  # shipped with the site
PLOTS = ROOT / "tutor" / "plots"  # the course's figure functions: each takes a title= (the figure's alt text)
HEADING = re.compile(r"^(#{1,6}) \S")
FENCE = re.compile(r"^\s*(```|~~~|:::)")


@dataclass(frozen=True)
class Language:
    code: str        # folder under build/site/
    sphinx: str      # Sphinx's language (its own words: search, navigation)
    label: str       # in the language switch
    notebooks: Path  # the self-study edition in this language
    title: str
    intro: str
    note_title: str
    note: str        # atop a chapter; {path}: its notebook in the repository
    about: str       # atop the home page
    lab_command: str  # how to open this edition: every page says it
    lab_hint: str
    no_repository: str  # how to get the course while the site names no repository (settings.toml)
    toc_caption: str
    download: str    # the "download this notebook" button
    figure: str      # "Figure {n}. {title}": the numbered caption of a figure
    footer: dict     # the footer's words


LANGUAGES = {
    "zh": Language(
        code="zh", sphinx="zh_CN", label="中文", notebooks=build.NOTEBOOKS,
        title="手撕 Transformer",
        intro=("一门开放课程：在 PyTorch 里从零实现 Transformer，一章一个 Jupyter 笔记本。"
               "每个练习之后，检查（check）会告诉你代码对不对、**错在哪里**。"),
        note_title="在自己的电脑上运行",
        note=("这是笔记本 `{path}` 的网页版，供阅读：练习处是等你补全的代码框架（stub），"
              "输出和图是参考答案运行的结果（练习本身的输出不显示）。"
              "要运行并完成练习（需要 Python ≥ 3.11 和 `make`，不需要 GPU）："),
        about=("每一章是 `{path}/` 里一个自学笔记本的网页版，供阅读："
               "练习处是等你补全的代码框架（stub），输出和图是参考答案运行的结果。"
               "要运行并完成练习（需要 Python ≥ 3.11 和 `make`，不需要 GPU）："),
        lab_command="make lab",
        lab_hint="`make lab` 第一次运行时安装环境，然后在 JupyterLab 里打开你的 `workspace/`（中文版）。",
        no_repository=("先取得课程仓库的副本（这个网页版没有写明仓库的公开地址：用你拿到的那份副本；只想要这一章，"
                       "用页面上方的“下载笔记本”），然后在仓库的文件夹里运行："),
        toc_caption="章节", download="下载笔记本", figure="图 {n}　{title}",
        footer={"by": "作者：", "repository": "代码仓库", "licence": "许可证", "cite": "引用本课程",
                "site": "网页版", "code": "代码", "text": "课文和图"}),
    "en": Language(
        code="en", sphinx="en", label="English", notebooks=build.NOTEBOOKS / "en",
        title="Transformer from Scratch (手撕 Transformer)",
        intro=("An open course: implement a Transformer from scratch in PyTorch, one Jupyter notebook per "
               "chapter. After every exercise a check tells you whether your code is right **and why not**."),
        note_title="Run it on your own computer",
        note=("This is the web version of the notebook `{path}`, for reading: exercises are the stubs you "
              "fill in, outputs and figures come from running the reference answers (an exercise's own "
              "output is not shown). To run it and do the exercises (Python ≥ 3.11 and `make`, no GPU):"),
        about=("Each chapter is the web version of a self-study notebook in `{path}/`, for reading: exercises "
               "are the stubs you fill in, outputs and figures come from running the reference answers. To run "
               "them and do the exercises (Python ≥ 3.11 and `make`, no GPU):"),
        lab_command="make lab COURSE_LANG=en",
        lab_hint=("`make lab COURSE_LANG=en` sets the environment up on its first run, then opens the English "
                  "edition, your `workspace/en/`, in JupyterLab (plain `make lab` opens the Chinese one)."),
        no_repository=("get a copy of the course's repository (this web edition names no public address for it: "
                       "use the copy you were given; for this chapter alone, the \"Download notebook\" button above), "
                       "then, in its folder:"),
        toc_caption="Chapters", download="Download notebook", figure="Figure {n}. {title}",
        footer={"by": "By", "repository": "Repository", "licence": "Licence", "cite": "Cite this course",
                "site": "web edition", "code": "code", "text": "text and figures"}),
}


class SiteError(RuntimeError):
    """The site cannot be built as asked (a language half translated, a notebook out of step)."""


def write_if_changed(path, text):
    """Write ``text`` unless ``path`` already holds it: an unchanged page keeps its mtime, so
    Sphinx's incremental build leaves it alone. Returns whether the file was written."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def shown_path(path):
    """``path`` relative to the repository where it is inside it (messages, the note's path)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def available_languages(codes):
    """The languages of ``codes`` whose notebooks exist (every chapter): [(Language, note)]."""
    chapters, found = build.lesson_names(), []
    for code in codes:
        lang = LANGUAGES[code]
        have = {p.stem for p in lang.notebooks.glob("*.ipynb")}
        missing = [c for c in chapters if c not in have]
        if len(missing) == len(chapters):
            print(f"site: {code}: no notebooks in {shown_path(lang.notebooks)}/ yet, skipped", flush=True)
            continue
        if missing:
            raise SiteError(f"{code}: {shown_path(lang.notebooks)}/ lacks {missing}: build every chapter "
                            "in this language first (a half-translated site would link to missing pages)")
        found.append(lang)
    return found


def plot_titles():
    """{function: its default title} of every figure function in tutor/plots/ (read, not imported)."""
    titles = {}
    for file in sorted(PLOTS.glob("*.py")):
        for fn in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("plot_"):
                args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):] + fn.args.kwonlyargs
                defaults = fn.args.defaults + fn.args.kw_defaults
                titles[fn.name] = next((d.value for a, d in zip(args, defaults, strict=True) if a.arg == "title"
                                        and isinstance(d, ast.Constant)), None)
    return titles


def figure_titles(source, defaults):
    """The titles of the figures ``source`` draws, in order: each call of a course figure function
    (``plot_*``), with its ``title=`` when that is a string (an f-string's fields become "…"), else
    the function's default title."""
    calls = sorted((node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) in defaults),
                   key=lambda node: (node.lineno, node.col_offset))
    titles = []
    for call in calls:
        given = next((k.value for k in call.keywords if k.arg == "title"), None)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            titles.append(given.value)
        elif isinstance(given, ast.JoinedStr):
            titles.append("".join(v.value if isinstance(v, ast.Constant) else "…" for v in given.values))
        else:
            titles.append(defaults[getattr(call.func, "id", getattr(call.func, "attr", None))])
    return titles


def add_section_anchors(source, cell_id):
    """``source`` (a markdown cell) with a MyST target before each heading, ``sec-<cell id>-<k>``: the
    same cell has the same id in both editions, so the language switch keeps the reader's section."""
    lines, fenced, k = [], False, 0
    for line in source.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and HEADING.match(line):
            lines += [f"(sec-{cell_id.replace('_', '-').lower()}-{k})=", ""]
            k += 1
        lines.append(line)
    return "\n".join(lines)


def solution_lines(key):
    """Significant lines (12 characters or more, no comment) of the answer key's solution regions."""
    lines = set()
    for cell in key.cells:
        for region in SOLUTION_REGION.findall(cell.source) if cell.cell_type == "code" else []:
            lines |= {t for t in (line.strip() for line in region.split("\n")) if len(t) >= 12 and t[0] != "#"}
    return lines


def output_text(output):
    """The text an output shows (streams, text/* data, an error's traceback)."""
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.get("traceback", []))
    return "\n".join(v for k, v in output.get("data", {}).items() if k.startswith("text/") and isinstance(v, str))


def publishable(name, lang, repository=""):
    """The page of chapter ``name`` in ``lang``: the self-study notebook with the answer key's
    outputs where the code is the same, none that shows reference code; provided code left out."""
    page = nbformat.read(lang.notebooks / f"{name}.ipynb", as_version=4)
    # each edition's own answer key: the English one is executed in English (COURSE_LANG=en, tutor/lang.py)
    keys = build.ANSWER_KEYS / build.EN if lang.code == build.EN else build.ANSWER_KEYS
    key = nbformat.read(keys / f"{name}.ipynb", as_version=4)
    keyed = {c.id: c for c in key.cells if c.cell_type == "code"}
    code_ids = [c.id for c in page.cells if c.cell_type == "code"]
    if code_ids != list(keyed):
        raise SiteError(f"{lang.code}/{name}: its code cells differ from the answer key's (ids {code_ids[:3]}... vs "
                        f"{list(keyed)[:3]}...): rebuild it (tools/build.py) before the site")
    secret, defaults, figures = solution_lines(key), plot_titles(), 0
    header = next(c for c in page.cells if c.cell_type == "markdown")  # the title first, then the note
    for cell in page.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source if cell is header else add_section_anchors(cell.source, cell.id)
            continue
        solved = keyed[cell.id]
        if solved.source == cell.source:  # an exercise's cell differs: the stub is shown, without outputs
            cell.outputs = [copy.deepcopy(o) for o in solved.outputs
                            if not any(line in output_text(o) for line in secret)]
            cell.execution_count = solved.execution_count if cell.outputs else None
        drawn = sum("image/png" in o.get("data", {}) for o in cell.outputs)
        if drawn:
            titles = figure_titles(cell.source, defaults)
            if len(titles) != drawn:
                raise SiteError(f"{lang.code}/{name}: cell {cell.id} shows {drawn} figures but calls {len(titles)} "
                                "course figure functions (tutor.plots.plot_*, whose title= is the figure's alt text)")
            cell.metadata["course_figures"] = [{"alt": title, "caption": lang.figure.format(n=figures + k, title=title)}
                                               for k, title in enumerate(titles, 1)]
            figures += drawn
        if cell.metadata.get("jupyter", {}).get("source_hidden"):
            cell.metadata["tags"] = [PROVIDED_TAG]
    source = header.source.removeprefix(build.GENERATED.format(name=name))  # a page says nothing of the build
    title, _, text = source.partition("\n")
    note = run_locally_note(lang, lang.note.format(path=(shown_path(lang.notebooks) / f"{name}.ipynb").as_posix()),
                            repository)
    header.source = "\n\n".join([title, note, text.strip("\n")])
    return page


def settings():
    """tools/site/settings.toml, with ``repository`` resolved (SITE_REPOSITORY, the setting, the ``origin``
    remote when it is a web address, in that order) and ``repository_from`` saying where it came from; the
    ``authors`` of CITATION.cff."""
    import yaml

    cff = yaml.safe_load(CITATION.read_text(encoding="utf-8"))
    authors = ", ".join(a.get("name") or f"{a['given-names']} {a['family-names']}" for a in cff["authors"])
    found = tomllib.loads(SETTINGS.read_text(encoding="utf-8")) | {"authors": authors}
    proc = subprocess.run(["git", "remote", "get-url", "origin"], cwd=ROOT, capture_output=True, text=True)
    origin = proc.stdout.strip() if proc.returncode == 0 else ""
    setting = f"the setting `repository` in {shown_path(SETTINGS)}"
    for url, where in ((os.environ.get("SITE_REPOSITORY", ""), "from SITE_REPOSITORY"),
                       (found.get("repository", ""), f"from {setting}"), (origin, "from the origin remote")):
        if url.startswith(("https://", "http://")):
            return found | {"repository": url, "repository_from": where}
    return found | {"repository": "", "repository_from": f"{setting} is empty: set it to the course's public address; "
                                                        "until then the pages say how to get the course without one"}


def run_locally_note(lang, text, repository):
    """The "run it on your own computer" box at the top of every page (MyST): ``text``, then how to run
    this edition: ``git clone`` of the repository, or, without its address, how to get the course."""
    if repository:
        commands = [f"git clone {repository} shousi-transformer && cd shousi-transformer", lang.lab_command]
    else:
        text, commands = f"{text}{'' if text.endswith('：') else ' '}{lang.no_repository}", [lang.lab_command]
    return "\n".join([f":::{{admonition}} {lang.note_title}", ":class: tip", "", text, "",
                      "```bash", *commands, "```", "", lang.lab_hint, ":::"])


def stale_translations(lang):
    """One line per markdown cell of the English edition without current English (tools.translate:
    missing, fuzzy or for an older Chinese text): the site shows that cell in Chinese."""
    if lang.code != "en":
        return []
    return [f"site: en: warning: {line}" for name in build.lesson_names() for line in translate.problems(name)
            if "matches no markdown cell" not in line]


def citation(lang, found):
    """A BibTeX entry for the course (the home page's "cite" section); its address once the site names one."""
    url = [f"  howpublished = {{\\url{{{found['repository']}}}}},"] if found["repository"] else []
    return "\n".join(["@misc{shousi_transformer,", f"  author = {{{{{found['authors']}}}}},",
                      f"  title = {{{lang.title}}},", f"  year = {{{found['year']}}},", *url, "}"])


def index_page(lang, chapters, found):
    """The language's home page: what the course is, how to run it, every chapter (the sidebar), how to cite it."""
    about = lang.about.format(path=shown_path(lang.notebooks).as_posix())
    return "\n".join([f"# {lang.title}", "", lang.intro, "", run_locally_note(lang, about, found["repository"]), "",
                      "```{toctree}", ":maxdepth: 1", f":caption: {lang.toc_caption}", "", *chapters, "```", "",
                      "(cite)=", f"## {lang.footer['cite']}", "", "```bibtex", citation(lang, found), "```", ""])


def stage(lang, languages, src, found=None):
    """Write the Sphinx source of ``lang`` into ``src``; returns the names of the files written. Each
    chapter's self-study notebook goes along as it is (extra/notebooks/: the download button's file)."""
    chapters, found = build.lesson_names(), found or settings()
    written = []
    site = {"language": lang.code, "sphinx_language": lang.sphinx, "title": lang.title,
            "languages": [[other.code, other.label] for other in languages], "chapters": chapters,
            "download": lang.download, "footer": lang.footer,
            **{key: found[key] for key in ("authors", "repository", "year")}}
    files = {"site.json": json.dumps(site, ensure_ascii=False, indent=1) + "\n",
             "index.md": index_page(lang, chapters, found)}
    files |= {f"{name}.ipynb": nbformat.writes(publishable(name, lang, found["repository"])) + "\n"
              for name in chapters}
    files |= {f"extra/notebooks/{name}.ipynb": (lang.notebooks / f"{name}.ipynb").read_text(encoding="utf-8")
              for name in chapters}
    files |= {f"extra/{shipped}": path.read_text(encoding="utf-8") for shipped, path in LICENCES.items()}
    files |= {str(p.relative_to(CONFIG)): p.read_text(encoding="utf-8") for p in sorted(CONFIG.rglob("*"))
              if p.is_file() and "__pycache__" not in p.parts}
    for rel, text in files.items():
        if write_if_changed(src / rel, text):
            written.append(rel)
    for stale in [p for p in src.rglob("*") if p.is_file() and str(p.relative_to(src)) not in files]:
        stale.unlink()
    return written


def sphinx(lang, src, out, doctrees, fresh=False):
    """sphinx-build in this process (one start for every language; incremental: its environment in
    ``doctrees`` says what changed; ``fresh``: every page read and written again, as when the site's
    configuration, templates or scripts changed, which Sphinx does not see); warnings are errors."""
    import sphinx.locale
    from sphinx.cmd.build import build_main

    sphinx.locale.translators.clear()  # Sphinx caches its UI words per process: the last language's otherwise
    if build_main(["-b", "html", "-q", "-W", "--keep-going", *(["-E"] if fresh else []), "-d", str(doctrees),
                   str(src), str(out)]):
        raise SiteError(f"{lang.code}: sphinx-build failed (its messages are above)")


def mirror(src, dst):
    """Make ``dst`` a copy of ``src``, copying only files whose size or mtime differ (Sphinx's output
    folder sits in the cache: MyST-NB writes its image folder beside it, which is not for the site)."""
    keep = set()
    for path in src.rglob("*"):
        if path.is_file():
            rel = path.relative_to(src)
            keep.add(rel)
            target, stat = dst / rel, path.stat()
            same = target.exists() and (target.stat().st_size, target.stat().st_mtime_ns) == (stat.st_size,
                                                                                              stat.st_mtime_ns)
            if not same:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    for path in sorted(dst.rglob("*"), reverse=True):
        if path.is_file() and path.relative_to(dst) not in keep:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def landing_page(languages):
    """build/site/index.html: the reader's language (the browser's, navigator.languages), the first
    language (zh) when none is built or without JavaScript; a link to each."""
    links = " · ".join(f'<a href="{lang.code}/index.html" hreflang="{lang.code}">{lang.label}</a>'
                       for lang in languages)
    first, codes = languages[0].code, json.dumps([lang.code for lang in languages])
    script = ("const built = " + codes + ";\n"
              "const wanted = (navigator.languages && navigator.languages.length ? navigator.languages"
              " : [navigator.language || '']).map((l) => l.toLowerCase().split('-')[0]);\n"
              "const lang = wanted.find((l) => built.includes(l)) || built[0];\n"
              "location.replace(lang + '/index.html' + location.hash);")
    return (f'<!DOCTYPE html>\n<html lang="{first}"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<script>\n{script}\n</script>"
            f'<noscript><meta http-equiv="refresh" content="0; url={first}/index.html"></noscript>'
            f"<title>{languages[0].title}</title></head><body><p>{links}</p></body></html>\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", nargs="+", choices=sorted(LANGUAGES), default=list(LANGUAGES),
                        help="languages to build (default: every one whose notebooks exist)")
    parser.add_argument("--strict", action="store_true",
                        help="fail when a cell of the English edition has no current English (default: warn)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        languages = available_languages(args.lang)
        if not languages:
            raise SiteError(f"no notebooks for {args.lang}")
        found = settings()
        print(f"site: repository: {found['repository'] or 'none'} ({found['repository_from']})", flush=True)
        for lang in languages:
            began = time.perf_counter()
            stale = stale_translations(lang)
            for line in stale:
                print(line, flush=True)
            if stale and args.strict:
                raise SiteError(f"{lang.code}: {len(stale)} cells without current English (--strict)")
            if stale:
                print(f"site: {lang.code}: {len(stale)} cells without current English are shown in Chinese "
                      "(`.venv/bin/python -m tools.translate check` lists them)", flush=True)
            src = CACHE / lang.code / "src"
            written = stage(lang, languages, src, found)
            configured = [rel for rel in written if not rel.endswith((".ipynb", ".md", "site.json"))]
            sphinx(lang, src, CACHE / lang.code / "html", CACHE / lang.code / "doctrees", fresh=bool(configured))
            mirror(CACHE / lang.code / "html", SITE / lang.code)
            pages = len(list((SITE / lang.code).glob("*.html")))
            print(f"site: {lang.code}: {pages} pages in build/site/{lang.code}/ ({len(written)} staged files "
                  f"changed) in {time.perf_counter() - began:.1f} s", flush=True)
        for stale in [p for p in SITE.iterdir() if p.is_dir() and p.name in LANGUAGES
                      and p.name not in {lang.code for lang in languages}]:
            shutil.rmtree(stale)
        write_if_changed(SITE / "index.html", landing_page(languages))
    except SiteError as exc:
        sys.exit(f"site: {exc}")
    print(f"site: build/site/ in {time.perf_counter() - start:.1f} s; `make site-serve` serves it", flush=True)


if __name__ == "__main__":
    main()
