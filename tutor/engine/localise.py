"""Where in a composite the difference sits: its parts run alone, shared or tied parts, its wiring.

A composite (a ``ModuleCheck`` with ``parts``: ResidualLayerNorm, EncoderLayer, DecoderLayer,
Transformer) that no single known bug explains is localised: each contract part is run alone next
to the reference's part with the same weights (``probe`` cases of the part's own check), recursively,
so the message names the part and the mistake inside it ("your EncoderLayer's norm1.ln: unbiased
variance"); parts that are one object (``norm2 = norm1``, ``[layer] * N``) or tied parameters are
named as such; then the composite's wiring is judged by running its contract forward (``wiring``)
and its known wiring bugs with the learner's own parts.
"""
import torch

from .. import guard
from .compare import compare, unpack
from .diagnosis import Finding, Table, diagnose, failing_cases
from .messages import say
from .specs import CHECKS


def explain(check, cases, outcomes, expected, ref_for, first):
    """Findings for a failed check. A composite that one known bug (with the reference's parts)
    reproduces has right parts; otherwise its parts are tested alone (same weights), and when some
    differ, its wiring is judged with the learner's own parts."""
    name = check.name
    module = cases[first].built
    tied = _tied(module, ref_for(cases[first])) if module is not None else []
    if getattr(check, "parts", None) and module is not None:
        shared = len(_owners(name, module, ref_for(cases[first]))) < len(check.parts(ref_for(cases[first])))
        if not (tied or shared) and (found := diagnose(name, cases, outcomes, expected, ref_for, first, alone=True)):
            return found
        pairs = {}  # one (learner module, reference module) per reference: each size the check built
        for case in [cases[first]] + cases:
            if case.built is not None:
                pairs.setdefault(id(ref_for(case)), (case.built, ref_for(case)))
        found = tied + _parts_alone(name, list(pairs.values()))
        if found:
            return found + _wiring(name, None, cases, outcomes, expected, [c.built for c in cases])
    return tied or diagnose(name, cases, outcomes, expected, ref_for, first)


def _tied(module, ref):
    """Parameters that are one tensor under two contract names (``out_proj.weight = tgt_embed.weight``)
    where the reference keeps them apart; a module held twice (``[layer] * N``, ``norm2 = norm1``)
    is a shared part instead."""
    names, found = {}, []
    theirs = dict(ref.named_parameters(remove_duplicate=False)) if ref is not None else {}
    for n, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    for group in names.values():
        owners = {id(module.get_submodule(n.rpartition(".")[0])) for n in group}
        if len(owners) > 1 and len({id(theirs.get(n)) for n in group}) > 1:
            found.append(Finding(("weights_tied",), ", ".join(group), "Parameter"))
    return found


def _wiring(name, where, cases, outcomes, expected, modules):
    """The composite's contract forward, then its known wiring bugs, run with the learner's parts:
    nothing to add when the contract reproduces the learner's outcome; else the bug that does."""
    table = Table(name, cases, lambda i: modules[i], learner=True)
    failing = failing_cases(outcomes, expected)
    key = next((k for k in table.order if table.reproduces(k, outcomes, expected, failing)), None)
    if key is None:
        return [Finding(where=where, kind=name, reason=say("parts_do_not_explain"))]
    if not key[0]:
        return []
    found = table.finding(key, failing, expected, failing[0] if failing else 0)
    found.where, found.kind, found.only = where, name, None
    return [found]


def _parts_alone(kind, pairs, prefix=""):
    """Each contract part of the learner's modules run alone next to the same part of the reference
    (same weights), recursively; ``pairs``: (learner module, reference module), one per size the
    check built. Findings name the part and the mistake inside it. Parts that are one object
    (``self.norm2 = self.norm1``, ``[layer] * N``) are named as shared."""
    module, ref = pairs[0]
    parts, owners, findings = CHECKS[kind].parts(ref), _owners(kind, *pairs[0]), []
    for path, part_kind in parts:
        try:
            sub = [(mine.get_submodule(path), theirs.get_submodule(path)) for mine, theirs in pairs]
        except AttributeError:
            continue
        same, shared = owners[id(sub[0][0])], CHECKS[part_kind].shared
        if len(same) > 1 and shared:
            if path == same[0]:
                findings.append(Finding((shared,), ", ".join(prefix + p for p in same), part_kind))
            if path != same[-1]:
                continue  # a shared part holds the weights loaded last
        findings += _probe(part_kind, sub, prefix + path)
    return findings


def _owners(kind, module, ref):
    """id of each contract part object of ``module`` -> the paths that hold it."""
    owners = {}
    for path, _ in CHECKS[kind].parts(ref):
        try:
            owners.setdefault(id(module.get_submodule(path)), []).append(path)
        except AttributeError:
            continue
    return owners


def _probe(kind, pairs, where):
    """Findings about a learner's part run alone on a few inputs next to the reference's part;
    ``pairs``: (learner part, reference part), one per size the check built."""

    part = CHECKS[kind]
    inner = _parts_alone(kind, pairs, where + ".") if part.parts else []
    cases, expected, outcomes, owners = [], [], [], {}
    for mine, theirs in pairs:
        for case in part.probe(theirs, torch.Generator().manual_seed(20)):
            owners[id(case)] = (mine, theirs)
            with torch.no_grad():
                expected.append(unpack(part.forward(theirs, case, case.inputs), part.outputs, kind))
            try:
                with torch.no_grad(), guard.from_scratch():
                    outcomes.append(unpack(part.forward(mine, case, case.inputs), part.outputs, kind))
            except Exception:  # the part does not follow its contract's call: only its own parts can be tested
                return inner
            cases.append(case)
    failing = failing_cases(outcomes, expected)
    if not failing:
        return inner
    if inner:
        return inner + _wiring(kind, where, cases, outcomes, expected, [owners[id(c)][0] for c in cases])
    found = diagnose(kind, cases, outcomes, expected, lambda case: owners[id(case)][1], failing[0])
    if not found:
        i = failing[0]
        reason = next(r for key, value in expected[i].items() if (r := compare(key, value, outcomes[i][key])))
        return [Finding(where=where, kind=kind, reason=reason)]
    for f in found:
        f.where, f.kind, f.cases, f.only = where, kind, None, None
    return found
