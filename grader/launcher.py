"""The grading kernel's launcher.

    python -m grader.launcher --memory-mb N --cpu-s N [--forkserver S] [--sandbox DIR] -- <kernel command>

jupyter_client starts this process for every grading kernel (``grader.limits.launcher_command``)
and signals it as it would the kernel. It dies with the grader that started it, then either has
the fork server at ``S`` fork the kernel (``grader/forkserver.py``: the sandbox and the limits are
applied in the forked child) and stands in for it, or enters the sandbox itself (``grader/sandbox.py``,
whose private folder is ``DIR``), sets the limits and becomes the kernel (``os.execv``).

It imports nothing beyond the standard library and ``grader.forkserver``: it is on every notebook's
critical path, and importing jupyter_client here cost 0.25 s a notebook.
"""
import argparse
import ctypes
import os
import resource
import signal

from grader import forkserver

PR_SET_PDEATHSIG = 1


def die_with_parent():
    """This process gets SIGKILL when the process that started it dies (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


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


def main(argv=None):
    parser = argparse.ArgumentParser(description="Start a grading kernel under memory and CPU-time limits.")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--cpu-s", type=int, default=0)
    parser.add_argument("--forkserver", help="a fork server's socket: fork the kernel there")
    parser.add_argument("--sandbox", help="the kernel's private folder: run it in a sandbox (grader/sandbox.py)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the kernel command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no kernel command after --")
    die_with_parent()  # with the grader that started this kernel, as ipykernel's own parent poller would
    if args.forkserver and forkserver.launch(args.forkserver, command, args.memory_mb, args.cpu_s, args.sandbox):
        return
    if args.sandbox:  # this process relays signals from outside; the kernel is exec'd inside
        from grader import sandbox

        sandbox.enter(os.getcwd(), args.sandbox)
    set_limits(args.memory_mb, args.cpu_s)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
