"""Limits on one submission's grading kernel, so one student's code cannot take the grader down.

Two halves, one in each process:

- In the nbgrader process, ``LimitedKernelManager`` starts every grading kernel through the
  launcher (``python -m grader.launcher --memory-mb N --cpu-s N -- <kernel command>``,
  ``grader/launcher.py``), which sets the operating system's limits on the kernel and then becomes
  the kernel (``os.execv``, or a fork of the warm fork server): ``RLIMIT_AS`` caps its address
  space (an allocation past it fails inside the kernel with ``MemoryError`` or torch's
  ``RuntimeError``, the kernel lives on), ``RLIMIT_CPU`` caps its CPU seconds (past it the
  kernel is killed, which ``ResilientExecute`` grades as a dead kernel). The limits are settings
  of ``ResilientExecute`` (``grader/execution.py``), set in ``nbgrader_config.py``.
- In the kernel, the IPython extension ``load_ipython_extension`` (loaded by the launcher) lets go
  of a failed cell's memory: IPython keeps the last exception, its traceback keeps every frame of
  the failed call and their local variables, and so a loop that filled the memory up to the cap
  would hold it while the next cell allocates again. After a cell fails, the frames' locals are
  cleared (what only they referenced is freed at once); after an allocation failure the garbage
  (reference cycles) is collected too. A full collection costs about 0.15 s in a kernel that has
  imported torch, too much for every failed test cell; the error text the cell showed is already
  on its way.

Linux enforces both limits; macOS ignores ``RLIMIT_AS`` (the CPU limit still holds).

The manager also starts and ends kernels without jupyter_client's fixed waits, about 0.3 s of the
0.55 s an empty notebook took: ``ReadyClient`` is ready once the kernel has answered on both its
channels (no 0.2 s drain of IOPub afterwards), and a killed kernel's exit is polled every 5 ms.
"""
import functools
import gc
import os
import re
import shutil
import sys
import tempfile
import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, Type

from grader import forkserver

EXTENSION = "grader.limits"
# How an allocation past RLIMIT_AS reads: Python's and NumPy's MemoryError, torch's RuntimeError.
MEMORY_ERRORS = re.compile(r"MemoryError|can't allocate memory|Unable to allocate|out of memory", re.I)
FORKSERVER_ENV = "GRADER_FORKSERVER"  # a running fork server's socket (a cluster worker keeps one)


def launcher_command(kernel_cmd, memory_mb, cpu_seconds, server=None, sandbox=None):
    """``kernel_cmd`` run through the launcher with these limits (0 = no limit), forked by the fork
    server at ``server`` when given, in a sandbox whose private folder is ``sandbox`` when given;
    the kernel loads the extension that frees a failed cell's memory."""
    fork = ["--forkserver", server] if server else []
    fence = ["--sandbox", sandbox] if sandbox else []
    return [sys.executable, "-m", "grader.launcher", "--memory-mb", str(memory_mb), "--cpu-s", str(cpu_seconds),
            *fork, *fence, "--", *kernel_cmd, f"--IPKernelApp.extensions={EXTENSION}"]


def forkserver_for_this_process():
    """The fork server kernels of this process use: ``GRADER_FORKSERVER``'s, or one started now (it
    lives as long as this process). None where fork servers do not work (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    if not os.environ.get(FORKSERVER_ENV):
        os.environ[FORKSERVER_ENV] = forkserver.start_server(tempfile.mkdtemp(prefix="grader-fork-"))
    return os.environ[FORKSERVER_ENV]


NO_SANDBOX = ("评分内核无法放进沙箱，拒绝评分 / grading refused: a grading kernel cannot be sandboxed here ({why}). "
              "Allow unprivileged user namespaces (Debian: sysctl kernel.unprivileged_userns_clone=1; Ubuntu 24.04: "
              "kernel.apparmor_restrict_unprivileged_userns=0), or grade without the sandbox, knowingly: "
              "c.ResilientExecute.sandbox = False in nbgrader_config.py (docs/INSTRUCTOR.md, section 5)")


@functools.cache
def sandbox_refusal():
    """None where this process can sandbox its kernels (``grader.sandbox.probe``), else the one line
    that refuses to grade."""
    from grader import sandbox

    why = sandbox.probe()
    return NO_SANDBOX.format(why=why) if why else None


class ReadyClient(AsyncKernelClient):
    """A kernel client whose ``wait_for_ready`` returns as soon as the kernel has answered
    ``kernel_info`` on the shell channel and an IOPub message has arrived (so IOPub is connected).

    jupyter_client then drains IOPub until 0.2 s pass without a message, which every kernel start
    pays in full; what it would drain (the kernel_info requests' status messages) is skipped anyway
    by nbclient, which reads only the messages whose parent is the cell it runs."""

    async def wait_for_ready(self, timeout=None):
        deadline = time.monotonic() + (timeout if timeout is not None else float("inf"))
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)
                except Empty:
                    pass  # IOPub not connected yet: ask again
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class LimitedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels start under the launcher's limits (see the module docstring)."""

    client_factory = Type(ReadyClient, klass=AsyncKernelClient, config=True)

    memory_limit_mb = Integer(0, help="Address-space cap of each kernel in MiB (0: none).").tag(config=True)
    cpu_limit_s = Integer(0, help="CPU-time cap of each kernel in seconds (0: none).").tag(config=True)
    fork_kernels = Bool(False, help="Fork each kernel from a warm fork server (grader/forkserver.py).").tag(config=True)
    sandbox = Bool(False, help="Run each kernel in a sandbox (grader/sandbox.py).").tag(config=True)

    _private = None  # the sandboxed kernel's own folder: its connection file and unix sockets

    async def _async_pre_start_kernel(self, **kw):
        if self.sandbox and self._private is None:
            refused = sandbox_refusal()
            if refused:
                raise RuntimeError(refused)
            # No network in the sandbox: the kernel's channels are unix sockets in a folder only this
            # kernel sees (not the runtime folder, which holds every other kernel's connection file).
            # Under /tmp, not $TMPDIR: a unix socket's path has at most 107 bytes, and a worker's
            # TMPDIR deep in a course folder leaves no room for "kernel-ipc-<port>".
            self._private = tempfile.mkdtemp(prefix="grader-kernel-", dir="/tmp")
            self.transport = "ipc"
            self.connection_file = os.path.join(self._private, "kernel.json")
            self.ip = os.path.join(self._private, "kernel-ipc")
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        server = forkserver_for_this_process() if self.fork_kernels else None
        if not (self.memory_limit_mb or self.cpu_limit_s or server or self._private):
            return cmd
        return launcher_command(cmd, self.memory_limit_mb, self.cpu_limit_s, server, self._private)

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart=restart)
        if self._private is not None and not restart:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    async def _async_wait(self, pollinterval=0.1):
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))  # a killed kernel is gone in ms


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
    if MEMORY_ERRORS.search(f"{type(error).__name__} {error}"):
        gc.collect()


def load_ipython_extension(ipython):
    """The kernel side (loaded by ``launcher_command``'s ``--IPKernelApp.extensions``)."""
    ipython.events.register("post_run_cell", _forget_failed_cell)
