"""One report everywhere (issue 12): the learner sees the same bilingual ✅/❌ report in the release's
visible tests, the self-study notebook, ``nbgrader validate`` and the feedback page, and never a
traceback through the grader, an absolute path, or math that needs the internet.

Fast tests drive ``tutor.grading.test_cell``/``check`` directly; the slow ones execute real
notebooks and run the real nbgrader commands in temporary directories.
"""
import html
import inspect
import json
import re
import shutil
import sys

import nbformat
import pytest
import torch
from nbclient import NotebookClient

import solutions
from grader import feedback, insight
from pipeline_helpers import LESSONS, ROOT, build, read_nb
from tools.simulate_class import nbgrader, read_gradebook, setup_course
from tutor import checks, lang
from tutor.grading import FINISH_FIRST_LINE, INTERRUPTED_LINE, Interrupted, TestFailure, check, test_cell

# What must never reach a learner: a Python traceback, a machine path, the grader's own files.
LEAKS = re.compile(r"Traceback|File \"|site-packages|/tutor/|grading\.py|" + re.escape(str(ROOT)))


def _stub(*args, **kwargs):
    raise NotImplementedError("待实现 / Not implemented yet")


def _failure(body, grade_id="cell_id", keep_going=False):
    """Run ``body`` (a callable) inside ``test_cell``; the TestFailure it raises (or None)."""
    try:
        with test_cell(grade_id, keep_going=keep_going):
            body()
    except TestFailure as exc:
        assert exc._render_traceback_() == exc.report.split("\n")
        return exc
    return None


def test_a_bare_assert_becomes_one_bilingual_line():
    shape = (2, 5)
    with pytest.raises(TestFailure) as info:
        with test_cell("cell_id"):  # the assert sits in the test cell itself, as in a notebook
            assert shape == (2, 4, 5), "attn 形状应为 (2, 4, 5) / attn must be (2, 4, 5)"
    report = info.value.report
    assert report.startswith("❌ cell_id: attn 形状应为 (2, 4, 5) / attn must be (2, 4, 5)")
    assert "assert shape == (2, 4, 5)" in report and not LEAKS.search(report)


def test_a_stub_asks_to_finish_that_exercise():
    class MultiHeadAttention:
        __init__ = _stub

    exc = _failure(lambda: MultiHeadAttention())
    assert exc.report.startswith(FINISH_FIRST_LINE.format(name="cell_id", exercise="_stub")), exc.report


def test_an_undefined_name_asks_to_run_its_cell_first():
    exc = _failure(lambda: undefined_component)  # noqa: F821
    assert "undefined_component" in exc.report and "run the cell that defines it first" in exc.report


def test_a_crash_in_the_test_itself_blames_the_return_value_not_the_test():
    weights = [0, 1, 2]  # say, a learner's output with one axis too few
    with pytest.raises(TestFailure) as info:
        with test_cell("cell_id"):
            weights[3]
    assert "IndexError" in info.value.report and "wrong type or shape" in info.value.report


def test_keep_going_reports_on_stderr_and_does_not_raise(capsys):
    assert _failure(lambda: _stub(), keep_going=True) is None
    out, err = capsys.readouterr()
    assert err.startswith(FINISH_FIRST_LINE.format(name="cell_id", exercise="_stub")) and out == "", err
    assert _failure(lambda: None, keep_going=True) is None
    out, err = capsys.readouterr()
    assert out.startswith("✅ cell_id:") and err == ""


def test_check_raises_the_check_report():
    def softmax(x, axis=-1):
        return x

    exc = _failure(lambda: check("softmax", softmax), "softmax_is_stable")
    expected = checks.run_check("softmax", softmax)
    assert not expected.passed and exc.report == f"❌ {expected.message}"
    assert "softmax" in _failure(lambda: check("softmax", _stub)).report


def test_keyboard_interrupt_is_not_swallowed():
    """An interrupt still fails the cell (Run All stops), shown as one line instead of a traceback."""
    def body():
        raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        _failure(body, keep_going=True)
    assert info.value._render_traceback_() == [INTERRUPTED_LINE.format(name="cell_id")]


def _formulas(markdown):
    """Every $...$ and $$...$$ outside code, as feedback.tex_to_mathml finds them."""
    found = []
    for part in feedback._CODE.split(markdown)[::2]:
        found += feedback._DISPLAY.findall(part) + feedback._INLINE.findall(feedback._DISPLAY.sub("", part))
    return found


def test_every_lesson_formula_converts_to_mathml():
    """Feedback pages draw math with MathML: every formula of every lesson becomes one <math>
    element (a formula latex2mathml rejects stays TeX in a code span, and fails here)."""
    for name in LESSONS:
        for cell in build.read_lesson(name):
            if cell.cell_type == "markdown":
                converted = feedback.tex_to_mathml(cell.source)
                assert converted.count("<math") == len(_formulas(cell.source)), \
                    f"{name}: a formula did not become MathML in:\n{converted[:500]}"


@pytest.mark.parametrize("tex", [r"$x^$", r"$\left( x$"])
def test_a_formula_that_cannot_convert_is_caught(tex):
    """What the test above would see for a broken formula: no <math> for it."""
    assert feedback.tex_to_mathml(tex).count("<math") < len(_formulas(tex)) == 1


def _graded_cell(*outputs, source="grade('softmax', softmax)"):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata.nbgrader = {"grade": True, "grade_id": "softmax_matches_reference", "points": 1,
                              "solution": False, "locked": True}
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def _stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def _error(ename, evalue):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [evalue]}


SECRET = "def softmax(x, axis=-1):  # the reference's own line"


@pytest.mark.parametrize(("outputs", "kind", "mistakes"), [
    ([_stream("✅ softmax: 5 个用例全部通过 / all 5 cases passed\n")], "passed", ()),
    ([_stream(SECRET)], "passed", ()),
    ([_error("TestFailure", f"❌ softmax: ... 诊断 / diagnosis [softmax_unstable]: ... {SECRET}")], "failed",
     ("softmax_unstable",)),
    ([_error("TestFailure", "❌ softmax: [made_up_id] [softmax_unstable] [softmax_unstable]")], "failed",
     ("softmax_unstable",)),
    ([_error("TimedOut", "❌ 超时 / Timed out")], "timeout", ()),
    ([_error("KernelLost", "lost")], "kernel_lost", ()),
    ([_error("TestFailure", "❌ x: your code raised MemoryError: ")], "memory", ()),
    ([_error("TestFailure", "❌ softmax: 尚未实现 / not implemented yet")], "not_implemented", ()),
    ([_stream(SECRET, "stderr")], "failed", ()),
])
def test_a_graded_cell_is_classified_from_known_names_only(outputs, kind, mistakes):
    """classify reads the kind of failure and the registry's mistake ids, nothing else; an unknown id
    is dropped, a repeated one named once, stderr fails the cell as nbgrader scores it."""
    verdict = feedback.classify(_graded_cell(*outputs).outputs)
    assert (verdict.kind, verdict.mistakes) == (kind, mistakes)


def test_a_sealed_page_keeps_no_output_of_the_kernel():
    """SealedFeedback on a small notebook: a learner cell's print and a graded cell's report (both
    holding a reference line) are gone; the graded cell says ❌ and names the mistake from the
    registry; a note opens the page."""
    learner = nbformat.v4.new_code_cell("print(REFERENCE)")
    learner.metadata.nbgrader = {"grade": False, "grade_id": "impl_softmax", "solution": True, "locked": False}
    learner.outputs = [nbformat.from_dict(_stream(SECRET))]
    graded = _graded_cell(_error("TestFailure", f"❌ [softmax_unstable] {SECRET}"))
    nb = nbformat.v4.new_notebook(cells=[learner, graded])
    sealed, _ = feedback.SealedFeedback().preprocess(nb, {})
    text = "\n".join(o.get("text", "") for c in sealed.cells for o in c.get("outputs", []))
    assert SECRET not in text and sealed.cells[1].outputs == []
    assert text.splitlines()[0] == "❌ 未通过 / did not pass" and "[softmax_unstable]" in text, text
    assert sealed.cells[0].cell_type == "markdown" and sealed.cells[0].source == " / ".join(feedback.SEALED_NOTE)


# ---------------------------------------------------------------- slow: real notebooks, real nbgrader

def execute(nb, cwd):
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def outputs_text(cell):
    parts = []
    for out in cell.outputs:
        if out.output_type == "error":
            parts.append("\n".join(out.traceback))
        elif out.output_type == "stream":
            parts.append(out.text)
    return "\n".join(parts)


def reference_code(name, edit=None):
    code = build.strip_markers(inspect.getsource(getattr(solutions, name)))
    if edit:
        assert code.count(edit[0]) == 1, f"solutions.{name} no longer holds {edit[0]!r}"
        code = code.replace(*edit)
    return code


def cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


# The classic mistakes of chapters 01 and 02: scores not divided by sqrt(d_k); heads merged
# without moving H back next to d_k.
NO_SCALE = ("attention_numpy", (" / math.sqrt(d_k)", ""))
MERGE_WITHOUT_TRANSPOSE = ("out.transpose(1, 2).contiguous().view(", "out.reshape(")


@pytest.mark.slow
def test_release_visible_test_names_a_planted_mistake(tmp_path):
    name, edit = NO_SCALE
    nb = read_nb(ROOT / "release" / "01_attention" / "01_attention.ipynb")
    cell(nb, "impl_softmax").source = reference_code("softmax")
    cell(nb, f"impl_{name}").source = reference_code(name, edit)
    namespace = {}
    exec("import math\nimport numpy as np\n" + reference_code("softmax") + "\n" + reference_code(name, edit), namespace)
    expected = checks.run_check(name, namespace[name])
    assert not expected.passed and expected.diagnosis, f"the planted mistake is not diagnosed: {expected.message}"

    execute(nb, tmp_path)
    graded = cell(nb, "attention_numpy_matches_reference")
    errors = [o for o in graded.outputs if o.output_type == "error"]
    assert [o.ename for o in errors] == ["TestFailure"], outputs_text(graded)
    report = outputs_text(graded)
    assert f"[{expected.diagnosis}]" in report and report.startswith("❌ attention_numpy"), report
    assert not LEAKS.search(report), report


@pytest.mark.slow
def test_release_wrong_shape_is_reported_not_crashed(tmp_path):
    """Chapter 02: attention weights averaged over the heads. The shape test says so; the check
    cell reports the shape and stops before its visible tests could index the wrong tensor."""
    nb = read_nb(ROOT / "release" / "02_multihead" / "02_multihead.ipynb")
    cell(nb, "impl_MultiHeadAttention").source = reference_code(
        "MultiHeadAttention", ("return self.W_o(out), attn", "return self.W_o(out), attn.mean(1)"))
    execute(nb, tmp_path)
    for grade_id in ("mha_output_shapes", "mha_matches_reference"):
        graded = cell(nb, grade_id)
        report = outputs_text(graded)
        assert [o.ename for o in graded.outputs if o.output_type == "error"] == ["TestFailure"], report
        assert "IndexError" not in report and not LEAKS.search(report), report
    assert "(2, 4, 5, 5)" in outputs_text(cell(nb, "mha_output_shapes"))
    assert re.search(r"形状|shape", outputs_text(cell(nb, "mha_matches_reference")))


def save_untrained_gpt(path):
    """A GPT of chapter 08's recipe (untrained: only its shapes matter here) saved as chapter 08 saves it."""
    tokenizer = solutions.CharTokenizer("".join(solutions.load_poems(ROOT / "data" / "tang_poems.txt")))
    model = solutions.GPT(tokenizer.vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=3,
                          max_len=128)
    torch.save(model.state_dict(), path)


@pytest.mark.slow
@pytest.mark.parametrize("name", LESSONS)
def test_run_all_on_a_fresh_selfstudy_notebook_keeps_going(name, tmp_path):
    """Issue 16 item 6: no cell of an untouched self-study notebook raises, so Run All shows every
    figure; each graded cell reports ❌ on stderr, so Validate still fails it."""
    if name in ("09_decoding", "12_posttrain"):  # from chapter 08, which saved its model here (else they train)
        save_untrained_gpt(tmp_path / "gpt_poems.pt")
    nb = execute(read_nb(ROOT / "notebooks" / f"{name}.ipynb"), tmp_path)
    raised = {c.get("id"): outputs_text(c)[-300:] for c in nb.cells
              if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)}
    assert not raised, f"{name}: cells raise on a fresh notebook: {raised}"
    for graded in (c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")):
        stderr = "".join(o.text for o in graded.outputs if o.output_type == "stream" and o.name == "stderr")
        assert stderr.startswith("❌"), f"{name}: graded cell {graded.id} does not report ❌ on stderr"


def validate(path):
    proc = nbgrader(ROOT, "validate", str(path))  # exits 0 whatever it finds: read the output
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_nbgrader_validate_tells_the_truth_on_selfstudy_notebooks(tmp_path):
    """``nbgrader validate`` on the self-study edition (and so on a learner's copy of it): unsolved
    or wrong fails, solved succeeds."""
    name = "01_attention"
    unsolved = tmp_path / "unsolved" / f"{name}.ipynb"
    unsolved.parent.mkdir()
    shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", unsolved)
    solved = tmp_path / "solved" / f"{name}.ipynb"
    solved.parent.mkdir()
    nbformat.write(build.answer_key_notebook(name), str(solved))
    wrong = tmp_path / "wrong" / f"{name}.ipynb"
    wrong.parent.mkdir()
    nb = build.answer_key_notebook(name)
    cell(nb, f"impl_{NO_SCALE[0]}").source = reference_code(*NO_SCALE)
    nbformat.write(nb, str(wrong))

    out = validate(unsolved)
    assert "Success!" not in out and "VALIDATION FAILED" in out, out[-2000:]
    assert "finish exercise softmax first" in out
    out = validate(wrong)
    assert "Success!" not in out and "VALIDATION FAILED" in out and "attention_numpy" in out, out[-2000:]
    out = validate(solved)
    assert "Success!" in out and "FAILED" not in out, out[-2000:]


@pytest.mark.slow
def test_feedback_pages_are_clean_and_read_offline(tmp_path):
    """Untouched and wrong submissions of chapter 02 through autograde and generate_feedback: no
    absolute path or grader internals on the page, math as MathML (no MathJax, no CDN), and no
    checksum or SQLAlchemy warnings in the instructor's log."""
    name = "02_multihead"
    course = tmp_path / "course"
    course.mkdir()
    setup_course(course, [name], ROOT / "source")
    wrong = read_nb(ROOT / "source" / name / f"{name}.ipynb")
    cell(wrong, "impl_MultiHeadAttention").source = reference_code("MultiHeadAttention", MERGE_WITHOUT_TRANSPOSE)
    submissions = {"untouched": read_nb(course / "release" / name / f"{name}.ipynb"), "wrong": wrong}
    (course / "students.csv").write_text("id\n" + "\n".join(submissions) + "\n")
    nbgrader(course, "db", "student", "import", "students.csv")
    for student, nb in submissions.items():
        folder = course / "submitted" / student / name
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{name}.ipynb"))
    log = nbgrader(course, "autograde", name, "--force").stderr
    log += nbgrader(course, "generate_feedback", name, "--force").stderr
    assert "has changed!" not in log and "SAWarning" not in log, log[-3000:]

    machine_paths = [str(course), str(ROOT), sys.prefix, str(tmp_path)]
    for student in submissions:
        html = (course / "feedback" / student / name / f"{name}.html").read_text(encoding="utf-8")
        for path in machine_paths:
            assert path not in html, f"{student}: feedback shows the path {path}"
        assert not re.search(r"site-packages|Traceback \(most recent call last\)|tutor/grading", html), student
        assert "<math" in html and not re.search(r"cdnjs|MathJax\.Hub|mathjax[^ ]*\.js", html), \
            f"{student}: math is not MathML, or MathJax is still loaded"
        assert not re.search(r"<script[^>]+src=\"https?:", html), f"{student}: feedback loads a script from the web"
        assert "❌" in html, f"{student}: the failed cells show no report"
        assert "div.output_subarea pre { white-space: pre-wrap;" in html, f"{student}: long ❌ lines do not wrap"


def grade_hand_ins(course, name, notebooks, folder=None):
    """``notebooks`` ({student: notebook}) handed in for assignment ``name`` in ``course``, whose course folder
    is ``folder`` (``course`` itself, or course/en/ for the English class), autograded, feedback generated."""
    for student, nb in notebooks.items():
        hand_in = (folder or course) / "submitted" / student / name
        hand_in.mkdir(parents=True)
        nbformat.write(nb, str(hand_in / f"{name}.ipynb"))
        nbgrader(course, "db", "student", "add", student)
    nbgrader(course, "autograde", name, "--force")
    nbgrader(course, "generate_feedback", name, "--force")


# A hand-in that reads the reference, prints it into its outputs and raises it from inside a graded
# function (the check reports the exception), beside a right softmax and a classic mistake.
LEAK_PRINTED = """
REFERENCE = open({path!r}).read()
print(REFERENCE)
"""
LEAK_RAISED = """def scaled_dot_product_attention(Q, K, V, mask=None, dropout_p=0.0, training=False):
    raise ValueError(REFERENCE[:300])
"""


@pytest.mark.slow
def test_feedback_gives_back_nothing_the_code_produced_while_graded(tmp_path):
    """Through nbgrader autograde and generate_feedback: the reference the submission read and
    printed or raised reaches neither its feedback page nor anything the student can fetch, while
    the page still says ✅/❌ per graded cell and names the classic mistake of another exercise."""
    name = "01_attention"
    course = tmp_path / "course"
    course.mkdir()
    setup_course(course, [name], ROOT / "source")
    nb = read_nb(course / "release" / name / f"{name}.ipynb")
    reference = ROOT / "solutions" / "attention.py"
    cell(nb, "impl_softmax").source = reference_code("softmax") + LEAK_PRINTED.format(path=str(reference))
    cell(nb, "impl_scaled_dot_product_attention").source = LEAK_RAISED
    wrong, edit = NO_SCALE
    cell(nb, f"impl_{wrong}").source = reference_code(wrong, edit)
    grade_hand_ins(course, name, {"mallory": nb})

    autograded = (course / "autograded" / "mallory" / name / f"{name}.ipynb").read_text()
    released = (course / "release" / name / f"{name}.ipynb").read_text()  # stubs keep docstrings and signatures
    chunks = [line.strip() for line in reference.read_text().splitlines()
              if len(line.strip()) > 30 and json.dumps(line.strip(), ensure_ascii=False)[1:-1] not in released]
    assert any(c in autograded for c in chunks), "the attack did not reach the reference: the test proves nothing"
    for page in (course / "feedback" / "mallory").rglob("*"):
        if page.is_file():
            text = html.unescape(page.read_text(errors="replace"))
            leaked = [c for c in chunks if c in text]
            assert not leaked, f"{page.name} gives back the reference: {leaked[:3]}"
    page = html.unescape((course / "feedback" / "mallory" / name / f"{name}.html").read_text())
    assert "❌ 未通过 / did not pass" in page and "✅ 通过 / passed" in page and "[no_scale]" in page, page[-2000:]
    assert feedback.SEALED_NOTE[0].split("**")[1] in page


@pytest.mark.slow
def test_an_english_class_is_graded_and_fed_back_in_english(tmp_path, monkeypatch, capsys):
    """The English class (COURSE_LANG=en: nbgrader_config.py's course in en/, released from en/source/): a
    hand-in with a right softmax, the classic no-√d_k mistake and the later stubs untouched, through the real
    autograde and generate_feedback. The same answers handed in to the Chinese class, or written in the
    self-study copy of either edition, score the same cell by cell; the English page holds no Chinese
    character, and its verdicts, the named mistake and its note are English (the Chinese page's are
    bilingual), and so is the class report (python -m grader.insight)."""
    name = "01_attention"
    wrong, edit = NO_SCALE
    grades, pages = {}, {}
    for edition, source in (("zh", ROOT / "source"), ("en", ROOT / "en" / "source")):
        monkeypatch.setenv("COURSE_LANG", edition)
        course = tmp_path / edition
        course.mkdir()
        setup_course(course, [name], source)
        folder = course / source.relative_to(ROOT).parent  # the course folder: course/ or course/en/
        # alice hands in the release, bob the copy of the self-study edition (make lab's workspace)
        notebooks = {"alice": read_nb(folder / "release" / name / f"{name}.ipynb"),
                     "bob": read_nb(ROOT / "notebooks" / ("en" if edition == "en" else "") / f"{name}.ipynb")}
        answers = {"softmax": reference_code("softmax"), wrong: reference_code(wrong, edit)}
        for nb in notebooks.values():
            for exercise, code in answers.items():  # as a student of that edition writes it: its docstrings
                cell(nb, f"impl_{exercise}").source = lang.english_code(code) if edition == "en" else code
        grade_hand_ins(course, name, notebooks, folder)
        grades[edition] = read_gradebook(folder, course_id=f"shousi-transformer{'-en' if edition == 'en' else ''}")
        pages[edition] = html.unescape((folder / "feedback" / "alice" / name / f"{name}.html").read_text())

    scores = grades["en"][("alice", name)]
    assert scores == grades["zh"][("alice", name)] == grades["en"][("bob", name)] == grades["zh"][("bob", name)]
    assert 0 < sum(g.score for g in scores.values()) < sum(g.max_score for g in scores.values()), scores
    english, chinese = pages["en"], pages["zh"]
    found = sorted(set(lang.CJK.findall(english)))
    assert not found, f"Chinese on the English feedback page: {found}"
    assert all(line in english for line in ("✅ passed", "❌ did not pass", "❌ not implemented yet",
                                            "diagnosis [no_scale]: scores are not divided by √d_k",
                                            feedback.SEALED_NOTE[1].split("**")[1])), english[-3000:]
    assert "✅ 通过 / passed" in chinese and "诊断 / diagnosis [no_scale]" in chinese

    monkeypatch.chdir(tmp_path / "en")  # the class report of the English class (still COURSE_LANG=en): English
    assert insight.main([]) == 0
    report = capsys.readouterr().out
    assert "no_scale" in report and not lang.CJK.search(report), report
