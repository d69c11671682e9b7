"""``ResilientExecute``: nbgrader's ``Execute`` for submissions that hang, eat memory or crash.

It replaces ``Execute`` in ``autograde`` (``grader.hardening.configure``) and runs in the nbgrader
process, out of the learner's kernel's reach:

- **Limits.** Every kernel starts under a memory cap and a CPU-time cap (``memory_limit_mb``,
  ``cpu_limit_s``; ``grader/limits.py`` applies them). A memory bomb fails inside its own cell and
  the kernel goes on, so it costs only the exercise that holds it.
- **Hangs cost one timeout.** A cell that runs past ``timeout`` is interrupted and scores 0; from
  then on every later cell of that notebook gets ``timeout_after_hang`` seconds at most, so the
  next cell that calls the same looping function fails after seconds, not another full timeout.
- **A dead kernel** (``os._exit``, a segfault, the CPU cap) or one that cannot be interrupted (a
  loop that swallows ``KeyboardInterrupt``): the cell and every later code cell get an error
  output instead of the whole submission failing; cells that ran before keep their points.
- **No waiting at the end:** the kernel is killed once the last cell has run (``shutdown_kernel``).
- **Demos are not run** (``skip_demos``): the read-only cells the source notebook marks as ungraded
  demonstrations (``demo: true``, written by tools/build.py from a lesson's ``demo=true``) and its
  ungraded self-checks grade nothing; each gets one line instead of running. The build makes sure no
  later cell reads a name they bind. A learner cannot mark a cell: the marks are read from the
  source notebook, matched by grade_id, and only on read-only, ungraded cells, whose source
  nbgrader has already put back.
- **One line per error.** What a feedback page shows of an error is one bilingual line: no
  traceback, no file path of the grading machine. The course's own reports (``TestFailure`` and
  the audit's verdicts) are one line already and pass unchanged.

Settings (``nbgrader_config.py``, e.g. ``c.ResilientExecute.memory_limit_mb = 4096``) are traitlets
with help strings: ``nbgrader autograde --help-all`` lists them.
"""
import os
import re

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import from_dict
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Integer

from grader.limits import MEMORY_ERRORS, LimitedKernelManager

KERNEL_LOST = ("内核已退出或超时后无法中断，此单元及之后的单元未运行 / The kernel died or could not be "
               "interrupted after a timeout: this cell and the cells after it did not run")
TIMED_OUT = ("❌ 超时：此单元运行超过 {seconds} 秒，已被中断，得 0 分（常见原因：死循环，或循环条件永远不变）/ "
             "Timed out: this cell ran for more than {seconds} s and was interrupted; it scores 0 "
             "(usually an endless loop, or a loop whose condition never changes)")
OUT_OF_MEMORY = ("❌ 内存超限：此单元申请的内存超过了每份作业 {limit} MiB 的上限，得 0 分"
                 "（常见原因：在循环里不断创建大数组）/ "
                 "Out of memory: this cell asked for more than the {limit} MiB each submission may use; it "
                 "scores 0 (usually large arrays created in a loop)")
NOT_DEFINED = ("❌ {name} 没有定义：定义它的单元没有运行成功{because}，或被删除了 / {name} is not defined: the "
               "cell that defines it did not run{because_en}, or was deleted")
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
SYNTAX = ("❌ 语法错误（第 {line} 行）：{msg}；这个单元里的代码都没有运行 / SyntaxError (line {line}): {msg}; "
          "none of this cell's code ran")
ERROR = "❌ {ename}: {evalue}{where}"
DEMO_SKIPPED = "评分时不运行这个演示单元（不计分）/ This demo cell is not run while grading (it scores nothing)\n"
# The course's own one-line reports: TestFailure (tutor.grading), the audit's and this module's.
COURSE_ERRORS = {"TestFailure", "KernelLost", "IntegrityError", "FromScratchViolation", "TimedOut"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+)+[/\\]")  # a folder path; the file name is kept
CELL_LINE = re.compile(r"Cell In\[\d+\], line (\d+)")


def error_output(ename, evalue, line=None):
    """An nbformat error output whose traceback is one line (``line``, or ``ename: evalue``)."""
    return from_dict({"output_type": "error", "ename": ename, "evalue": evalue,
                      "traceback": [line or f"{ename}: {evalue}"]})


def one_line(output, memory_limit_mb, failed_cell=None):
    """The one bilingual line a learner sees for an error output of their code (``output`` is an
    nbformat error output; ``failed_cell`` the 1-based number of an earlier cell with a syntax error)."""
    ename, evalue = output.get("ename", ""), output.get("evalue", "")
    if ename in SYNTAX_ERRORS:
        text = ANSI.sub("", "\n".join(output.get("traceback", [])))
        line = re.search(r"line (\d+)", text)
        return SYNTAX.format(line=line.group(1) if line else "?", msg=re.sub(r" \([^()]*, line \d+\)$", "", evalue))
    if ename == "NameError":
        name = re.search(r"name '([^']+)'", evalue)
        because = f"（第 {failed_cell} 个单元有语法错误）" if failed_cell else ""
        because_en = f" (cell {failed_cell} has a syntax error)" if failed_cell else ""
        return NOT_DEFINED.format(name=name.group(1) if name else evalue, because=because, because_en=because_en)
    if MEMORY_ERRORS.search(f"{ename} {evalue}"):
        return OUT_OF_MEMORY.format(limit=memory_limit_mb or "?")
    places = CELL_LINE.findall(ANSI.sub("", "\n".join(output.get("traceback", []))))
    where = f"（你的代码第 {places[-1]} 行 / your code, line {places[-1]}）" if places else ""
    return ERROR.format(ename=ename, evalue=PATH.sub("", " ".join(evalue.split()))[:300], where=where)


class ResilientExecute(Execute):
    """``Execute`` with limits, short waits after a hang, a dead kernel survived, one-line errors."""

    memory_limit_mb = Integer(
        4096, help="Address-space cap of each grading kernel, in MiB (0: none). The course's heaviest "
                   "notebook peaks at 1.7 GiB of address space (08; torch reserves about 0.7 GiB on import).",
    ).tag(config=True)
    cpu_limit_s = Integer(
        900, help="CPU seconds each grading kernel may use in all (0: none); past it the kernel is killed "
                  "and the cells not yet run score 0. The whole course needs under 10 s a notebook.",
    ).tag(config=True)
    timeout_after_hang = Integer(
        20, help="Once a cell of a notebook has timed out, each later cell of that notebook gets at most "
                 "this many seconds (0: the full timeout again), so calling the same looping code again "
                 "fails fast. Longer than any honest cell of the course takes under autograde.",
    ).tag(config=True)

    fork_kernels = Bool(
        True, help="Fork each grading kernel from a fork server that has imported torch, NumPy, matplotlib "
                   "and ipykernel once (grader/forkserver.py; Linux only): saves about 2 s a notebook. "
                   "Each kernel is still a fresh process; the server runs no course or learner code.",
    ).tag(config=True)
    sandbox = Bool(
        True, help="Run each grading kernel in a sandbox (grader/sandbox.py; Linux): it reads only the code its "
                   "checks import and a scratch copy of its notebook's folder, writes only that copy, has no "
                   "network, and leaves no process behind. Grading refuses to start where the sandbox cannot be "
                   "made (it says why) unless this is False.",
    ).tag(config=True)
    shutdown_kernel = Enum(
        ["graceful", "immediate"], default_value="immediate",
        help="How a notebook's kernel ends once its last cell has run: 'immediate' (kill it; nothing is "
             "left to collect) saves about 0.6 s a notebook over nbclient's 'graceful' shutdown request.",
    ).tag(config=True)

    skip_demos = Bool(
        True, help="Do not run the read-only, ungraded cells that the source notebook marks as demos "
                   "(cell metadata demo: true, from tools/build.py); they grade nothing and take a third "
                   "of some chapters' kernel time. Each shows one line in the feedback instead.",
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", LimitedKernelManager)
        super().__init__(*args, **kwargs)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, LimitedKernelManager):
            km.memory_limit_mb, km.cpu_limit_s = self.memory_limit_mb, self.cpu_limit_s
            km.fork_kernels, km.sandbox = self.fork_kernels, self.sandbox
        return km

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_dead = False
        self._hung = False
        self._failed_cell = None  # 1-based number of the last cell with a syntax error (none of it ran)
        self._demos = self._demo_ids(resources or {}) if self.skip_demos else set()
        return super().preprocess(nb, resources, km)

    def _demo_ids(self, resources):
        """grade_ids of the demo cells of the source notebook this submission is graded against
        (none when it cannot be read: then every cell runs)."""
        coursedir = getattr(getattr(self.parent, "parent", None), "coursedir", None)  # the Autograde converter's
        info = resources.get("nbgrader", {})
        if coursedir is None or not {"assignment", "notebook"} <= info.keys():
            return set()
        folder = coursedir.format_path(coursedir.source_directory, ".", info["assignment"])
        try:
            source = nbformat.read(os.path.join(folder, f"{info['notebook']}.ipynb"), as_version=4)
        except (OSError, ValueError):
            return set()
        return {c.metadata["nbgrader"].get("grade_id") for c in source.cells
                if c.metadata.get("demo") is True and "nbgrader" in c.metadata}

    def _is_demo(self, cell):
        meta = cell.metadata.get("nbgrader", {})
        return (cell.cell_type == "code" and meta.get("grade_id") in self._demos and meta.get("locked")
                and not meta.get("grade") and not meta.get("solution"))

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self._hung and self.timeout_after_hang:
            return min(timeout or self.timeout_after_hang, self.timeout_after_hang)
        return timeout

    async def _async_handle_timeout(self, timeout, cell=None):
        self._hung = True
        reply = await super()._async_handle_timeout(timeout, cell)
        if reply is not None:
            reply["content"].update(ename="TimedOut", evalue=TIMED_OUT.format(seconds=timeout),
                                    traceback=[TIMED_OUT.format(seconds=timeout)])
        return reply

    def preprocess_cell(self, cell, resources, index):
        if self._is_demo(cell):
            cell.outputs = [from_dict({"output_type": "stream", "name": "stdout", "text": DEMO_SKIPPED})]
            cell.execution_count = None
            return cell, resources
        if self._kernel_dead:
            if cell.cell_type == "code":
                cell.outputs = [error_output("KernelLost", KERNEL_LOST)]
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError) as error:
            self.log.warning("Kernel lost in cell %d (%s); the remaining cells score 0", index, type(error).__name__)
            self._kernel_dead = True
            cell.outputs.append(error_output("KernelLost", KERNEL_LOST))
            return cell, resources
        if cell.cell_type == "code":
            self._one_line_errors(cell, index)
        return cell, resources

    def _one_line_errors(self, cell, index):
        """Each error output of ``cell`` becomes one line; a timed-out cell keeps only the timeout's."""
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if any(o.ename == "TimedOut" for o in errors):  # the interrupt's KeyboardInterrupt says nothing more
            cell.outputs = [o for o in cell.outputs if o.output_type != "error" or o.ename == "TimedOut"]
            return
        for i, output in enumerate(cell.outputs):
            if output.output_type == "error" and output.ename not in COURSE_ERRORS:
                line = one_line(output, self.memory_limit_mb, self._failed_cell)
                cell.outputs[i] = error_output(output.ename, line, line)
        if any(o.ename in SYNTAX_ERRORS for o in errors):
            self._failed_cell = index + 1
