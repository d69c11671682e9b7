"""Lesson text a learner can follow: no mention of the documents the course was built from.

The course was written from seed documents (shared/seeds/) that learners never see. A sentence
such as "the source material says ..." or "seed 002's mask" points at something the learner
cannot read: the lesson must state the claim itself (as a common misconception) or drop it.
Random seeds (``torch.manual_seed``, ``seed=``, 随机种子) are of course fine.
"""
import re

import pytest

from tools.paths import ROOT

LESSONS = sorted((ROOT / "lessons").glob("*.py"))
# The stub docstrings reach learners too.
REFERENCE = sorted(p for p in (ROOT / "solutions").glob("*.py"))

SOURCE_DOCUMENT = re.compile(
    r"种子(?:文档|资料|材料)"                       # 种子文档 / 种子资料 (not 随机种子, 种子 10000)
    r"|参考材料|有材料|(?:一|几|两|另一)份(?:参考)?材料|本课程参考的"
    r"|seed\s*(?:资料|材料|文档)"
    r"|\bseeds?[-_ ]?0\d\d"                        # seed-002, seed 000, seed000, seeds 000
    r"|\bseed[-_ ]style|\bthe seeds?'s?\b|\bseed documents?\b|shared/seeds"
    r"|\b(?:source|reference) materials?\b",
    re.IGNORECASE,
)


def mentions(text):
    return [m.group(0) for m in SOURCE_DOCUMENT.finditer(text)]


@pytest.mark.parametrize("path", LESSONS + REFERENCE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_to_documents_the_learner_cannot_read(path):
    hits = [(n, line.strip()) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if mentions(line)]
    assert not hits, f"{path.relative_to(ROOT)} mentions the seed/source documents: {hits}"


@pytest.mark.parametrize("text", [
    "有材料说“单层约 3.15M”", "参考材料里的写法", "种子文档 000 的复制任务", "课程的 seed 资料 002",
    "seed-002 style: 1 = blocked", "constant 3e-4 (seed 000's run)", "def seed_style_greedy(model):",
    "the seed's version", "The reference material's loop", "本课程参考的一份材料", "另一份参考材料用 triu",
    "as the source material says",
])
def test_pattern_catches_references(text):
    assert mentions(text), text


@pytest.mark.parametrize("text", [
    "torch.manual_seed(0)", "np.random.seed(0)", "gen = torch.Generator().manual_seed(10_000)",
    "stack_stats(variant, num_layers, d=64, seed=1)", "每章开头的设置单元固定了随机种子",
    "留出集用自己的随机数生成器（种子 10000）",
    "两个随机种子都验证过", "seeded by ``seed``", "只跑了一个种子", "seeds 0 and 1",
])
def test_pattern_spares_random_seeds(text):
    assert not mentions(text), text


# One vocabulary (chapter 00's glossary): each term has one spelling in the lessons, the docstrings
# learners read and the check messages.
VOCABULARY_FILES = LESSONS + REFERENCE + [ROOT / "contract" / "__init__.py"] + sorted((ROOT / "tutor").glob("*.py"))
OTHER_SPELLINGS = re.compile(
    r"词元"                      # token
    r"|屏蔽|可以关注"             # 遮挡 (masked), 可以看 (may attend)
    r"|warm-up",                 # warmup (预热 in Chinese prose)
    re.IGNORECASE,
)


@pytest.mark.parametrize("path", VOCABULARY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_spelling_per_term(path):
    hits = [(n, m.group(0)) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for m in OTHER_SPELLINGS.finditer(line)]
    assert not hits, (f"{path.relative_to(ROOT)}: the course writes token, 遮挡, 可以看, 预热/warmup "
                      f"(chapter 00's glossary); found {hits}")


@pytest.mark.parametrize("text", ["每个词元", "整行被屏蔽", "True = 可以关注", "Warm-up then decay", "需要 warm-up"])
def test_vocabulary_pattern_catches_other_spellings(text):
    assert OTHER_SPELLINGS.search(text), text


# Maintainer internals stay out of the learner's text: how busy a machine was, the course's own test files.
INTERNALS = re.compile(r"负载约|load average|\btests/test_\w+\.py")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_maintainer_internals(path):
    hits = [(n, line.strip()) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if INTERNALS.search(line)]
    assert not hits, f"{path.relative_to(ROOT)} shows maintainer internals to learners: {hits}"
