"""The learner's own record, kept in their workspace: what their checks and graded cells found.

    import tutor
    tutor.progress()      # each chapter's graded cells (✅ passes, ❌ not yet, · not run), the drills,
                          # and the mistakes your checks named over time

One JSON file, ``progress.json``, next to the notebook when it runs in the learner's ``workspace/`` or
``workspace/en/`` (``make lab``), or the file that the environment variable ``TUTOR_PROGRESS`` names;
elsewhere (``notebooks/``, a class's hub, nbgrader) nothing is written. It is a plain file the learner
can open, delete or keep in their own repository; nothing here opens a connection or sends it anywhere.
Its parts, each written by one module:

- ``"cells"``: ``{grade_id: {"passed", "runs", "last"}}``, the last verdict of each graded cell's
  visible tests (``tutor.grading.test_cell``);
- ``"checks"``: ``{check: {"passed", "runs", "last"}}``, the last verdict of each check a learner ran
  (``tutor.grading.check`` and ``report``);
- ``"mistakes"``: ``[{"time", "check", "mistakes"}]``, each time a check named known mistakes, oldest
  first (the newest ``HISTORY`` kept);
- ``"drills"``: the drill bank's progress (``tutor.drills``: passed, attempts, best time, given up).

A file the drill bank wrote before this record existed (``drills_progress.json``) is read as its
``"drills"`` part. A file that cannot be read or written never stops a check: it is left alone.
"""
import builtins
import datetime
import json
import os
import tempfile
from pathlib import Path

from . import lang

FILE = "progress.json"
OLD_DRILLS_FILE = "drills_progress.json"  # the drill bank's file before this record
VARIABLE = "TUTOR_PROGRESS"
WORKSPACE = "workspace"
EDITIONS = ("en",)  # the other language editions: notebooks/en/ and workspace/en/ (tools/build.py)
HISTORY = 500  # mistake entries kept


def edition(folder):
    """The language edition whose folder ``folder`` is (``"en"`` for workspace/en/), else ``""``."""
    return folder.name if folder.name in EDITIONS else ""


def path():
    """The record's file, or None where nothing may be written (outside the learner's workspace)."""
    env = os.environ.get(VARIABLE)
    if env:
        return Path(env)
    cwd = Path.cwd()
    workspace = cwd.parent if edition(cwd) else cwd
    return cwd / FILE if workspace.name == WORKSPACE and not os.environ.get("NBGRADER_EXECUTION") else None


def load():
    """The whole record (``{}`` where there is none, or none may be kept here)."""
    where = path()
    if where is None:
        return {}
    old = where.with_name(OLD_DRILLS_FILE)
    source, wrap = (where, False) if where.exists() else (old, True)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {"drills": data} if wrap else data


def _now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def update(change):
    """Apply ``change(record)`` to the record and write it back in one replacement; returns the file,
    or None where nothing may be written or the write failed."""
    where = path()
    if where is None:
        return None
    data = load()
    change(data)
    temporary = None
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=where.parent, prefix=f".{where.name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
        os.replace(temporary, where)
    except OSError:
        if temporary:
            Path(temporary).unlink(missing_ok=True)
        return None
    return where


def _verdict(part, key, passed):
    def change(data):
        entry = data.setdefault(part, {}).setdefault(key, {"passed": False, "runs": 0})
        entry.update(passed=bool(passed), runs=entry.get("runs", 0) + 1, last=_now())
    return change


def record_cell(grade_id, passed):
    """A graded cell's visible tests ran: its last verdict."""
    return update(_verdict("cells", grade_id, passed))


def record_check(name, result):
    """A check ran (its ``CheckResult``): its last verdict, and the mistakes it named, if any."""
    verdict = _verdict("checks", name, result.passed)

    def change(data):
        verdict(data)
        if result.diagnoses:
            log = data.setdefault("mistakes", [])
            log.append({"time": _now(), "check": name, "mistakes": list(result.diagnoses)})
            del log[:-HISTORY]
    return update(change)


# ---------------------------------------------------------------- tutor.progress()

def _chapters():
    """[(chapter, [grade_id, ...])] of the course's self-study notebooks (the edition this runs in), in order."""
    cwd = Path.cwd()
    folder = edition(cwd)
    for root in (cwd.parent.parent if folder else cwd.parent, Path(__file__).resolve().parents[1]):
        notebooks = root / "notebooks" / folder
        if notebooks.is_dir():
            break
    else:
        return []
    found = []
    for nb in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        try:
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        ids = [c["metadata"]["nbgrader"]["grade_id"] for c in cells
               if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        if ids:
            found.append((nb.stem, ids))
    return found


def _day(stamp):
    return stamp[:10]


def progress_lines(data, where, chapters):
    """The lines of ``tutor.progress()`` for record ``data`` kept in ``where`` (None: not kept here)."""
    from .drills import DRILLS
    from .mistakes import MISTAKES

    saved = where.name if where else lang.pick("未保存：不在 workspace/ 中运行", "not saved: not running in workspace/")
    lines = [lang.pick("学习进度", "progress") + f" ({saved})"]
    cells = data.get("cells", {})
    for chapter, ids in chapters:
        passed = sum(cells.get(g, {}).get("passed", False) for g in ids)
        if not any(g in cells for g in ids):
            lines.append(f"{chapter}  {passed}/{len(ids)}  · {lang.pick('还没运行', 'not run yet')}")
            continue
        marks = ", ".join(f"{'✅' if cells[g]['passed'] else '❌'} {g}" if g in cells else f"· {g}" for g in ids)
        lines.append(f"{chapter}  {passed}/{len(ids)}  {marks}")
    drills = data.get("drills", {})
    lines.append(lang.pick("手撕练习", "drills") + f"  {sum(d.get('passed', False) for d in drills.values())}"
                 f"/{len(DRILLS)}  (tutor.drills.progress())")
    log = data.get("mistakes", [])
    if not log:
        lines.append(lang.pick("检查还没有指出过已知错误", "no known mistake named by your checks yet"))
        return lines
    lines.append(lang.pick("检查指出过的错误（从早到晚）", "mistakes your checks named (oldest first)") + ":")
    named = {}
    for entry in log:
        for mid in entry["mistakes"]:
            first = named.setdefault(mid, {"times": 0, "first": entry["time"], "checks": []})
            first["times"] += 1
            first["last"] = entry["time"]
            if entry["check"] not in first["checks"]:
                first["checks"].append(entry["check"])
    checks = data.get("checks", {})
    for mid, seen in named.items():
        now = all(checks.get(c, {}).get("passed") for c in seen["checks"])
        state = lang.pick("现在通过", "passes now") if now else lang.pick("还没改好", "not fixed yet")
        days = _day(seen["first"]) if _day(seen["first"]) == _day(seen["last"]) else \
            f"{_day(seen['first'])} → {_day(seen['last'])}"
        zh, en = MISTAKES.get(mid, (mid, mid))
        lines.append(f"  {'✅' if now else '❌'} {mid} ×{seen['times']} ({days}, {', '.join(seen['checks'])}; "
                     f"{state}): {lang.pick(zh, en)}")
    return lines


def progress():
    """Print which graded cells pass in each chapter, the drills passed, and the mistakes your checks
    named over time, from the record in your workspace."""
    builtins.print("\n".join(progress_lines(load(), path(), _chapters())))
