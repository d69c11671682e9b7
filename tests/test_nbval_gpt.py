"""nbval regression of chapters 08, 09 and 12 (tests/test_nbval.py has the rest): 08 trains the GPT and
saves it as answer_keys/gpt_poems.pt, 09 and 12 load it. One file keeps them in order on one test worker.
Their English answer keys are compared with the Chinese ones instead of re-run (the suite's time budget)."""
import re

import pytest
from nbval.plugin import get_sanitize_patterns

from pipeline_helpers import GPT_CHAPTERS, SANITIZE, read_nb, rerun_and_compare
from tools import build
from tools.paths import ANSWER_KEYS

pytestmark = pytest.mark.slow


def test_chapter_08_reruns_trains_and_saves_its_model(record_property):
    rerun_and_compare("08_gpt", record_property)
    assert (ANSWER_KEYS / "gpt_poems.pt").exists(), "08's training cell did not save gpt_poems.pt"


def test_chapter_09_reruns_from_chapter_08s_model(record_property):
    if not (ANSWER_KEYS / "gpt_poems.pt").exists():
        pytest.fail("answer_keys/gpt_poems.pt missing: 09 starts from the model 08 saves; run this whole file")
    rerun_and_compare("09_decoding", record_property)


def test_chapter_12_reruns_from_chapter_08s_model(record_property):
    if not (ANSWER_KEYS / "gpt_poems.pt").exists():
        pytest.fail("answer_keys/gpt_poems.pt missing: 12 starts from the model 08 saves; run this whole file")
    rerun_and_compare("12_posttrain", record_property)


def numbers(cell, patterns):
    """The numbers a code cell's outputs print, after nbval's sanitising (timings and the like are gone)."""
    text = build.sanitize_text("".join(o.text if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
                                       for o in cell.get("outputs", [])), patterns)
    return set(re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text))


@pytest.mark.parametrize("name", GPT_CHAPTERS)
def test_english_key_shows_the_chinese_keys_numbers(name):
    """08, 09 and 12 train for minutes: `make test` re-runs their Chinese answer keys (above) and not the English
    ones, which `make build` executes from the same code. What proves the English key current: every code cell
    prints the numbers of the Chinese key's cell, compared as sets (a Chinese line may print a number twice,
    once for each language)."""
    patterns = get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8"))
    zh, en = ([c for c in read_nb(ANSWER_KEYS / edition / f"{name}.ipynb").cells if c.cell_type == "code"]
              for edition in ("", "en"))
    assert len(zh) == len(en), f"{name}: {len(zh)} code cells in Chinese, {len(en)} in English -- run `make build`"
    for zh_cell, en_cell in zip(zh, en):
        assert numbers(zh_cell, patterns) == numbers(en_cell, patterns), (
            f"{name} cell {zh_cell.get('id')}: the English answer key prints other numbers -- run `make build`")
