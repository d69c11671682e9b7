"""The English edition is English wherever a reader looks; the Chinese edition stays bilingual.

One switch: the English notebooks' setup cell sets ``COURSE_LANG=en`` (tools/build.py ``EN_SETUP``), and
``tutor.lang`` renders every line English only. Outside quoted data (poems, corpus samples, the Chinese
examples the lessons work on, listed below), the English notebooks' code cells and the English answer keys'
outputs hold no CJK character; the Chinese notebooks keep their bilingual stubs and messages.
"""
import re

import pytest

from pipeline_helpers import LESSONS, ROOT, read_nb
from tools import build, translate
from tools.paths import ANSWER_KEYS
from tutor import lang
from tutor.engine import messages

CJK = lang.CJK

# Quoted data in the English notebooks' code: the Chinese a reader of the English edition is meant to see.
# Each entry is a string literal (or the part of a line) that holds it; nothing else may hold Chinese.
QUOTED_IN_CODE = {
    "08_gpt": [
        '"banana，香蕉。\\n"',         # CharTokenizer's worked example: Chinese characters and punctuation
        '"nab香"', '"香蕉banana。\\n"',
        '"。\\n"',                      # the prompt: a full stop and a newline, the end of a poem
    ],
    "09_decoding": [
        '"，" and "。"', '"。"',         # is_regular_poem's docstring: the two punctuation marks it counts
        '"([^，。\\n]*)([，。])"', '"，。"',
        '"春风"', '"。\\n"', '"白日依山尽，黄河"', '"明月"',  # prompts
    ],
    "12_posttrain": [
        '"，" and "。"', '"。"', '"([^，。\\n]*)([，。])"', '"，。"',  # is_regular_poem's docstring and code
        '"，"',                          # poem_shape: commas read as full stops to split the lines
        '"。\\n"', '"春风"',              # prompts
    ],
}
# Code cells whose outputs show generated or corpus text (poems, samples, decoded prompts): Chinese is data there.
DATA_OUTPUTS = {
    "08_gpt": "corpus lines, tokenizer round trips and samples of the model",
    "09_decoding": "samples of the model, beams and prompts",
    "12_posttrain": "samples of the model before and after GRPO, DPO and LoRA",
}


# The English notebooks: the self-study edition, and the English class's nbgrader notebooks (nbgrader_config.py
# with COURSE_LANG=en): the instructor's, hidden tests included, and the release its students fetch.
ENGLISH_NOTEBOOKS = {"notebooks/en": "notebooks/en/{name}.ipynb", "en/source": "en/source/{name}/{name}.ipynb",
                     "en/release": "en/release/{name}/{name}.ipynb"}


def code_cjk(name, edition="notebooks/en"):
    """(cell id, line) of every line of an English notebook's code that holds CJK outside quoted data."""
    found = []
    for cell in read_nb(ROOT / ENGLISH_NOTEBOOKS[edition].format(name=name)).cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.split("\n"):
            rest = line
            for quoted in QUOTED_IN_CODE.get(name, []):
                rest = rest.replace(quoted, "")
            if CJK.search(rest):
                found.append((cell.id, line.strip()))
    return found


def output_texts(cell):
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            yield output.get("text", "")
        elif output.get("output_type") == "error":
            yield "\n".join([output.get("ename", ""), output.get("evalue", "")] + output.get("traceback", []))
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") and isinstance(value, str):
                yield value


def data_cells(name):
    """The answer key's cells whose outputs show generated or corpus text: they print from the model or the
    corpus (a sample, a decode, a poem)."""
    if name not in DATA_OUTPUTS:
        return set()
    key = read_nb(ANSWER_KEYS / "en" / f"{name}.ipynb")
    pattern = re.compile(r"decode|sample|generate|show_samples|show\(\*|poem|beam|lines\[|corpus|text\[|_text\(")
    return {c.id for c in key.cells if c.cell_type == "code" and pattern.search(c.source)}


def output_cjk(name):
    """(cell id, line) of every output line of the English answer key with CJK outside data cells; in a data
    cell, a line that still pairs Chinese with English (``中文 / English``)."""
    found, data = [], data_cells(name)
    for cell in read_nb(ANSWER_KEYS / "en" / f"{name}.ipynb").cells:
        if cell.cell_type != "code":
            continue
        for text in output_texts(cell):
            for line in text.split("\n"):
                if not CJK.search(line):
                    continue
                if cell.id in data and lang.english_only(line) == line:
                    continue
                found.append((cell.id, line.strip()[:160]))
    return found


@pytest.mark.parametrize("name", LESSONS)
@pytest.mark.parametrize("edition", ENGLISH_NOTEBOOKS)
def test_english_notebook_code_has_no_chinese_but_quoted_data(name, edition):
    found = code_cjk(name, edition)
    assert not found, f"{edition}/{name}: Chinese in the English notebook's code:\n" + "\n".join(map(str, found[:20]))


@pytest.mark.parametrize("name", LESSONS)
def test_english_class_notebooks_are_english(name):
    """The English class's notebooks (source and release) have English markdown (no Chinese outside code, as
    tests/test_translation.py holds the self-study edition to) and the English setup cell."""
    for edition in ("en/source", "en/release"):
        nb = read_nb(ROOT / ENGLISH_NOTEBOOKS[edition].format(name=name))
        chinese = [c.id for c in nb.cells if c.cell_type == "markdown" and translate.chinese_outside_code(c.source)]
        assert not chinese, f"{edition}/{name}: Chinese in markdown cells {chinese}"
        assert build.EN_SETUP in next(c for c in nb.cells if c.cell_type == "code").source


def test_the_english_class_is_a_course_of_its_own():
    """nbgrader_config.py with COURSE_LANG=en: another course folder (en/), course id and stub; without it the
    Chinese class in the repository, bilingual."""
    chinese, english = build.load_nbgrader_config(), build.load_nbgrader_config(build.EN)
    assert build.course_folder("zh") == ROOT and build.course_folder(build.EN) == ROOT / "en"
    assert chinese.CourseDirectory.course_id != english.CourseDirectory.course_id
    assert CJK.search(chinese.ClearSolutions.code_stub["python"])
    assert not CJK.search(english.ClearSolutions.code_stub["python"])
    with pytest.raises(Exception, match="COURSE_LANG 只能是 zh 或 en / COURSE_LANG must be zh or en, got 'fr'"):
        build.load_nbgrader_config("fr")


@pytest.mark.parametrize("name", LESSONS)
def test_english_answer_key_outputs_have_no_chinese_but_data(name):
    found = output_cjk(name)
    assert not found, f"{name}: Chinese in the English answer key's outputs:\n" + "\n".join(map(str, found[:20]))


@pytest.mark.parametrize("name", LESSONS)
def test_english_setup_cell_switches_the_language_and_the_chinese_one_does_not(name):
    english = read_nb(ROOT / "notebooks" / "en" / f"{name}.ipynb")
    chinese = read_nb(ROOT / "notebooks" / f"{name}.ipynb")
    setup_en = next(c for c in english.cells if c.cell_type == "code")
    assert build.EN_SETUP in setup_en.source
    assert not any(lang.VARIABLE in c.source for c in chinese.cells if c.cell_type == "code")


@pytest.mark.parametrize("name", LESSONS)
def test_chinese_edition_stays_bilingual(name):
    """The Chinese notebooks keep nbgrader's bilingual stub and their bilingual messages; the Chinese answer
    keys' check lines are bilingual."""
    nb = read_nb(ROOT / "notebooks" / f"{name}.ipynb")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    stub = build.load_nbgrader_config().ClearSolutions.code_stub["python"]
    if any("exercise" in c.metadata for c in build.read_lesson(name)):
        assert stub.split("\n")[0] in code and "在这里写你的代码" in code
        assert "中文：" in code or re.search(r" / [\u4e00-\u9fff]", code), f"{name}: Chinese docstrings gone"
    key = read_nb(ANSWER_KEYS / f"{name}.ipynb")
    lines = [line for c in key.cells if c.cell_type == "code" for t in output_texts(c) for line in t.split("\n")]
    passed = [line for line in lines if line.startswith("✅")]
    assert all(" / " in line and CJK.search(line) for line in passed if "visible tests passed" in line), name
    if any("visible tests passed" in line for line in passed):
        assert any("可见测试通过 / visible tests passed" in line for line in passed)


def test_the_switch_reaches_every_rendering(monkeypatch):
    """One switch, read at each call: the same message bilingual without it, English with it."""
    monkeypatch.delenv(lang.VARIABLE, raising=False)
    assert messages.say("wrong_shape", key="out", expected=(2, 3), got=(3, 2)) == (
        "out: 形状不对 / wrong shape: 期望 expected (2, 3), 得到 got (3, 2)")
    mid = next(iter(messages.MISTAKES)) if messages.MISTAKES else None
    monkeypatch.setenv(lang.VARIABLE, "en")
    assert messages.say("wrong_shape", key="out", expected=(2, 3), got=(3, 2)) == (
        "out: wrong shape: expected (2, 3), got (3, 2)")
    if mid:
        assert not CJK.search(messages.explain(mid))
    monkeypatch.setenv(lang.VARIABLE, "zh")
    assert lang.pick("尚未实现", "not implemented yet") == "尚未实现 / not implemented yet"


@pytest.mark.parametrize("line, english", [
    ("❌ softmax: 尚未实现 / not implemented yet", "❌ softmax: not implemented yet"),
    ("⏱️ softmax: 计时开始，目标 5 分钟 / timer started, target 5 min. 写好下面的单元格后运行检查 / write the cell "
     "below, then run the check", "⏱️ softmax: timer started, target 5 min. write the cell below, then run the check"),
    ("✅  1. softmax                          目标 / target  5 min   最好 / best -",
     "✅  1. softmax                          target  5 min   best -"),
    ("❌ mha: 用例 case 1/3 「无掩码 / no mask, B=2」", '❌ mha: case 1/3 "no mask, B=2"'),
    ("ValueError: x 应为 3 维 (B, T, d_model) / x must be 3-D (B, T, d_model); got (2, 3)",
     "ValueError: x must be 3-D (B, T, d_model); got (2, 3)"),
    ("greedy: 春风。 / 一年无事有", "greedy: 春风。 / 一年无事有"),  # data: no English half
])
def test_english_only(line, english):
    assert lang.english_only(line) == english


def test_english_code_drops_the_chinese_of_docstrings():
    source = ('def f(x):\n    """Key mask. / 键掩码。\n\n    Returns True where allowed. / 返回布尔张量，\n'
              '    可以看的位置为 True。\n\n    Attributes / 属性: ``w``\n\n    中文：一段中文。\n    第二行。\n'
              '    """\n'
              '    raise ValueError(f"x 应为 2 维 / x must be 2-D, got {x}")\n')
    assert lang.english_code(source) == ('def f(x):\n    """Key mask.\n\n    Returns True where allowed.\n\n'
                                         '    Attributes: ``w``\n    """\n'
                                         '    raise ValueError(f"x must be 2-D, got {x}")\n')


def test_drill_timer_and_progress_speak_english(monkeypatch, capsys, tmp_path):
    from tutor import drills, store
    monkeypatch.setenv(store.VARIABLE, str(tmp_path / store.FILE))
    monkeypatch.setenv(lang.VARIABLE, "en")
    drills.start("softmax")
    drills.progress()
    drills.reveal("softmax")  # locked: one line
    out = capsys.readouterr().out
    assert "timer started, target 5 min" in out and "drill progress" in out and "pass the check first" in out
    assert not CJK.search(out), out
    monkeypatch.delenv(lang.VARIABLE)
    drills.start("softmax")
    assert "计时开始" in capsys.readouterr().out
