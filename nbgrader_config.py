# nbgrader configuration for the course. Run every nbgrader command from the repository root
# (the folder holding this file): all paths below are relative to it.
import os
from pathlib import Path

c = get_config()  # noqa: F821  (injected by nbgrader)
COURSE = Path(__file__).resolve().parent

c.CourseDirectory.course_id = "shousi-transformer"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"

# The edition (docs/INSTRUCTOR.md, "An English class"). COURSE_LANG=en in the environment (`make lab
# COURSE_LANG=en`, `COURSE_LANG=en nbgrader autograde ...`) makes every nbgrader command work on the English
# class: a course of its own in en/ (en/source/ and en/release/, built from the same lessons; its own submitted/,
# autograded/, feedback/ and gradebook.db), its own course id in the exchange, English stubs, and feedback
# pages in English (grader/feedback.py, through tutor.lang, which reads the same variable). Unset or zh: the
# Chinese class, bilingual, in this folder.
EDITION = os.environ.get("COURSE_LANG", "").strip().lower() or "zh"
if EDITION not in ("zh", "en"):
    raise ValueError(f"COURSE_LANG 只能是 zh 或 en / COURSE_LANG must be zh or en, got {EDITION!r}")
if EDITION == "en":
    c.CourseDirectory.root = str(COURSE / "en")
    c.CourseDirectory.course_id = "shousi-transformer-en"
    c.CsvExportPlugin.to = str(COURSE / "en" / "grades.csv")  # `nbgrader export`: beside the Chinese class's

# The exchange (release_assignment, fetch, submit, collect, the Assignment List) is a git-ignored
# folder of the course, so one person's `make lab` works out of the box. A JupyterHub class shares
# one system-wide folder instead: set it here and in the students' config (docs/INSTRUCTOR.md).
c.Exchange.root = str(COURSE / "exchange")
try:
    os.makedirs(c.Exchange.root, exist_ok=True)
except OSError:  # a read-only course directory: nbgrader names the folder when it needs it
    pass

# A class on a shared machine (`make class-up`, docs/INSTRUCTOR.md §6) writes class.json here: the
# system-wide exchange it built, and the collect that refuses hand-ins made in someone else's name
# (grader/exchange.py).
if (COURSE / "class.json").exists():
    import json

    from grader.exchange import configure as configure_exchange

    configure_exchange(c, json.loads((COURSE / "class.json").read_text())["exchange"])

# The gradebook: SQLite (gradebook.db) unless NBGRADER_DB_URL names another database, such as the
# PostgreSQL of tools/postgres.sh that several `nbgrader autograde --student` processes share.
if os.environ.get("NBGRADER_DB_URL"):
    c.CourseDirectory.db_url = os.environ["NBGRADER_DB_URL"]

# One CPU thread per kernel (torch, NumPy), for every kernel started after this file is read
# (autograde, validate, and JupyterLab's, which reads it too): the course's tensors are small, and
# with a thread per core a busy machine makes them spin-wait -- the chapter 06 KV-cache demo ran
# 20x slower with 2 threads than with 1 on a loaded 2-core machine. An exported value wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# generate_assignment copies every non-notebook file of source/<assignment>/ into release/
# (and the exchange copies submissions the same way): keep anything that is not student
# material out, whatever a maintainer leaves lying around.
c.CourseDirectory.ignore = [
    ".*", "__pycache__", "*.pyc", ".ipynb_checkpoints", "feedback",
    "*.py", "*.db", "*.sqlite", "*.pt", "answer_keys", "solutions", "*.bak", "*~",
]

# Seconds per cell under validate/autograde. Chapter 07 trains less when NBGRADER_EXECUTION is
# set; a hanging cell costs this much once, then it is interrupted and scores 0.
c.Execute.timeout = 180

# Limits on each submission's grading kernel (grader/execution.py; `nbgrader autograde --help-all`
# shows every setting with its help). Memory: the address space of the kernel, in MiB; an
# allocation past it fails in its own cell (only that exercise is lost) and the grader, the worker
# and the other students go on. The heaviest notebook of the course peaks at 1.7 GiB (08; torch
# reserves about 0.7 GiB when imported): 4096 leaves room for honest code and stops a runaway loop
# long before it reaches a shared machine's memory. CPU: seconds of CPU a kernel may use in all;
# the whole course needs under 10 s a notebook. After a cell has timed out, each later cell of
# that notebook gets at most `timeout_after_hang` seconds, so a second call of the same hanging
# function fails fast instead of costing another full timeout.
c.ResilientExecute.memory_limit_mb = 4096
c.ResilientExecute.cpu_limit_s = 900
c.ResilientExecute.timeout_after_hang = 20

# A learner who deletes a graded cell gets it back (and its score) instead of a manual-grade hole.
c.OverwriteCells.add_missing_cells = True

# The stub that replaces every ### BEGIN/END SOLUTION region (also in notebooks/ and notebooks/en/, via
# tools/build.py): bilingual in the Chinese edition, English in the English one.
c.ClearSolutions.code_stub = {
    "python": {
        "zh": "# YOUR CODE HERE / 在这里写你的代码\n"
        'raise NotImplementedError("待实现：请按上面的说明完成这一段 / '
        'Not implemented yet: follow the instructions above")',
        "en": '# YOUR CODE HERE\nraise NotImplementedError("Not implemented yet: follow the instructions above")',
    }[EDITION],
}

# Autograding that survives broken and hostile submissions (grader/hardening.py, run in the
# nbgrader process, out of the learner's kernel's reach): tampered cell metadata is repaired, a
# dead or stuck kernel costs only the cells after it, and learner code that reaches the grading
# machinery voids the graded cells of the exercise that holds it (and only those).
from grader.hardening import configure  # noqa: E402

configure(c)

# The audit's allow-lists are settings too (grader/audit_submission.py, with help strings in
# `nbgrader autograde --help-all`), e.g. to let learners use `%load_ext` as well:
# c.AuditSubmission.safe_magics = ["time", "timeit", "matplotlib", "precision", "pprint", "who", "whos", "load_ext"]

# Hand-ins the way students make them: `01_attention (1).ipynb` or `01_attention-alice.ipynb` is
# renamed to `01_attention.ipynb` and graded; anything else is refused with one line naming the
# file and the expected name (grader/handins.py).
from grader.handins import configure as configure_handins  # noqa: E402

configure_handins(c)

# Feedback pages that read offline (math as MathML, no CDN) and an autograde log without the
# checksum warning nbgrader gives every released cell whose hidden tests it restores
# (grader/feedback.py; docs/INSTRUCTOR.md explains the remaining log lines).
from grader.feedback import configure as configure_feedback  # noqa: E402

configure_feedback(c)
