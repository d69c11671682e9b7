"""nbval regression of chapters 08, 09 and 12 (tests/test_nbval.py has the rest): 08 trains the GPT and
saves it as answer_keys/gpt_poems.pt, 09 and 12 load it. One file keeps them in order on one test worker."""
import pytest

from pipeline_helpers import rerun_and_compare
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



def test_english_chapters_08_09_and_12_rerun(record_property):
    """The English answer keys of 08, 09 and 12, executed on their own (COURSE_LANG=en), re-run in the same order."""
    rerun_and_compare("08_gpt", record_property, "en")
    assert (ANSWER_KEYS / "gpt_poems.pt").exists(), "08's training cell did not save gpt_poems.pt"
    rerun_and_compare("09_decoding", record_property, "en")
    rerun_and_compare("12_posttrain", record_property, "en")
