"""The verdict table of every check on every catalogue entry: the regression proof of a refactor.

    OMP_NUM_THREADS=1 .venv/bin/python tests/check_table.py tests/data/check_table.tsv [--no-idioms]

One row per (entry, check): the wrong, right and real-world catalogues (catalogue/), the
reference's own source and a ``NotImplementedError`` stub for every check, and every idiom of
catalogue/idioms.py (its chapter's cells before the exercise, then the idiom's cells, as
tests/test_idioms.py runs them; the check of the exercise's name then runs on what the cells bound).
Columns, tab-separated, rows sorted: entry, check, verdict (pass/fail), diagnosis ids, the failing
case, the message's first line, the whole message (newlines as ``⏎``). Two tables of the same
code are equal; a refactor that keeps behaviour keeps the table (``diff before after``). The chapters'
cells run as nbgrader runs them (``NBGRADER_EXECUTION``: chapter 07 trains only a little, 08 and 09 not at all).
"""
import inspect
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("NBGRADER_EXECUTION", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path[:0] = [str(HERE.parent), str(HERE)]

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from catalogue import realworld, realworld_llm  # noqa: E402
from catalogue.reference import load  # noqa: E402
from tutor.checks import CHECKS, run_check  # noqa: E402


def _name(obj):
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def _stub(reference):
    if inspect.isclass(reference):
        class Stub(nn.Module):
            def __init__(self, *args, **kwargs):
                super().__init__()
                raise NotImplementedError("写你的代码 / write your code")
        return Stub

    def stub(*args, **kwargs):
        raise NotImplementedError("写你的代码 / write your code")
    return stub


def catalogue_entries():
    """[(entry label, check name, object)] of every catalogue module, the reference and the stubs."""
    entries = []
    for kind in ("wrong", "right"):
        for path in sorted((HERE.parent / "catalogue").glob(f"{kind}_*.py")):
            module = __import__(f"catalogue.{path.stem}", fromlist=["CASES"])
            for i, case in enumerate(module.CASES):
                entries.append((f"{path.stem}#{i:03d} {_name(case[1])}", case[0], case[1]))
    for label, cases in (("realworld", realworld.CASES), ("realworld_llm", realworld_llm.CASES),
                         ("realworld_llm.RIGHT", realworld_llm.RIGHT)):
        for i, case in enumerate(cases):
            entries.append((f"{label}#{i:03d} {_name(case[1])}", case[0], case[1]))
    reference = load()
    for check in CHECKS:
        entries.append((f"reference {check}", check, reference[check]))
        entries.append((f"stub {check}", check, _stub(reference[check])))
    return entries


def idiom_entries():
    """[(entry label, check name, thunk -> object)] of every idiom whose exercise has a check."""
    import test_idioms

    from catalogue.idioms import IDIOMS

    def bound(idiom):
        namespace = dict(test_idioms._prefix(idiom.chapter, idiom.exercise))
        dtype = torch.get_default_dtype()
        try:
            torch.manual_seed(0)
            for k, source in enumerate(idiom.cells):
                test_idioms._run_cell(source, namespace, f"<idiom {idiom.id} cell {k}>")
        finally:
            torch.set_default_dtype(dtype)
        return namespace[idiom.exercise]

    return [(f"idiom {idiom.id}", idiom.exercise, lambda idiom=idiom: bound(idiom))
            for idiom in IDIOMS if idiom.exercise in CHECKS]


def row(label, check, obj):
    torch.manual_seed(0)  # learner code that draws from the global generator (gpt-fast's sampling) draws alike
    result = run_check(check, obj)
    message = result.message.replace("\t", " ").replace("\n", "⏎")
    return "\t".join([label, check, "pass" if result.passed else "fail", ",".join(result.diagnoses),
                      str(result.case), result.message.split("\n")[0].replace("\t", " "), message])


def main(out, idioms=True):
    start = time.perf_counter()
    rows = [row(label, check, obj) for label, check, obj in catalogue_entries()]
    print(f"catalogues: {len(rows)} rows, {time.perf_counter() - start:.0f} s", flush=True)
    if idioms:
        for label, check, thunk in idiom_entries():
            rows.append(row(label, check, thunk()))
        print(f"with idioms: {len(rows)} rows, {time.perf_counter() - start:.0f} s", flush=True)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("\n".join(sorted(rows)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], idioms="--no-idioms" not in sys.argv)
