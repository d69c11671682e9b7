"""Grading kernels forked from a warm process, so no kernel pays for importing torch again.

Most of a grading kernel's life is its start: Python, ipykernel, torch, NumPy and matplotlib
imported anew for every notebook of every student (about 2 s of the 3 to 4 s a notebook takes).
A *fork server* imports them once and forks a kernel per notebook: the kernel starts with them
already in memory, in a fresh process, with nothing of another student's in it (the server runs no
course code and no learner code; only third-party packages are imported in it).

The pieces, all Linux (elsewhere the launcher starts the kernel the ordinary way):

- ``Server`` (``python -m grader.forkserver <socket>``): imports the packages, listens on a unix
  socket, forks one child per request and reaps the children. It exits with the process that
  started it (the ``nbgrader`` process, or a cluster worker that keeps one for all its tasks).
- The launcher (``grader.launcher``, the process jupyter_client starts and signals) sends the
  kernel's command, environment, working directory, limits and its own stdin/stdout/stderr to the
  server, then stands in for the kernel: it forwards SIGINT/SIGTERM to it and exits when it exits.
- The forked child enters the kernel's sandbox (``grader/sandbox.py``: the kernel is the first
  process of new namespaces, and the child stays outside to relay signals), applies the limits,
  becomes the kernel (``ipykernel``'s app with the command's
  arguments) and exits when the launcher is gone (killed by jupyter_client, or with its worker).
"""
import gc
import json
import os
import signal
import socket
import struct
import sys
import threading
import time

PRELOAD = ("numpy", "torch", "matplotlib", "matplotlib.pyplot", "IPython", "ipykernel.kernelapp",
           # what a kernel imports while it starts (its debugger, its history database, pdb): 0.4 -> 0.1 s CPU
           "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger", "debugpy", "sqlite3", "psutil", "pdb",
           # what torch imports on first use: the first optimizer (torch.optim's constructor imports
           # torch._dynamo, 800 modules) took 2 s of chapter 07's grading, and as much in 08, 09, 10
           "torch._dynamo", "PIL.Image")
HEADER = struct.Struct("!I")


def _send(sock, payload, fds=()):
    data = json.dumps(payload).encode()
    socket.send_fds(sock, [HEADER.pack(len(data)) + data], list(fds))


def _receive(sock):
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
    size = HEADER.unpack_from(data)[0]
    while len(data) < HEADER.size + size:
        data += sock.recv(1 << 20)
    return json.loads(data[HEADER.size:HEADER.size + size]), fds


def _exit_with(pid):
    """Thread body: end this process once process ``pid`` (the launcher) has exited."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        fd = None
    while True:
        if fd is not None:
            import select

            select.select([fd], [], [])
            os._exit(1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(1)
        time.sleep(0.2)


def listen(path):
    """A unix socket listening on ``path``."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    return listener


def _become_kernel(request, fds):
    """In the forked child: take the launcher's streams, environment and limits, run the kernel."""
    from grader.launcher import set_limits

    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("sandbox"):  # this process stays outside and exits with the launcher; the kernel goes on inside
        from grader import sandbox

        try:
            sandbox.enter(request["cwd"], request["sandbox"], launcher=request["launcher"])
        except OSError as exc:
            print(f"grader.sandbox: {exc}", file=sys.stderr, flush=True)
            os._exit(1)
    else:
        os.chdir(request["cwd"])
        threading.Thread(target=_exit_with, args=(request["launcher"],), daemon=True).start()
    set_limits(request["memory_mb"], request["cpu_s"])
    argv = request["argv"]
    start = argv.index("ipykernel_launcher") + 1 if "ipykernel_launcher" in argv else 1
    # parent_handle's default was read from JPY_PARENT_PID when the server imported ipykernel: give it
    # the launcher (no console banner; the kernel's own poller exits if the server goes away).
    sys.argv = ["ipykernel_launcher", *argv[start:], f"--IPKernelApp.parent_handle={request['launcher']}"]
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=sys.argv[1:])
    os._exit(0)


class Server:
    """The warm process: preload, then fork a kernel for each request on ``path``."""

    def __init__(self, path, parent):
        self.path, self.parent = path, parent

    def serve(self):
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel sets it
        # debugpy's note on Python's frozen modules (a kernel's debugger is never used while grading)
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        for module in PRELOAD:
            __import__(module)
        gc.collect()
        gc.freeze()  # the preloaded heap is never scanned again: a kernel's collections see only its own objects
        signal.signal(signal.SIGCHLD, self._reap)
        listener = listen(self.path)
        threading.Thread(target=_exit_with, args=(self.parent,), daemon=True).start()
        while True:
            try:
                conn, _ = listener.accept()
            except InterruptedError:
                continue
            with conn:
                request, fds = _receive(conn)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _become_kernel(request, fds)
                for fd in fds:
                    os.close(fd)
                _send(conn, {"pid": pid})

    @staticmethod
    def _reap(signum, frame):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return


def launch(path, argv, memory_mb, cpu_s, sandbox=None):
    """In the launcher: have the server at ``path`` fork the kernel ``argv`` (in a sandbox whose
    private folder is ``sandbox``, when given: ``grader/sandbox.py``); stand in for it until it
    exits. Returns False (nothing started) when no server answers."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    except OSError:
        return False
    with sock:
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "memory_mb": memory_mb,
                   "cpu_s": cpu_s, "launcher": os.getpid(), "sandbox": sandbox}
        _send(sock, request, fds=(0, 1, 2))
        pid = _receive(sock)[0]["pid"]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(pid, signum))
    _exit_with(pid)  # returns never: exits when the kernel has
    return True


_SERVERS = []  # the servers this process started (spawn)


def spawn(module, folder, tries=600):
    """Start ``python -m <module> <socket> <this pid>`` (a server that exits with this process) and
    wait up to ``tries`` × 50 ms for its socket; returns the socket's path (absent if it never came)."""
    import subprocess

    name = module.rsplit(".", 1)[-1]
    path = os.path.join(folder, f"{name}-{os.getpid()}.sock")
    # kept: the server outlives this call (it exits with this process), and a dropped Popen of a
    # running process is a ResourceWarning
    _SERVERS.append(subprocess.Popen([sys.executable, "-m", module, path, str(os.getpid())],
                                     stdin=subprocess.DEVNULL, start_new_session=True))
    for _ in range(tries):  # the preload takes a few seconds
        if os.path.exists(path):
            break
        time.sleep(0.05)
    return path


def start_server(folder):
    """Start a server for this process (it exits with it); returns its socket path (a launcher that
    finds nothing there starts its kernel the ordinary way)."""
    return spawn("grader.forkserver", folder)


if __name__ == "__main__":
    Server(sys.argv[1], int(sys.argv[2])).serve()
