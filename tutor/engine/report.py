"""The diagnosis lines of a failed check's message, from its findings (``tutor.engine.diagnosis.Finding``)."""
from .messages import explain, say


def case_numbers(indices, only=False):
    numbers = ", ".join(str(i + 1) for i in indices)
    case = "case" if len(indices) == 1 else "cases"
    return say("only_cases" if only else "cases", numbers=numbers, case=case)


def finding_lines(name, findings):
    """The diagnosis lines of a message, parts grouped where the same mistake sits in several places."""
    lines, groups = [], {}
    for f in findings:
        if f.where is not None:
            groups.setdefault((f.ids, f.kind, f.note, f.reason), []).append(f.where)
    if groups:
        lines.append(f"  {say('parts_alone', name=name)}")
    for (ids, kind, note, reason), wheres in groups.items():
        places = ", ".join(wheres[:3]) + (f" … ({say('places', n=len(wheres))})" if len(wheres) > 3 else "")
        lines.append(f"  {say('where_part', name=name, places=places, kind=kind)}")
        lines += [f"    {explain(mid)}" for mid in ids]
        lines += [f"    {text}" for text in (note, reason and say("not_known", reason=reason)) if text]
    for f in sorted(findings, key=lambda f: not f.ids):  # named mistakes first, "more than one thing" after
        if f.where is not None:
            continue
        cases = f"（{case_numbers(f.cases)}）" if f.cases is not None else ""
        indent = "  "
        if groups and f.ids:
            lines.append(f"  {say('where_wiring', name=name)}")
            indent = "    "
        elif len(f.ids) > 1:
            lines.append(f"  {say('mistakes_at_once', n=len(f.ids))}")
            indent = "    "
        for mid in f.ids:
            only = (f.only or {}).get(mid)
            where = f"（{case_numbers(only, only=True)}）" if only else ""
            lines.append(f"{indent}{explain(mid)}{cases}{where}")
        if f.note:
            lines.append(f"{indent}  {f.note}")
        if f.reason:
            more = f.reason if groups else say("differ_otherwise", cases=case_numbers(f.cases))
            lines.append(f"  {say('more')}: {more}")
    if len([f for f in findings if f.where is None and f.ids and f.cases is not None]) > 1:
        lines.append(f"  {say('more')}")
    return lines
