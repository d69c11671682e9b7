"""The add-a-chapter checklist (docs/MAINTAINING.md), enforced from the contract registry.

``tools.checklist.checklist`` lists what the repository still lacks for the registry's components and
for the lessons' graded chapters, each line saying what to add and where. The real tree must lack
nothing; the tests below prove that a new name or a new chapter with a piece missing is caught.
"""
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import contract
import solutions
from tools import build
from tools.checklist import CheckFacts, checklist, real_evidence
from tutor import checks
from tutor.engine.specs import FunctionCheck


@pytest.fixture(scope="module")
def evidence():
    return real_evidence()


def added(components, ev, baseline):
    """What the checklist asks for beyond what it asks of the real tree."""
    before = checklist(contract.COMPONENTS, baseline)
    return [line for line in checklist(components, ev) if line not in before]


def test_the_repository_lacks_nothing(evidence):
    missing = checklist(contract.COMPONENTS, evidence)
    assert not missing, "add-a-chapter checklist (docs/MAINTAINING.md):\n" + "\n".join(missing)


# ---------------------------------------------------------------- the enforcement, proven

NEW = contract.Component("frobnicate", "08", "llm", "graded", "a new component", "x", checks=("frobnicate",))


def test_a_new_name_without_its_pieces_is_caught(evidence):
    missing = "\n".join(added(contract.COMPONENTS + (NEW,), evidence, evidence))
    for needed in ("define it in solutions/llm.py", 'add an exercise="frobnicate" cell to lessons/08_gpt.py',
                   "declare its check: FunctionCheck('frobnicate', ...) or ModuleCheck('frobnicate', ...) in "
                   "tutor/checks/llm.py",
                   "add a wrong implementation its check 'frobnicate' fails",
                   "add a right alternative for check 'frobnicate'"):
        assert needed in missing, f"the checklist does not ask to {needed!r}:\n{missing}"


def test_a_new_mistake_without_its_pieces_is_caught(evidence):
    """A check declared with a mistake that nothing explains, computes or proves; and a mistake the
    wrong catalogue proves that the check does not list."""
    ev = dataclasses.replace(evidence, checks={**evidence.checks,
                                               "frobnicate": CheckFacts(("frobnicate_off_by_one",), False)},
                             wrong=evidence.wrong + [("frobnicate", "frobnicate_twice")])
    missing = "\n".join(added(contract.COMPONENTS + (NEW,), ev, evidence))
    for needed in ("explain mistake 'frobnicate_off_by_one' in tutor/checks/llm.py (define_mistakes",
                   "compute its mistakes' wrong outputs in tutor/checks/llm.py (variants= of check 'frobnicate'",
                   "add a wrong implementation its check 'frobnicate' names 'frobnicate_off_by_one'",
                   "check 'frobnicate': the wrong catalogue proves it names 'frobnicate_twice'; add it to its "
                   "mistakes= in tutor/checks/llm.py"):
        assert needed in missing, f"the checklist does not ask to {needed!r}:\n{missing}"


def test_a_new_name_defined_but_not_registered_is_caught(evidence):
    ev = dataclasses.replace(evidence, public={**evidence.public, "llm": evidence.public["llm"] + ["frobnicate"]})
    assert added(contract.COMPONENTS, ev, evidence) == [
        "frobnicate: solutions/llm.py defines it; register it in contract/__init__.py (COMPONENTS)"]


def test_a_new_component_without_signature_or_check_is_caught(evidence):
    bare = dataclasses.replace(NEW, signature=None, checks=())
    ev = dataclasses.replace(evidence, public={**evidence.public, "llm": evidence.public["llm"] + ["frobnicate"]})
    missing = "\n".join(added(contract.COMPONENTS + (bare,), ev, evidence))
    assert "frobnicate (chapter 08): give its signature" in missing
    assert "frobnicate (chapter 08): name the check that proves it" in missing


def test_a_new_graded_chapter_without_a_mutation_is_caught(evidence):
    lessons = {**evidence.lessons, "99_moe": {"exercises": [], "drills": [], "graded": ["router_matches_reference"]}}
    missing = added(contract.COMPONENTS, dataclasses.replace(evidence, lessons=lessons), evidence)
    assert missing == ["99_moe: add its classic mistake to tools/simulate_class.py (MUTATIONS['99_moe']), or the "
                       "simulated classic-mistake student is quietly perfect"]


def test_a_lesson_exercise_the_registry_does_not_know_is_caught(evidence):
    lessons = dict(evidence.lessons)
    lessons["08_gpt"] = {**lessons["08_gpt"], "exercises": lessons["08_gpt"]["exercises"] + ["MixtureOfExperts"]}
    missing = added(contract.COMPONENTS, dataclasses.replace(evidence, lessons=lessons), evidence)
    assert missing == ["MixtureOfExperts: lessons/08_gpt.py has an exercise the registry does not know; register it"]


# ---------------------------------------------------------------- derived tables

def test_the_exports_are_the_registry():
    missing = [c.name for c in contract.COMPONENTS if c.name not in solutions.__all__]
    assert not missing, (f"registered but not exported by solutions/__init__.py: {missing}: define each in its "
                         "module, then run `make build` (the checklist test says where)")
    assert solutions.__all__ == [c.name for c in contract.COMPONENTS]


def test_solutions_init_is_generated_from_the_registry():
    assert build.SOLUTIONS_INIT.read_text(encoding="utf-8") == build.solutions_init(), \
        "solutions/__init__.py differs from the registry: run `make build`"
    new = dataclasses.replace(contract.BY_NAME["RMSNorm"], name="route", module="moe")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(contract, "COMPONENTS", contract.COMPONENTS + (new,))
        assert "route" not in build.solutions_init()  # registered before its module exists: left out


def test_checks_are_exactly_the_registered_ones():
    assert set(checks.CHECKS) == set(contract.CHECK_NAMES)
    with pytest.raises(KeyError, match="declare it in contract/__init__.py"):
        FunctionCheck("frobnicate")


def test_registry_entries_are_in_teaching_order():
    chapters = [c.chapter for c in contract.COMPONENTS]
    assert chapters == sorted(chapters)
    assert len({c.name for c in contract.COMPONENTS}) == len(contract.COMPONENTS)


def test_provided_earlier_lists_what_the_lesson_uses():
    """``provided="earlier"`` in chapter 06: the components 06 uses, and only from earlier chapters."""
    names = build.earlier_components("06_transformer", build.read_lesson("06_transformer"))
    assert names[:2] == ["scaled_dot_product_attention", "MultiHeadAttention"]
    assert {"EncoderLayer", "DecoderLayer", "make_pad_mask", "PositionalEncoding"} <= set(names)
    assert all(contract.get(n).chapter < "06" for n in names)
    assert "softmax" not in names and "RMSNorm" not in names  # never used by 06


def test_contract_doc_is_generated_from_the_registry():
    doc = (Path(build.ROOT) / "docs" / "CONTRACT.md").read_text(encoding="utf-8")
    assert doc == build.contract_doc(), ("docs/CONTRACT.md differs from the registry and the checks' mistakes=: "
                                         "run `make build` (or, for this file alone, tools/build.py --no-execute "
                                         "--only 10_drills)")
    assert all(re.search(rf"`{c.name}`", doc) for c in contract.COMPONENTS)


DOCS = sorted(p.name for p in (Path(build.ROOT) / "docs").glob("*.md") if p.name != "CONTRACT.md")


@pytest.mark.parametrize("doc", DOCS)
def test_hand_written_doc_tables_name_registered_components(doc):
    """A hand-written table whose first column names a component (or Class.method) names only
    registered ones; docs/CONTRACT_LLM.md explains every component of the LLM modules."""
    text = (Path(build.ROOT) / "docs" / doc).read_text(encoding="utf-8")
    text = re.sub(rf"{re.escape(build.KEYS_BEGIN)}.*?{re.escape(build.KEYS_END)}", "", text, flags=re.S)  # generated
    rows = re.findall(r"^\| `([A-Za-z_][\w.]*)` \|", text, re.MULTILINE)
    methods = {f"{c.name}.{m}" for c in contract.COMPONENTS for m in c.methods}
    unknown = [r for r in rows if r not in contract.BY_NAME and r not in methods and r not in checks.CHECKS]
    assert not unknown, f"docs/{doc} names {unknown}, which the registry does not have"
    if doc == "CONTRACT_LLM.md":
        llm = [c.name for c in contract.COMPONENTS if c.module in ("llm", "decoding", "backward")]
        assert rows and not [n for n in llm if n not in rows], "docs/CONTRACT_LLM.md: explain every LLM component"


def test_a_mutation_whose_mistake_the_registry_does_not_list_is_caught(evidence):
    ev = dataclasses.replace(evidence, mutation_mistakes={**evidence.mutation_mistakes,
                                                          "04_ffn_layernorm": ("LayerNorm", "ln_eps_value")})
    assert added(contract.COMPONENTS, ev, evidence) == [
        "MUTATIONS['04_ffn_layernorm'] in tools/simulate_class.py makes 'ln_eps_value': add it to the mistakes= of "
        "check 'LayerNorm' in tutor/checks/ffn_norm.py (the drill bank reveals them, the wrong catalogue proves them)"]


def test_a_mutation_for_no_graded_chapter_is_caught(evidence):
    ev = dataclasses.replace(evidence, mutations=evidence.mutations | {"00_orientation"})
    assert added(contract.COMPONENTS, ev, evidence) == [
        "MUTATIONS['00_orientation'] in tools/simulate_class.py is for no graded chapter; remove it"]


def test_each_check_lives_in_the_topic_module_of_its_component():
    """A check is declared, with its cases, bugs and mistakes, in tutor/checks/<module>.py, the module
    named like the solutions module of the component it proves."""
    for c in contract.COMPONENTS:
        for check in c.checks:
            declared = checks.CHECKS[check]
            where = (getattr(declared, "judge", None) or declared.cases).__module__
            assert where == f"tutor.checks.{c.module}", f"check {check!r} is declared in {where}"
    assert {topic.__name__.rsplit(".", 1)[1] for topic in checks.TOPICS} == \
        {c.module for c in contract.COMPONENTS if c.checks}


def test_registering_first_does_not_break_importing_solutions():
    """Step 1 of the checklist registers a name before its module exists: `import solutions` (and
    so this checklist) must still work and simply leave the name out."""
    code = ("import contract\n"
            "contract.COMPONENTS += (contract.Component('route', '11', 'moe', 'graded', 'a router', 'x'),)\n"
            "import solutions\n"
            "assert 'route' not in solutions.__all__ and 'MultiHeadAttention' in solutions.__all__\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=build.ROOT)
    assert proc.returncode == 0, proc.stderr


def _cells(*sources, exercise=None):
    cells = [nbformat.v4.new_code_cell(src) for src in sources]
    if exercise:
        cells.append(nbformat.v4.new_code_cell("", metadata={"exercise": exercise}))
    return cells


def test_provided_earlier_counts_only_what_the_lesson_itself_defines():
    """A name bound inside a function is no definition of the lesson's; a top-level def is; the
    lesson's own exercises (a drill of an earlier component) are never provided."""
    local = build.earlier_components("06_x", _cells("def helper(x):\n    EncoderLayer = x\n    return EncoderLayer",
                                                    "model = Transformer(5, 5)"))
    assert "EncoderLayer" in local
    own = build.earlier_components("06_x", _cells("def make_pad_mask(tokens, pad_id=0):\n    return tokens",
                                                  "mask = make_pad_mask(None)\nlayer = EncoderLayer(8, 2, 16)"))
    assert "make_pad_mask" not in own and "EncoderLayer" in own
    drill = build.earlier_components("09_x", _cells("x = 1", exercise="MultiHeadAttention"))
    assert drill == ["scaled_dot_product_attention"]


def test_provided_code_needing_an_unbound_constant_stops_the_build():
    with pytest.raises(build.LessonError, match=r"uses \['PAD_ID'\]; bind them in the setup cell"):
        build.earlier_components("08_x", _cells("loss = copy_loss(None, None)"))
    assert build.earlier_components("08_x", _cells("PAD_ID = 0", "loss = copy_loss(None, None)")) == ["copy_loss"]


def test_an_exercise_registered_as_provided_is_caught(evidence):
    provided = tuple(dataclasses.replace(c, kind="provided", checks=()) if c.name == "RMSNorm" else c
                     for c in contract.COMPONENTS)
    assert "RMSNorm: an exercise of lessons/04_ffn_layernorm.py, registered as 'provided'; make it graded or bonus" \
        in added(provided, evidence, evidence)


def test_a_lesson_check_cell_must_name_a_registered_check():
    assert build.parse_check("MultiHeadAttention:MultiHeadAttention", "02_multihead") == (
        "MultiHeadAttention", "MultiHeadAttention")
    with pytest.raises(build.LessonError, match="names no check of the registry"):
        build.parse_check("MultiHeadAtention:MultiHeadAttention", "02_multihead")
