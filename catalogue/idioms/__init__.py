"""Idiomatic right answers, written as whole notebook cells, the way people really write PyTorch.

Each ``Idiom`` replaces one graded exercise cell of a chapter: ``cells[0]`` takes the place of the
exercise cell's code, ``cells[1:]`` are cells the learner inserts right after it (before the
tests). Every idiom is right: it passes the chapter's visible tests and the hidden check
(``tests/test_idioms.py`` runs them as the notebook does; the class simulation grades them with
``nbgrader autograde``). The code uses only what the notebook provides (setup imports, provided
cells, earlier exercises) and never the built-ins an exercise replaces.
"""
import importlib
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Idiom:
    id: str         # readable, unique: "mha_module_init_call"
    chapter: str    # "02_multihead"
    exercise: str   # the exercise cell it replaces, by the first name defined there: "MultiHeadAttention"
    cells: tuple    # code cells as the learner types them (cells[0] replaces the exercise cell)
    idioms: str     # the idioms it exercises, in words


def _cells(*sources):
    return tuple(textwrap.dedent(s).strip("\n") + "\n" for s in sources)


IDIOMS = []


def idiom(id, chapter, exercise, idioms, *sources):
    IDIOMS.append(Idiom(id, chapter, exercise, _cells(*sources), idioms))


# each topic module appends its idioms to IDIOMS; imported in teaching order, so IDIOMS is in course order
TOPICS = ("attention", "mha", "positional", "ffn_norm", "masks", "layers", "transformer", "copy_task", "gpt_data",
          "llm", "training", "decoding", "backward", "tokenizers", "posttrain", "efficiency")
for _topic in TOPICS:
    importlib.import_module(f"{__name__}.{_topic}")
