"""Limits on one submission's grading kernel, so one student's code cannot take the grader down.

Two halves, one in each process:

- In the nbgrader process, ``LimitedKernelManager`` starts every grading kernel through this
  module's launcher (``python -m grader.limits --memory-mb N --cpu-s N -- <kernel command>``),
  which sets the operating system's limits on the kernel and then becomes the kernel
  (``os.execv``): ``RLIMIT_AS`` caps its address space (an allocation past it fails inside the
  kernel with ``MemoryError`` or torch's ``RuntimeError``, the kernel lives on), ``RLIMIT_CPU``
  caps its CPU seconds (past it the kernel is killed, which ``ResilientExecute`` grades as a dead
  kernel). The limits are settings of ``ResilientExecute`` (``grader/execution.py``), set in
  ``nbgrader_config.py``.
- In the kernel, the IPython extension ``load_ipython_extension`` (loaded by the launcher) lets go
  of a failed cell's memory: IPython keeps the last exception, its traceback keeps every frame of
  the failed call and their local variables, and so a loop that filled the memory up to the cap
  would hold it while the next cell allocates again. After a cell fails, the frames' locals are
  cleared and the garbage collected; the error text the cell showed is already on its way.

Linux enforces both limits; macOS ignores ``RLIMIT_AS`` (the CPU limit still holds).
"""
import argparse
import ctypes
import gc
import os
import resource
import signal
import sys
import tempfile

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer

from grader import forkserver

EXTENSION = "grader.limits"
FORKSERVER_ENV = "GRADER_FORKSERVER"  # a running fork server's socket (a cluster worker keeps one)
PR_SET_PDEATHSIG = 1


def launcher_command(kernel_cmd, memory_mb, cpu_seconds, server=None):
    """``kernel_cmd`` run through the launcher with these limits (0 = no limit), forked by the fork
    server at ``server`` when given; the kernel loads the extension that frees a failed cell's memory."""
    fork = ["--forkserver", server] if server else []
    return [sys.executable, "-m", "grader.limits", "--memory-mb", str(memory_mb), "--cpu-s", str(cpu_seconds),
            *fork, "--", *kernel_cmd, f"--IPKernelApp.extensions={EXTENSION}"]


def die_with_parent():
    """This process gets SIGKILL when the process that started it dies (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def forkserver_for_this_process():
    """The fork server kernels of this process use: ``GRADER_FORKSERVER``'s, or one started now (it
    lives as long as this process). None where fork servers do not work (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    if not os.environ.get(FORKSERVER_ENV):
        os.environ[FORKSERVER_ENV] = forkserver.start_server(tempfile.mkdtemp(prefix="grader-fork-"))
    return os.environ[FORKSERVER_ENV]


def set_limits(memory_mb, cpu_seconds):
    """Cap this process (and what it ``exec``s): address space in MiB, CPU time in seconds; 0 = none."""
    caps = []
    if memory_mb:
        caps.append((resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20)))
    if cpu_seconds:
        # The soft limit sends SIGXCPU (the kernel dies); the hard limit, a little later, SIGKILL.
        caps.append((resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5)))
    for which, limit in caps:
        try:
            resource.setrlimit(which, limit)
        except (ValueError, OSError):  # a system that refuses this limit (macOS and RLIMIT_AS): the kernel runs
            pass


class LimitedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels start under ``set_limits`` (see the module docstring)."""

    memory_limit_mb = Integer(0, help="Address-space cap of each kernel in MiB (0: none).").tag(config=True)
    cpu_limit_s = Integer(0, help="CPU-time cap of each kernel in seconds (0: none).").tag(config=True)
    fork_kernels = Bool(False, help="Fork each kernel from a warm fork server (grader/forkserver.py).").tag(config=True)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        server = forkserver_for_this_process() if self.fork_kernels else None
        if not (self.memory_limit_mb or self.cpu_limit_s or server):
            return cmd
        return launcher_command(cmd, self.memory_limit_mb, self.cpu_limit_s, server)


def _forget_failed_cell(result):
    """post_run_cell: a failed cell's frames (and the memory their locals hold) are let go."""
    error = result.error_in_exec if result.error_in_exec is not None else result.error_before_exec
    if error is None:
        return
    tb = error.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        try:
            frame.clear()
        except RuntimeError:  # a frame still running (the cell's own): nothing of the failed call
            continue
        frame.f_locals  # noqa: B018  (re-syncs the frame's cached locals dict: the cleared names go)
    error.__traceback__ = None
    for name in ("last_traceback", "last_value", "last_type", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()


def load_ipython_extension(ipython):
    """The kernel side (loaded by ``launcher_command``'s ``--IPKernelApp.extensions``)."""
    ipython.events.register("post_run_cell", _forget_failed_cell)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Start a grading kernel under memory and CPU-time limits.")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--cpu-s", type=int, default=0)
    parser.add_argument("--forkserver", help="a fork server's socket: fork the kernel there")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the kernel command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no kernel command after --")
    die_with_parent()  # with the grader that started this kernel, as ipykernel's own parent poller would
    if args.forkserver and forkserver.launch(args.forkserver, command, args.memory_mb, args.cpu_s):
        return
    set_limits(args.memory_mb, args.cpu_s)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
