"""Autograde tasks forked from a warm process, so no task pays for importing nbgrader again.

A cluster task is one ``nbgrader autograde <assignment> --student <id> --force``. Started as a new
Python process, it spends about 2.3 s importing nbgrader before it grades anything (4.5 s with
jsonschema 4.25+, whose IRI grammar is built on import: requirements.txt pins 4.24), while grading
one notebook takes 0.5 to 5 s. A *task server* imports nbgrader once per worker and forks a child
per task: the child runs nbgrader's command line in the task's directory and environment, in a
fresh process with nothing of another task in it (the server runs no learner code; of the course
it only imports the grader and the registry of mistake ids).

- ``Server`` (``python -m grader.taskserver <socket> <parent pid>``): preloads nbgrader, listens
  on a unix socket, forks a child per request, and reports the child's exit code on the request's
  connection. It exits with the process that started it (a cluster worker).
- ``run`` (in the task): sends the command line, directory, environment and a log file, and waits
  for the exit code. The child exits when the task's process is gone (a worker killed mid-task
  leaves no grading behind, as a child process of the worker would not).

Linux only; elsewhere ``grader.cluster`` starts ``nbgrader`` as a new process.
"""
import os
import sys
import threading

from grader.forkserver import _exit_with, _receive, _send, listen, spawn

# tutor.mistakes: the mistake ids that RecordFindings keeps (grader.feedback.classify); it imports the
# checks and torch, about 2 s that every task whose class made a named mistake would pay again
PRELOAD = ("nbgrader.apps.nbgraderapp", "grader.hardening", "grader.execution", "sqlalchemy", "psycopg",
           "tutor.mistakes")


def _run_nbgrader(request, fds):
    """In the forked child: the request's log file as stdout/stderr, its directory and environment,
    then nbgrader's command line; exits with nbgrader's exit code."""
    os.dup2(fds[0], 1)
    os.dup2(fds[0], 2)
    os.close(fds[0])
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    threading.Thread(target=_exit_with, args=(request["client"],), daemon=True).start()
    sys.argv = ["nbgrader", *request["args"]]
    from nbgrader.apps.nbgraderapp import main

    code = 0
    try:
        main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child's last word goes to its log, like an uncaught error would
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def warm():
    """Build once what every task would build again: nbformat's compiled notebook schemas (0.19 s a
    task) and SQLAlchemy's mappers of nbgrader's gradebook tables (0.12 s a task)."""
    import nbformat
    import sqlalchemy.orm
    from nbgrader import api  # noqa: F401  (its tables, mapped)

    for relax in (False, True):
        nbformat.validator.get_validator(4, nbformat.v4.nbformat_minor, relax_add_props=relax)
    sqlalchemy.orm.configure_mappers()


class Server:
    """The warm process: preload nbgrader, then fork a child for each request on ``path``."""

    def __init__(self, path, parent):
        self.path, self.parent = path, parent

    def serve(self):
        for module in PRELOAD:
            try:
                __import__(module)
            except ImportError:  # psycopg is an extra: without it the gradebook is not PostgreSQL anyway
                pass
        warm()
        listener = listen(self.path)
        threading.Thread(target=_exit_with, args=(self.parent,), daemon=True).start()
        while True:
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                _run_nbgrader(request, fds)
            for fd in fds:
                os.close(fd)
            threading.Thread(target=self._report, args=(conn, pid), daemon=True).start()

    @staticmethod
    def _report(conn, pid):
        """Wait for child ``pid``; send its exit code on ``conn``."""
        _, status = os.waitpid(pid, 0)
        with conn:
            try:
                _send(conn, {"code": os.waitstatus_to_exitcode(status)})
            except OSError:  # the task is gone (its worker died); its child has exited with it
                pass


def start_server(folder):
    """Start a server for this process (it exits with it); returns its socket path."""
    path = spawn("grader.taskserver", folder, tries=1200)
    if not os.path.exists(path):
        raise RuntimeError(f"the task server did not start ({path})")
    return path


def run(path, args, cwd, env, log_path):
    """Run ``nbgrader *args`` in ``cwd`` with ``env`` on the server at ``path``, its output written
    to ``log_path``; returns nbgrader's exit code."""
    import socket

    with open(log_path, "wb") as log, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        _send(sock, {"args": list(args), "cwd": str(cwd), "env": dict(env), "client": os.getpid()},
              fds=(log.fileno(),))
        return _receive(sock)[0]["code"]


if __name__ == "__main__":
    Server(sys.argv[1], int(sys.argv[2])).serve()
