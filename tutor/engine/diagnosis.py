"""Which known mistake the learner's outcome is: the check's ``variants`` computed on the same cases.

A ``Variant`` is one bug, or two or three at once (``combine``), computed from the reference's
weights and parts; one that reproduces the learner's outcome on every case names it. Otherwise each
failing case is told the variant that reproduces it, so that no mistake is named where it does not
show, and "more than one thing differs" when the cases disagree. An exception the learner's code
raised is matched by its message (``EXCEPTIONS``); a case no variant reproduces may still show a
known mistake through the check's ``rule`` (or ``no_graph``, for every check).
"""
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import combinations

import torch

from .. import guard
from .compare import matches
from .messages import define_mistakes, say
from .specs import CHECKS, Variant

RAISES = object()  # a variant that raises on a case

MISTAKES = define_mistakes({
    "no_autograd_graph": ("输出没有自动求导图（no_grad / inference_mode / detach）：梯度传不回输入和参数，"
                          "训练时模型学不到东西；forward 里不要关掉梯度",
                          "the output has no autograd graph (no_grad / inference_mode / detach): gradients cannot "
                          "reach the inputs and parameters, so training learns nothing; do not turn gradients off "
                          "inside forward"),
    "weights_tied": ("两个契约参数是同一个张量（权重共享，例如嵌入层和输出层共用一个矩阵）：契约里它们各自独立，去掉 "
                     "a.weight = b.weight",
                     "two contract parameters are one tensor (weight tying, e.g. the embedding and the output "
                     "projection): the contract keeps them separate, remove a.weight = b.weight"),
})

EXCEPTIONS = []  # (error-message fragment, mistake id), declared by the topics with ``exception_means``


def exception_means(fragment, mistake):
    """Declare that a learner's exception whose message holds ``fragment`` is ``mistake``."""
    EXCEPTIONS.append((fragment, mistake))


def no_graph(case, expected, got):
    """Gradients the reference has and the learner's outcome lacks: its output has no autograd graph."""
    if any(k.startswith("grad ") and k not in got for k in expected):
        return "no_autograd_graph"
    return None


def combine(bugs, run, most=2, note=None):
    """A ``Variant`` for each ``Bug`` of ``bugs`` alone, then for each combination of up to ``most``
    bugs that set different switches (mistakes made at once). ``run(**switches)`` -> outputs;
    ``note(switches)`` -> a detail line or ""."""
    found = []
    for size in range(1, most + 1):
        for combo in combinations(bugs, size):
            keys = [set(b.switches) for b in combo]
            if len(set().union(*keys)) < sum(map(len, keys)) or len({b.id for b in combo}) < size:
                continue  # two bugs on one switch, or the same bug twice
            switches = {k: v for b in combo for k, v in b.switches.items()}
            singles = tuple((lambda kw=b.switches: run(**kw)) for b in combo) if size > 1 else ()
            found.append(Variant(tuple(b.id for b in combo), lambda sw=switches: run(**sw),
                                 note(switches) if note else "", singles))
    return found


@dataclass
class Finding:
    """One reason a learner's outcome differs from the reference."""
    ids: tuple = ()  # known mistakes (several: at once); () with ``reason``: a difference no known mistake explains
    where: str = None  # the part it is in ("norm1.ln"); None: the object under check itself
    kind: str = None  # that part's check name ("LayerNorm")
    cases: tuple = None  # 0-based indices of the cases it is named on; None: every failing case
    note: str = ""  # a detail, e.g. the eps found
    reason: str = ""  # what differs, when no known mistake does
    only: dict = None  # id -> cases, for a bug of a combination that shows on some cases only


class Table:
    """The known wrong variants of check ``name`` on every case, each evaluated once, when needed.
    ``provider(i)`` is the module whose weights and parts the variants use on case ``i``; with
    ``learner``, the learner's own module, and the check's contract ``wiring`` comes first."""

    def __init__(self, name, cases, provider, learner=False):
        check = CHECKS[name]
        self.learner, self.entries, self.cache = learner, {}, {}
        wiring = getattr(check, "wiring", None) if learner else None
        for i, case in enumerate(cases):
            module = provider(i)
            if learner and module is None:
                continue  # the learner's module was never built for this case
            found = [Variant((), lambda m=module, c=case: wiring(m, c))] if wiring else []
            found += check.variants(module, case) if check.variants else []
            seen = {}
            for variant in found:
                k = seen[variant.ids] = seen.get(variant.ids, -1) + 1
                self.entries.setdefault((variant.ids, k), {})[i] = variant
        self.order = sorted(self.entries, key=lambda key: len(key[0]))  # the contract, each bug alone, then two, three

    def out(self, key, i, which=None):
        """Output of variant ``key`` on case ``i`` (``which``: its ``which``-th bug alone), or RAISES."""

        if (key, i, which) not in self.cache:
            variant = self.entries[key][i]
            thunk = variant.run if which is None else variant.singles[which]
            try:
                with torch.no_grad(), (guard.from_scratch() if self.learner else nullcontext()):
                    self.cache[(key, i, which)] = thunk()
            except Exception:
                self.cache[(key, i, which)] = RAISES
        return self.cache[(key, i, which)]

    def reproduces(self, key, outcomes, expected, failing):
        """Variant ``key`` gives the learner's outcome on every case and shows on a failing one."""
        agree = shows = False
        for i, got in enumerate(outcomes):
            if i not in self.entries[key]:
                continue
            variant = self.out(key, i)
            if isinstance(got, Exception):
                if variant is not RAISES:
                    return False
                shows = True
            elif variant is RAISES or not matches(variant, got):
                return False
            else:
                agree = True
                shows = shows or (i in failing and not matches(variant, expected[i]))
        return agree and (shows or not key[0])

    def finding(self, key, failing, expected, first):
        variant = self.entries[key].get(first) or next(iter(self.entries[key].values()))
        only = {}
        for j, mid in enumerate(key[0] if variant.singles else ()):
            shows = tuple(i for i in failing if i in self.entries[key]
                          and ((v := self.out(key, i, j)) is RAISES or not matches(v, expected[i])))
            if shows != tuple(failing):
                only[mid] = shows
        return Finding(key[0], note=variant.note, only=only or None)


def failing_cases(outcomes, expected):
    return [i for i, got in enumerate(outcomes) if isinstance(got, Exception) or not matches(expected[i], got)]


def diagnose(name, cases, outcomes, expected, ref_for, first, alone=False):
    """Findings from the known wrong variants of check ``name`` computed with the reference's weights:
    one variant (a bug alone, or two or three at once) that reproduces every case; else, case by
    case, the variant that reproduces that case. ``alone``: only a single bug that reproduces every
    case, or nothing."""
    table = Table(name, cases, lambda i: ref_for(cases[i]))
    failing = failing_cases(outcomes, expected)
    for key in table.order:
        if alone and len(key[0]) > 1:
            return []
        if table.reproduces(key, outcomes, expected, failing):
            rivals = [k for k in table.order if len(k[0]) == len(key[0]) and set(k[0]) != set(key[0])
                      and table.reproduces(k, outcomes, expected, failing)]
            if rivals:  # the cases do not tell these mistakes apart: naming one would be a guess
                return []
            return [table.finding(key, failing, expected, first)]
    if alone:
        return []
    rules = [r for r in (CHECKS[name].rule, no_graph) if r]
    groups = {}  # variant key (or (ids, None) for an error message) -> the failing cases it reproduces
    for i in failing:
        got = outcomes[i]
        if isinstance(got, Exception):
            on_error = getattr(CHECKS[name], "on_error", None)
            mid = next((m for fragment, m in EXCEPTIONS if fragment in str(got)), None) \
                or (on_error(cases[i], got) if on_error else None)
            key = ((mid,), None) if mid else None
        else:
            keys = [k for k in table.order if i in table.entries[k] and (v := table.out(k, i)) is not RAISES
                    and matches(v, got) and not matches(v, expected[i])]
            # a case that two different mistakes explain alike tells them apart no better than none
            key = keys[0] if keys and all(set(k[0]) >= set(keys[0][0]) for k in keys) else None
            if not keys:
                mid = next((m for rule in rules if (m := rule(cases[i], expected[i], got))), None)
                key = ((mid,), None) if mid else None
        if key is not None:
            groups.setdefault(key, []).append(i)

    def note(key, idx):  # a variant's detail (e.g. the eps found); an error message has none
        return "" if key[1] is None else table.entries[key][idx[0]].note

    merged = {}  # one finding per mistake: a crash and a wrong output that both show it are one
    for key, idx in groups.items():
        if key[0] in merged:
            merged[key[0]] = (merged[key[0]][0] if merged[key[0]][0][1] is not None else key,
                              sorted(merged[key[0]][1] + idx))
        else:
            merged[key[0]] = (key, idx)
    findings = [Finding(key[0], cases=tuple(idx), note=note(key, idx)) for key, idx in merged.values()]
    explained = {i for f in findings for i in f.cases}
    if findings and len(explained) < len(failing):
        findings.append(Finding(cases=tuple(i for i in failing if i not in explained), reason=say("more")))
    if findings and len(findings) == 1 and findings[0].ids and len(explained) == len(failing):
        findings[0].cases = None  # one mistake explains every failing case
    findings.sort(key=lambda f: f.cases is not None and first not in f.cases)
    return findings
