"""nbval regression: every executed answer key re-runs top to bottom and reproduces its stored
outputs (sanitised with tools/nbval_sanitize.cfg; PNG bytes are not compared, but a figure that
stops rendering loses its ``<Figure ...>`` output and fails). Prints each chapter's run time.

Chapters 08 and 09 re-run in tests/test_nbval_gpt.py, in that order (09 loads the model 08's
training cell saves), so that the two long re-runs fall to two test workers."""
import pytest

from pipeline_helpers import GPT_CHAPTERS, LESSONS, rerun_and_compare

pytestmark = pytest.mark.slow  # every answer key re-run: `make test-fast` leaves them out

@pytest.mark.parametrize("name", [name for name in LESSONS if name not in GPT_CHAPTERS])
def test_answer_key_reruns_and_matches(name, record_property):
    rerun_and_compare(name, record_property)


@pytest.mark.parametrize("name", [name for name in LESSONS if name not in GPT_CHAPTERS])
def test_english_answer_key_reruns_and_matches(name, record_property):
    """The English answer keys are executed on their own (English outputs): they re-run as the Chinese ones do."""
    rerun_and_compare(name, record_property, "en")
