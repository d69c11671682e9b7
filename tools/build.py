"""The one build command: every edition of every lesson from ``lessons/NN_topic.py``.

    lessons/NN_topic.py                      (hand-written, jupytext percent format)
      -> source/NN_topic/NN_topic.ipynb      (nbgrader instructor notebook)
      -> release/NN_topic/                   (``nbgrader generate_assignment NN_topic --no-db --force``)
      -> notebooks/NN_topic.ipynb            (self-study edition: stubs + visible checks)
      -> answer_keys/NN_topic.ipynb (self-study notebook with the solutions in place,
                                                executed: real outputs and figures, timings sanitised)
    lessons/en/NN_topic.po                   (the English of every markdown cell, tools/translate.py)
      -> notebooks/en/NN_topic.ipynb         (the English self-study edition: the same code cells and
                                                cell ids, English markdown)
      -> answer_keys/en/NN_topic.ipynb (the answer key's cells and outputs, English markdown)

Usage (from anywhere; paths are resolved from the repository root):

    .venv/bin/python tools/build.py [--only NN_topic ...] [--no-execute]

The lesson format is specified in docs/ARCHITECTURE.md ("Lesson file format") and explained in
docs/MAINTAINING.md.
"""
import argparse
import ast
import copy
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tokenize
from pathlib import Path

import jupytext
import nbformat
import polib
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbgrader.preprocessors import ClearOutput, ClearSolutions
from nbval.plugin import coalesce_streams, get_sanitize_patterns
from traitlets.config.loader import PyFileConfigLoader

import contract
from grader.audit import bound_names

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"
NOTEBOOKS = ROOT / "notebooks"
ANSWER_KEYS = ROOT / "answer_keys"  # generated: the executed self-study notebooks with the solutions in place
CATALOGUES = LESSONS / "en"  # gettext catalogues: the English of each lesson's markdown cells
EN = "en"  # the English edition's folder in notebooks/ and answer_keys/
NBGRADER_CONFIG = ROOT / "nbgrader_config.py"
SANITIZE_FILE = ROOT / "tools" / "nbval_sanitize.cfg"
CONTRACT_DOC = ROOT / "docs" / "CONTRACT.md"

LESSON_NAME = re.compile(r"^\d\d_[a-z0-9_]+$")
GRADE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
EARLIER = "earlier"  # provided="earlier": the build lists the earlier chapters' components the lesson uses
EDITION_TAGS = {"nbgrader": "source", "selfstudy": "selfstudy"}
LESSON_KEYS = {"exercise", "provided", "grade_id", "points", "check", "tags", "drill"}
JUPYTEXT_KEYS = {"lines_to_next_cell", "lines_to_end_of_cell_marker", "cell_marker", "title"}
NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
EXECUTE_TIMEOUT = 900  # seconds per cell when executing an answer key (chapter 07 trains fully)
# The header of every graded chapter says which file a learner hands in (docs/INSTRUCTOR.md section 3).
HAND_IN = ("\n\n> **交作业（hand in）**：如果课程用 nbgrader 评分，交回这个笔记本文件本身 `{name}.ipynb`"
           "（浏览器下载时自动改成的 `{name} (1).ipynb` 之类也能认出）；"
           "`make lab` 打开的 `workspace/` 里那份也可以直接交。")
HAND_IN_EN = ("\n\n> **Hand in**: if your course is graded with nbgrader, hand in this notebook file itself, "
              "`{name}.ipynb` (a copy your browser renamed on download, such as `{name} (1).ipynb`, is recognised "
              "too); the copy in `workspace/en/` that `make lab COURSE_LANG=en` opens can be handed in as it is.")
VOLATILE_MIME = ("application/vnd.jupyter.widget-view+json",)  # a widget's model id is random
STORED_SANITISED = "stored: sanitised"  # tools/nbval_sanitize.cfg: the rules the stored outputs get too


class LessonError(ValueError):
    """A lesson file breaks the format of docs/ARCHITECTURE.md."""


def lesson_names():
    """All lesson names (``NN_topic``) in lessons/, sorted."""
    return sorted(p.stem for p in LESSONS.glob("*.py") if LESSON_NAME.match(p.stem))


def load_nbgrader_config():
    """The course's nbgrader configuration (the same one ``nbgrader`` reads)."""
    return PyFileConfigLoader(NBGRADER_CONFIG.name, path=str(ROOT)).load_config()


def reference_source(name, lesson, keep_markers):
    """Source code of ``solutions.<name>``; the solution markers kept or removed."""
    import solutions

    obj = getattr(solutions, name, None)
    if obj is None:
        raise LessonError(f"{lesson}: solutions has no object named {name!r} (see solutions/__init__.py)")
    code = inspect.getsource(obj).rstrip()
    if keep_markers:
        if BEGIN_SOLUTION not in code or END_SOLUTION not in code:
            raise LessonError(f"{lesson}: solutions.{name} has no {BEGIN_SOLUTION!r}/{END_SOLUTION!r} region")
        return code
    return strip_markers(code)


def strip_markers(code):
    """``code`` without its solution-marker lines: the answer as a learner types it."""
    return "\n".join(line for line in code.split("\n") if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def _docstrings(code):
    """{qualified name: docstring node} of every def/class in ``code`` that has a docstring."""
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                body = child.body
                first = body[0] if body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str):
                    found[name] = body[0]
                walk(child, name + ".")

    walk(ast.parse(code), "")
    return found


def drill_source(code, docs, lesson):
    """A drill: the reference ``code`` with every docstring replaced by the one the lesson cell
    ``docs`` gives for the same def/class (shapes and conventions only, no hints). A reference
    docstring the lesson does not replace is an error: its hints would reach the drill."""
    ref, new = _docstrings(code), _docstrings(docs)
    missing, unknown = sorted(set(ref) - set(new)), sorted(set(new) - set(ref))
    if missing or unknown:
        raise LessonError(f"{lesson}: drill docstrings must replace exactly the reference's: "
                          f"missing {missing}, not in the reference {unknown}")
    lines, doc_lines = code.split("\n"), docs.split("\n")
    for name in sorted(ref, key=lambda n: ref[n].lineno, reverse=True):
        old, repl = ref[name], new[name]
        indent = lines[old.lineno - 1][:old.col_offset]
        text = textwrap.dedent("\n".join([" " * repl.col_offset + doc_lines[repl.lineno - 1][repl.col_offset:]]
                                         + doc_lines[repl.lineno:repl.end_lineno]))
        lines[old.lineno - 1:old.end_lineno] = textwrap.indent(text, indent).split("\n")
    return "\n".join(lines)


def split_names(value, key, lesson):
    names = [n.strip() for n in str(value).split(",") if n.strip()]
    if not names:
        raise LessonError(f"{lesson}: {key}= needs at least one name")
    return names


def _parse_cell(code):
    """A cell's source as an AST (IPython magics and shell lines skipped)."""
    return ast.parse("\n".join(line for line in code.split("\n") if not line.lstrip().startswith(("%", "!"))))


def earlier_components(name, cells):
    """What ``provided="earlier"`` stands for: every component of an earlier chapter (the contract
    registry) that the lesson's code uses, directly or through another such component, in teaching
    order. What the lesson defines itself is its own, not provided: its exercises (drills included)
    and the names its plain cells bind at top level. A constant the provided code needs must be bound
    by the lesson (its setup cell), or the build stops."""
    earlier = [c.name for c in contract.COMPONENTS if c.chapter < name[:2] and c.kind != "constant"]
    constants = {c.name for c in contract.COMPONENTS if c.kind == "constant"}
    used, own = set(), set()
    for cell in cells:
        if cell.cell_type != "code" or cell.metadata.get("provided") == EARLIER:
            continue
        code = cell.source
        for key in ("exercise", "provided"):
            if key in cell.metadata:
                names = split_names(cell.metadata[key], key, name)
                own |= set(names) if key == "exercise" else set()
                code += "\n" + "\n".join(reference_source(n, name, keep_markers=False) for n in names)
        tree = _parse_cell(code)
        used |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if "exercise" not in cell.metadata and "provided" not in cell.metadata:
            own |= set(bound_names(tree))
    names = contract.with_dependencies(used - own, lambda n: reference_source(n, name, False), among=earlier)
    needed = {n.id for c in names for n in ast.walk(ast.parse(reference_source(c, name, False)))
              if isinstance(n, ast.Name) and n.id in constants}
    if needed - own:
        raise LessonError(f"{name}: the provided code uses {sorted(needed - own)}; bind them in the setup cell "
                          f"(e.g. {', '.join(sorted(needed - own))} = ... as in solutions)")
    return names


def parse_check(value, lesson):
    """``"<check name>:<expression>"`` -> (name, expression)."""
    name, sep, expr = str(value).partition(":")
    if not sep or not name.strip() or not expr.strip():
        raise LessonError(f"{lesson}: check={value!r} must read \"<check name>:<expression>\"")
    if name.strip() not in contract.CHECK_NAMES:
        raise LessonError(f"{lesson}: check={value!r} names no check of the registry (contract/__init__.py)")
    return name.strip(), expr.strip()


def report_call(check, expr, body):
    """``report(...)`` before the cell body. Its return value is bound to ``_`` so that it is not
    displayed when the call is the cell's last line (a ``;`` is not honoured by nbval's kernel)."""
    return "\n".join([f"_ = report({check!r}, {expr})", body]).strip("\n")


def graded_cell_source(grade_id, check, body, edition, lesson):
    """A graded cell. Every edition runs its visible tests inside ``with test_cell(grade_id)``,
    headed by ``check(<check name>, <expression>)`` when the cell has a check, so that each shows the
    same ✅/❌ report (tutor.grading). The source edition first runs the hidden
    ``grade(<check name>, <expression>)`` (outside the ``with``, so nothing a learner binds can
    swallow it; first, so that feedback shows the check's diagnosis). The self-study edition's
    ``keep_going=True`` reports a failure on stderr instead of raising: Run All goes on."""
    try:
        tokens = list(tokenize.generate_tokens(iter(body.splitlines(keepends=True)).__next__))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise LessonError(f"{lesson}: graded cell {grade_id!r} does not tokenize: {exc}") from None
    if any(tok.type == tokenize.STRING and tok.start[0] != tok.end[0] for tok in tokens):
        raise LessonError(f"{lesson}: graded cell {grade_id!r} has a multi-line string (its body gets indented)")
    visible = ([f"check({check[0]!r}, {check[1]})"] if check else []) + ([body] if body else []) or ["pass"]
    hidden = []
    if check and edition == "source":
        hidden = ["### BEGIN HIDDEN TESTS", "from tutor.grading import grade", f"grade({check[0]!r}, {check[1]})",
                  "### END HIDDEN TESTS"]
    keep_going = ", keep_going=True" if edition == "selfstudy" else ""
    imports = "from tutor.grading import check, test_cell" if check else "from tutor.grading import test_cell"
    return "\n".join(hidden + [imports, f"with test_cell({grade_id!r}{keep_going}):",
                                textwrap.indent("\n".join(visible), "    ")])


def nbgrader_meta(grade_id, *, solution=False, grade=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def read_lesson(name):
    """Parse lessons/<name>.py and check its cell metadata; returns jupytext cells."""
    path = LESSONS / f"{name}.py"
    cells = jupytext.read(path, fmt="py:percent").cells
    code_cells = [c for c in cells if c.cell_type == "code"]
    if not code_cells:
        raise LessonError(f"{name}: a lesson needs a setup code cell")
    exercised, provided = set(), set()
    for cell in cells:
        unknown = set(cell.metadata) - LESSON_KEYS - JUPYTEXT_KEYS
        if unknown:
            raise LessonError(f"{name}: unknown cell metadata {sorted(unknown)}; allowed: {sorted(LESSON_KEYS)}")
        meta = cell.metadata
        roles = [k for k in ("exercise", "provided", "grade_id") if k in meta]
        if len(roles) > 1:
            raise LessonError(f"{name}: a cell may be only one of exercise/provided/grade_id, got {roles}")
        if cell.cell_type == "markdown" and set(meta) - {"tags"} - JUPYTEXT_KEYS:
            raise LessonError(f"{name}: markdown cells take no metadata but tags, got {dict(meta)}")
        bad_tags = set(meta.get("tags", [])) - set(EDITION_TAGS)
        if bad_tags:
            raise LessonError(f"{name}: unknown tags {sorted(bad_tags)}; allowed: {sorted(EDITION_TAGS)}")
        if "exercise" in meta:
            exercised.update(split_names(meta["exercise"], "exercise", name))
        if "provided" in meta:
            provided.update(split_names(meta["provided"], "provided", name))
        if "grade_id" in meta:
            if not GRADE_ID.match(str(meta["grade_id"])):
                raise LessonError(f"{name}: grade_id {meta['grade_id']!r} must match {GRADE_ID.pattern}")
            points = meta.get("points")
            if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
                raise LessonError(f"{name}: graded cell {meta['grade_id']!r} needs points > 0, got {points!r}")
        elif "points" in meta:
            raise LessonError(f"{name}: points= without grade_id=")
        if "check" in meta:
            parse_check(meta["check"], name)
        if "drill" in meta and "exercise" not in meta:
            raise LessonError(f"{name}: drill= goes with exercise=")
    first = code_cells[0].metadata
    if any(k in first for k in ("exercise", "provided", "grade_id", "check")):
        raise LessonError(f"{name}: the first code cell is the setup cell and must be plain code")
    both = exercised & provided
    if both:
        raise LessonError(f"{name}: {sorted(both)} both graded and provided in the same chapter")
    return cells


def markdown_sources(name):
    """The Chinese text of each markdown cell of the lesson, in order, as the build writes it: the keys
    (msgid) of its English catalogue."""
    return [c.source.strip("\n") for c in read_lesson(name) if c.cell_type == "markdown"]


def english(name):
    """{Chinese markdown cell: its English} from lessons/en/<name>.po: the translated entries that are
    neither fuzzy nor obsolete (gettext's rule: a fuzzy entry is not used)."""
    path = CATALOGUES / f"{name}.po"
    if not path.exists():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path)) if e.translated()}


def build_notebook(name, edition, lang="zh"):
    """The source (``edition="source"``) or self-study (``"selfstudy"``) notebook, solutions in place;
    ``lang="en"``: each markdown cell's English from its catalogue (the Chinese where it has none)."""
    cells = read_lesson(name)
    translations = english(name) if lang == EN else {}
    number = name.split("_")[0]
    out, seen_ids, setup_done = [], set(), False
    for cell in cells:
        meta = dict(cell.metadata)
        tags = meta.get("tags", [])
        if any(EDITION_TAGS[t] != edition for t in tags):
            continue
        body = cell.source.strip("\n")
        position = len(out)
        locked_id = f"{number}_cell_{position}"
        if cell.cell_type == "markdown":
            nb_cell = nbformat.v4.new_markdown_cell(translations.get(body, body), id=locked_id)
            nb_cell.metadata["nbgrader"] = nbgrader_meta(locked_id, locked=True)
            out.append(nb_cell)
            continue
        cell_meta, grade_id = {}, locked_id
        if not setup_done:
            setup_done = True
            # Every edition: report() for the self-checks, and tutor's integrity snapshot is
            # taken here, before any learner code runs.
            body += "\nfrom tutor.grading import report"
            nbg = nbgrader_meta(locked_id, locked=True)
        elif "exercise" in meta:
            names = split_names(meta["exercise"], "exercise", name)
            code = "\n\n\n".join(reference_source(n, name, keep_markers=True) for n in names)
            if meta.get("drill"):  # the body holds the drill's docstrings, which replace the reference's
                body = drill_source(code, body, name)
            else:
                body = "\n\n\n".join([code] + ([body] if body else []))
            grade_id = "impl_" + "_".join(names)
            nbg = nbgrader_meta(grade_id, solution=True)
        elif "provided" in meta:
            names = (earlier_components(name, cells) if meta["provided"] == EARLIER
                     else split_names(meta["provided"], "provided", name))
            sources = [reference_source(n, name, keep_markers=False) for n in names]
            body = "\n\n\n".join(sources + ([body] if body else []))
            cell_meta["jupyter"] = {"source_hidden": True}
            nbg = nbgrader_meta(locked_id, locked=True)
        elif "grade_id" in meta:
            grade_id = str(meta["grade_id"])
            check = parse_check(meta["check"], name) if "check" in meta else None
            body = graded_cell_source(grade_id, check, body, edition, name)
            nbg = nbgrader_meta(grade_id, grade=True, locked=True, points=meta["points"])
        elif "check" in meta:
            body = report_call(*parse_check(meta["check"], name), body)
            nbg = nbgrader_meta(locked_id, locked=True)
        else:
            nbg = nbgrader_meta(locked_id, locked=True)
        if grade_id in seen_ids:
            raise LessonError(f"{name}: duplicate grade_id {grade_id!r}")
        seen_ids.add(grade_id)
        cell_meta["nbgrader"] = nbg
        out.append(nbformat.v4.new_code_cell(body, id=grade_id, metadata=cell_meta))
    if any(c.metadata["nbgrader"]["grade"] for c in out if c.cell_type == "code"):
        header = next(c for c in out if c.cell_type == "markdown")
        header.source += (HAND_IN_EN if lang == EN else HAND_IN).format(name=name)
    nb = nbformat.v4.new_notebook(cells=out, metadata=copy.deepcopy(NOTEBOOK_METADATA))
    nb.nbformat_minor = 5
    return nb


def lock_for_jupyterlab(nb):
    """Lock what nbgrader locks (``editable/deletable: false``) and drop the nbgrader metadata,
    except on graded cells: with it, nbgrader's Validate (button or ``nbgrader validate``) judges a
    self-study notebook by its graded cells, as it judges the release."""
    for cell in nb.cells:
        nbg = cell.metadata.pop("nbgrader")
        if nbg["grade"]:
            cell.metadata["nbgrader"] = nbg
        if nbg["locked"]:
            cell.metadata["deletable"] = False
            cell.metadata["editable"] = False
    return nb


def to_selfstudy(nb):
    """Clear solution regions exactly as nbgrader does, then lock as in JupyterLab."""
    config = load_nbgrader_config()
    resources = {}
    nb, resources = ClearSolutions(config=config).preprocess(nb, resources)
    nb, resources = ClearOutput(config=config).preprocess(nb, resources)
    return lock_for_jupyterlab(nb)


def answer_key_notebook(name, lang="zh"):
    """The self-study notebook with the reference solutions in place (not executed): what a
    learner's notebook shows once every exercise is solved."""
    return lock_for_jupyterlab(build_notebook(name, "selfstudy", lang))


def english_answer_key(name):
    """The English answer key: answer_keys/<name>.ipynb (cells, outputs) with each markdown
    cell in English, matched by cell id. None while that answer key does not exist."""
    path = ANSWER_KEYS / f"{name}.ipynb"
    if not path.exists():
        return None
    key = nbformat.read(str(path), as_version=4)
    text = {c.id: c.source for c in answer_key_notebook(name, EN).cells if c.cell_type == "markdown"}
    for cell in key.cells:
        if cell.cell_type == "markdown" and cell.id in text:
            cell.source = text[cell.id]
    return key


def write_notebook(nb, path):
    nbformat.validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def generate_release(names, everything):
    """``nbgrader generate_assignment`` from the repository root (one call for a full build);
    each release/<name>/ must then hold only the notebook."""
    for assignment in ["*"] if everything else names:
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--no-db", "--force",
               "--log-level=WARN"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[2:])} failed:\n{proc.stdout}\n{proc.stderr}")
    for name in names:
        files = sorted(str(p.relative_to(RELEASE)) for p in (RELEASE / name).rglob("*") if p.is_file())
        if files != [f"{name}/{name}.ipynb"]:
            raise RuntimeError(f"release/{name}/ must hold only {name}.ipynb, found {files}")


def stored_sanitize_patterns():
    """(regex, replacement) pairs, as nbval reads them, of the sections of tools/nbval_sanitize.cfg
    marked ``stored: sanitised``: what changes from run to run on one machine."""
    sections = re.split(r"^(?=\[)", SANITIZE_FILE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return get_sanitize_patterns("".join(s for s in sections if re.search(rf"^{STORED_SANITISED}$", s, re.M)))


def sanitize_text(text, patterns):
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    return text


def sanitize_outputs(executed, source):
    """Keep the executed outputs as a reader should see them: real numbers, figures as PNG; only
    what changes from run to run on one machine is sanitised (the ``stored: sanitised`` rules of
    tools/nbval_sanitize.cfg); streams coalesced as nbval does; metadata as in ``source``.

    nbval compares with every rule of the file and ignores PNG bytes, so the stored numbers need
    only be reproducible here (seeded runs), and a figure that stops rendering still fails: its
    ``<Figure size ... with N Axes>`` line is compared. matplotlib writes no date into a PNG: a
    rebuild on the same machine gives the same bytes.
    """
    patterns = stored_sanitize_patterns()
    executed.metadata = copy.deepcopy(source.metadata)
    for cell, src_cell in zip(executed.cells, source.cells):
        cell.metadata = copy.deepcopy(src_cell.metadata)
        if cell.cell_type != "code":
            continue
        outputs = []  # execution counts stay (1, 2, ... in order): nbval skips cells without one
        for output in coalesce_streams(cell.outputs):
            shown_as = output.pop("metadata", {})
            if output.output_type in ("display_data", "execute_result"):
                data = output.data
                for mime in VOLATILE_MIME:
                    data.pop(mime, None)
                if not data:
                    continue
                # a retina PNG's size on screen (half its pixels: tutor/plots/style.py), nothing else
                output.metadata = {mime: shown_as[mime] for mime in sorted(shown_as) if mime in data}
                for mime, value in data.items():
                    if isinstance(value, str) and mime.startswith("text/"):
                        data[mime] = sanitize_text(value, patterns)
            elif output.output_type == "stream":
                output.text = sanitize_text(output.text, patterns)
            outputs.append(output)
        cell.outputs = outputs
    return executed


def execute_answer_key(name, nb):
    """Run the answer key in answer_keys/ (nbval's cwd too); returns (notebook, seconds)."""
    ANSWER_KEYS.mkdir(parents=True, exist_ok=True)
    executed = copy.deepcopy(nb)
    saved = {k: os.environ.pop(k) for k in ("MPLBACKEND", "NBGRADER_EXECUTION") if k in os.environ}
    start = time.perf_counter()
    try:
        NotebookClient(executed, timeout=EXECUTE_TIMEOUT, kernel_name="python3",
                       resources={"metadata": {"path": str(ANSWER_KEYS)}}).execute()
    finally:
        os.environ.update(saved)
    seconds = time.perf_counter() - start
    return sanitize_outputs(executed, nb), seconds


def remove_stale(names):
    """Delete generated files of lessons that no longer exist (full builds only)."""
    keep = set(names)
    for folder in (SOURCE, RELEASE):
        for path in folder.iterdir() if folder.exists() else []:
            if path.is_dir() and LESSON_NAME.match(path.name) and path.name not in keep:
                shutil.rmtree(path)
    for folder in (NOTEBOOKS, ANSWER_KEYS, NOTEBOOKS / EN, ANSWER_KEYS / EN):
        for path in folder.glob("*.ipynb") if folder.exists() else []:
            if path.stem not in keep:
                path.unlink()


def build_editions(name):
    """source/, notebooks/ and notebooks/en/ for one lesson; returns the answer key to execute."""
    write_notebook(build_notebook(name, "source"), SOURCE / name / f"{name}.ipynb")
    write_notebook(to_selfstudy(build_notebook(name, "selfstudy")), NOTEBOOKS / f"{name}.ipynb")
    write_notebook(to_selfstudy(build_notebook(name, "selfstudy", EN)), NOTEBOOKS / EN / f"{name}.ipynb")
    untranslated = len(set(markdown_sources(name)) - set(english(name)))
    if untranslated:
        print(f"notebooks/{EN}/{name}.ipynb: {untranslated} markdown cells have no current English and stay in "
              f"Chinese; `.venv/bin/python -m tools.translate check {name}` names them", file=sys.stderr, flush=True)
    return answer_key_notebook(name)


def write_english_answer_key(name):
    key = english_answer_key(name)
    if key is not None:
        write_notebook(key, ANSWER_KEYS / EN / f"{name}.ipynb")


def contract_doc():
    """docs/CONTRACT.md: the public contract, chapter by chapter, from the registry."""
    lines = ["# The public contract", "",
             "<!-- Generated by tools/build.py from contract/__init__.py (the registry): edit the registry, then",
             "     run `make build`; tests/test_registry.py fails when this file differs. -->", "",
             "Every name `solutions` exports, where it is taught and what a learner's version must honour.",
             "Kinds: " + "; ".join(f"**{k}**: {v}" for k, v in contract.KINDS.items()) + ".",
             "A classic mistake's explanation, in 中文 and English, is `tutor.mistakes.MISTAKES[id]`.",
             "Shapes are batch-first; a boolean mask is True where attention is allowed. The LLM components'",
             "conventions are explained in docs/CONTRACT_LLM.md.", ""]
    titles = {n[:2]: n for n in lesson_names()}
    for number in sorted({c.chapter for c in contract.COMPONENTS}):
        lines += [f"## {titles.get(number, number)}", "",
                  "| name | kind | signature | contract | proven by | classic mistakes it names |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for c in contract.chapter(number):
            proof = ", ".join(f"check `{k}`" for k in c.checks) or (f"`{c.tested_by}`" if c.tested_by else "")
            signature = f"`({c.signature})`" if c.signature is not None else ""
            named = ", ".join(f"`{m}`" for m in c.mistakes)
            lines.append(f"| `{c.name}` | {c.kind} | {signature} | {c.summary} | {proof} | {named} |")
            lines += [f"| `{c.name}.{m}` | | `({sig})` | | | |" for m, sig in c.methods.items()]
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NN_topic", help="build only these lessons")
    parser.add_argument("--no-execute", action="store_true", help="do not execute the answer keys")
    args = parser.parse_args(argv)
    available = lesson_names()
    names = args.only or available
    missing = [n for n in names if n not in available]
    if missing:
        parser.error(f"no lesson file for {missing}; available: {available}")
    start = time.perf_counter()
    CONTRACT_DOC.parent.mkdir(exist_ok=True)
    CONTRACT_DOC.write_text(contract_doc(), encoding="utf-8")
    if not args.only:
        remove_stale(available)
    keys, broken = {}, []
    for name in names:
        try:
            keys[name] = build_editions(name)
        except LessonError as exc:  # build the other lessons, fail at the end
            broken.append(name)
            print(f"lesson error: {exc}", file=sys.stderr, flush=True)
    names = [n for n in names if n in keys]
    generate_release(names, everything=not args.only and not broken)
    print(f"built source/, release/, notebooks/ for {', '.join(names)} in {time.perf_counter() - start:.1f} s",
          flush=True)
    if args.no_execute:
        for name in names:  # from the answer keys as they are
            write_english_answer_key(name)
        if broken:
            sys.exit(f"not built: {', '.join(broken)}")
        return
    failed = []
    for name in names:
        try:
            answer_key, seconds = execute_answer_key(name, keys[name])
        except CellExecutionError as exc:
            failed.append(name)
            print(f"FAILED to execute {name} (its answer key is left as it was):\n{exc}", file=sys.stderr, flush=True)
            continue
        write_notebook(answer_key, ANSWER_KEYS / f"{name}.ipynb")
        write_english_answer_key(name)
        print(f"executed answer_keys/{name}.ipynb in {seconds:.1f} s", flush=True)
    if failed or broken:
        sys.exit(f"not built: {', '.join(broken) or '-'}; answer keys failed to execute: {', '.join(failed) or '-'}")


if __name__ == "__main__":
    try:
        main()
    except LessonError as exc:
        sys.exit(f"lesson error: {exc}")
