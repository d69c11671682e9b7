"""The add-a-chapter checklist (docs/MAINTAINING.md), computed from the contract registry.

``checklist(components, evidence)`` lists what the repository still lacks for the registry's components
and for the lessons' graded chapters, one line each, saying what to add and where; ``real_evidence()``
gathers what the tree has. tests/test_registry.py asserts the real tree lacks nothing and proves that a
made-up component or chapter with a piece missing is caught.

    .venv/bin/python -m tools.checklist      # what is still missing (exit 1 when something is)
"""
import ast
import dataclasses
import sys
from pathlib import Path

import catalogue
import contract
import solutions
from catalogue.idioms import IDIOMS
from tools import build, simulate_class
from tutor import checks, mistakes

SOLUTIONS = Path(solutions.__file__).parent


@dataclasses.dataclass
class Evidence:
    """What the repository has, gathered once from the real tree."""
    public: dict      # solutions module -> top-level public names it defines
    checks: dict      # registered check (tutor.checks.CHECKS) -> CheckFacts
    wrong: list       # [(check, diagnosis id or None)] of catalogue/wrong_*.py
    right: set        # checks with a right alternative: in catalogue/right_*.py, or an idiom of their exercise
    lessons: dict     # lesson name -> {"exercises": [names], "drills": [names], "graded": [grade_ids]}
    mutations: set    # lessons with a classic-mistake edit (tools/simulate_class.MUTATIONS)
    mutation_mistakes: dict = dataclasses.field(default_factory=dict)  # lesson -> (exercise, mistake id)


@dataclasses.dataclass(frozen=True)
class CheckFacts:
    """What a declared check says of its mistakes."""
    mistakes: tuple   # its mistakes= (the classic mistakes it names)
    variants: bool    # whether it computes wrong outputs (variants=)


UNDECLARED = CheckFacts((), False)  # a check the evidence does not have


def _public_names(path):
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def _lesson(name):
    found = {"exercises": [], "drills": [], "graded": []}
    for cell in build.read_lesson(name):
        meta = cell.metadata
        if "exercise" in meta:
            kind = "drills" if meta.get("drill") else "exercises"
            found[kind] += build.split_names(meta["exercise"], "exercise", name)
        if "grade_id" in meta:
            found["graded"].append(meta["grade_id"])
    return found


def real_evidence():
    return Evidence(
        public={p.stem: _public_names(p) for p in sorted(SOLUTIONS.glob("*.py")) if p.stem != "__init__"},
        checks={name: CheckFacts(check.mistakes, check.variants is not None) for name, check in checks.CHECKS.items()},
        wrong=[(check, diagnosis) for check, _, diagnosis in catalogue.cases("wrong")],
        right={check for check, _ in catalogue.cases("right")} | {i.exercise for i in IDIOMS},
        lessons={name: _lesson(name) for name in build.lesson_names()},
        mutations=set(simulate_class.MUTATIONS),
        mutation_mistakes={k: (m.component, m.mistake) for k, m in simulate_class.MUTATIONS.items()},
    )


def checklist(components, ev):
    """Every piece a registered component or a graded chapter lacks, as 'what to add' lines."""
    todo = []
    by_name = {c.name: c for c in components}
    registered = set(by_name)
    lesson_of = {name[:2]: name for name in ev.lessons}
    for module, names in ev.public.items():
        todo += [f"{n}: solutions/{module}.py defines it; register it in contract/__init__.py (COMPONENTS)"
                 for n in names if n not in registered]
    for c in components:
        where = f"{c.name} (chapter {c.chapter})"
        if c.kind not in contract.KINDS:
            todo.append(f"{where}: kind {c.kind!r} is not one of {sorted(contract.KINDS)}")
        if c.name not in ev.public.get(c.module, []):
            todo.append(f"{where}: define it in solutions/{c.module}.py (the registry says it lives there)")
        if c.kind != "constant" and c.signature is None:  # "" for a function without parameters
            todo.append(f"{where}: give its signature in contract/__init__.py")
        if c.chapter not in lesson_of:
            todo.append(f"{where}: no lesson lessons/{c.chapter}_*.py")
        if not c.exercise:
            continue
        lesson = lesson_of.get(c.chapter)
        if lesson and c.name not in ev.lessons[lesson]["exercises"] + ev.lessons[lesson]["drills"]:
            todo.append(f"{where}: add an exercise=\"{c.name}\" cell to lessons/{lesson}.py")
        if not c.checks and not c.tested_by:
            todo.append(f"{where}: name the check that proves it (checks=) or the graded cell that tests it "
                        "(tested_by=) in contract/__init__.py")
        if c.kind == "graded" and c.tested_by and not c.checks and lesson \
                and c.tested_by not in ev.lessons[lesson]["graded"]:
            todo.append(f"{where}: tested_by={c.tested_by!r} is no graded cell of lessons/{lesson}.py")
        for check in c.checks:
            if check not in ev.checks:
                todo.append(f"{where}: declare its check: FunctionCheck({check!r}, ...) or ModuleCheck({check!r}, ...) "
                            f"in tutor/checks/{c.module}.py")
            if not any(name == check for name, _ in ev.wrong):
                todo.append(f"{where}: add a wrong implementation its check {check!r} fails "
                            "to catalogue/wrong_*.py")
            if check not in ev.right:
                todo.append(f"{where}: add a right alternative for check {check!r} to catalogue/right_*.py "
                            "(or, for a graded exercise, an idiom to catalogue/idioms/)")
        for check in c.checks:
            facts = ev.checks.get(check, UNDECLARED)
            if facts.mistakes and not facts.variants:
                todo.append(f"{where}: compute its mistakes' wrong outputs in tutor/checks/{c.module}.py "
                            f"(variants= of check {check!r}: (reference, case) -> [Variant])")
            for mid in facts.mistakes:
                if mid not in mistakes.MISTAKES:
                    todo.append(f"{where}: explain mistake {mid!r} in tutor/checks/{c.module}.py "
                                "(define_mistakes, 中文 and English)")
                if (check, mid) not in ev.wrong:
                    todo.append(f"{where}: add a wrong implementation its check {check!r} names {mid!r} "
                                "to catalogue/wrong_*.py")
    for check in sorted({k for c in components for k in c.checks}):
        listed = ev.checks.get(check, UNDECLARED).mistakes
        todo += [f"check {check!r}: the wrong catalogue proves it names {mid!r}; add it to its mistakes= "
                 f"in tutor/checks/{_module_of(components, check)}.py"
                 for mid in sorted({m for k, m in ev.wrong if k == check and m} - set(listed))]
    for lesson, found in ev.lessons.items():
        for name in found["drills"]:
            if name not in registered or not by_name[name].exercise:
                todo.append(f"{name}: a drill of lessons/{lesson}.py that is no registered exercise")
        for name in found["exercises"]:
            if name not in registered:
                todo.append(f"{name}: lessons/{lesson}.py has an exercise the registry does not know; register it")
            elif not by_name[name].exercise:
                todo.append(f"{name}: an exercise of lessons/{lesson}.py, registered as {by_name[name].kind!r}; "
                            "make it graded or bonus")
            elif by_name[name].chapter != lesson[:2]:
                todo.append(f"{name}: an exercise of lessons/{lesson}.py, registered in chapter "
                            f"{by_name[name].chapter}; fix its chapter")
        if found["graded"] and lesson not in ev.mutations:
            todo.append(f"{lesson}: add its classic mistake to tools/simulate_class.py (MUTATIONS[{lesson!r}]), or the "
                        "simulated classic-mistake student is quietly perfect")
    todo += [f"MUTATIONS[{lesson!r}] in tools/simulate_class.py is for no graded chapter; remove it"
             for lesson in sorted(ev.mutations) if not ev.lessons.get(lesson, {}).get("graded")]
    for lesson, (exercise, mid) in sorted(ev.mutation_mistakes.items()):
        component = by_name.get(exercise)
        named = {m for k in component.checks for m in ev.checks.get(k, UNDECLARED).mistakes} \
            if component else set()
        if component is not None and component.checks and mid not in named:
            todo.append(f"MUTATIONS[{lesson!r}] in tools/simulate_class.py makes {mid!r}: add it to the mistakes= "
                        f"of check {component.checks[0]!r} in tutor/checks/{component.module}.py (the drill bank "
                        "reveals them, the wrong catalogue proves them)")
    return todo


def _module_of(components, check):
    return next(c.module for c in components if check in c.checks)


def main():
    missing = checklist(contract.COMPONENTS, real_evidence())
    print("\n".join(missing) or "清单齐全 / the checklist lacks nothing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
