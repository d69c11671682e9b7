"""Grade a class on many processes and machines with Dask distributed.

    python -m grader.cluster start --workers 2      # a scheduler and 2 workers, in the background
    python -m grader.cluster grade [01_attention ...] [--student alice ...]
    python -m grader.cluster stop

Why Dask (docs/INSTRUCTOR.md, "A large class"): a scheduler and workers are plain processes
started by one command each (``dask scheduler``, ``dask worker``), with no broker to run beside them;
a task whose worker dies is given to another worker by the scheduler itself; and the same workers
start on a SLURM cluster (dask-jobqueue) or Kubernetes (dask-kubernetes) without changing this code.

One task per (student, assignment): ``nbgrader autograde <assignment> --student <id> --force`` in
the course directory, a process of its own that dies with its worker (a worker killed mid-task
leaves no grading behind; the scheduler runs the task again on another worker, and ``--force``
rewrites whatever the killed run had written). On Linux that process is forked from a warm task
server that has imported nbgrader once per worker (``grader/taskserver.py``: saves about 4 s a
task), and its kernels from a warm fork server (``grader/forkserver.py``). The gradebook is the PostgreSQL database that
``NBGRADER_DB_URL`` names (``tools/postgres.sh``), shared by every worker; the course directory
(``source/``, ``submitted/``, ``autograded/``) is shared storage. Each worker has a working
directory of its own (``--local-directory``) for its scratch files and kernel connection files.

On a shared machine nobody else may submit a task (it would run as the instructor): the processes
talk mutual TLS (``distributed.security``) with a private CA and one certificate that ``start`` makes
(``certificates``; the library ``cryptography``), kept with ``scheduler.json`` in ``cluster/``, which is
0700: another local account can neither read the address nor connect without the certificate.

``grade`` adds every student to the gradebook before any task starts (two tasks of one student
would otherwise race to create the student), skips assignments with no graded cell, waits for
every task, then checks the gradebook: every graded cell of every submission has a score.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader import taskserver
from grader.launcher import die_with_parent
from grader.limits import forkserver_for_this_process

COURSE = Path.cwd()
STATE = "cluster"  # the running cluster's files, under the course directory (git-ignored)


def autograde_one(course, assignment, student, db_url):
    """The task: autograde one student's assignment; returns (assignment, student, exit code, log tail)."""
    scratch = Path(os.environ.get("GRADER_WORKER_DIR") or Path.cwd())
    forkserver_for_this_process()  # one warm fork server per worker, for the kernels of all its tasks
    env = dict(os.environ, NBGRADER_DB_URL=db_url, JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
               TMPDIR=str(scratch))
    env.pop("NBGRADER_EXECUTION", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    args = ["autograde", assignment, "--student", student, "--force"]
    server = taskserver_for_this_process()
    if server:
        log = scratch / "task.log"
        code = taskserver.run(server, args, course, env, log)
        return assignment, student, code, log.read_text(errors="replace")[-2000:]
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, preexec_fn=die_with_parent)
    return assignment, student, proc.returncode, (proc.stdout + proc.stderr)[-2000:]


_TASK_SERVER = {}  # this worker's task server: {"path": its socket}


def taskserver_for_this_process():
    """The warm task server of this worker (started on its first task; Linux only, else None)."""
    if not sys.platform.startswith("linux"):
        return None
    if "path" not in _TASK_SERVER:
        _TASK_SERVER["path"] = taskserver.start_server(tempfile.mkdtemp(prefix="grader-task-"))
    return _TASK_SERVER["path"]


def graded_assignments(course):
    """Assignments in ``course``'s source/ whose notebooks have a graded cell (others need no grading)."""
    graded = []
    for folder in sorted(p for p in (course / "source").iterdir() if p.is_dir()):
        cells = [c for nb in folder.glob("*.ipynb") for c in json.loads(nb.read_text())["cells"]]
        if any(c.get("metadata", {}).get("nbgrader", {}).get("grade") for c in cells):
            graded.append(folder.name)
    return graded


def submissions(course, assignments, students=None):
    """(assignment, student) for each hand-in folder under submitted/."""
    found = []
    for student_dir in sorted(p for p in (course / "submitted").iterdir() if p.is_dir()):
        if students and student_dir.name not in students:
            continue
        found += [(a, student_dir.name) for a in assignments if (student_dir / a).is_dir()]
    return found


def course_id(course):
    """The course id of ``course``'s nbgrader_config.py (the gradebook keeps assignments per course)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    return config.CourseDirectory.course_id


def incomplete(course, db_url, pairs):
    """(assignment, student) pairs whose submission has a graded cell without a score."""
    from nbgrader.api import Gradebook, MissingEntry

    missing = []
    with Gradebook(db_url, course_id(course)) as gb:
        for assignment, student in pairs:
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                missing.append((assignment, student))
                continue
            grades = [g for nb in submission.notebooks for g in nb.grades]
            if any(g.auto_score is None and g.manual_score is None and not g.needs_manual_grade for g in grades):
                missing.append((assignment, student))
    return missing


def grade(client, course, db_url, assignments=None, students=None, retries=2, log=print):
    """Grade every hand-in of ``assignments`` (default: the graded ones) on the cluster of ``client``.

    Returns ``{(assignment, student): exit code}``; raises RuntimeError naming the submissions
    left without complete grades."""
    from nbgrader.api import Gradebook

    assignments = assignments or graded_assignments(course)
    pairs = submissions(course, assignments, students)
    with Gradebook(db_url, course_id(course)) as gb:
        for student in sorted({s for _, s in pairs}):
            gb.update_or_create_student(student)
    # By reference (grader.cluster.autograde_one), never by value: `python -m grader.cluster` runs this
    # module as __main__, whose functions cloudpickle copies with their globals, so each task would
    # have started a task server of its own (and kept it until `stop`).
    from grader.cluster import autograde_one as task

    futures = [client.submit(task, str(course), a, s, db_url, key=f"autograde-{a}-{s}", retries=retries,
                             pure=False) for a, s in pairs]
    codes = {}
    for future in futures:
        assignment, student, code, tail = future.result()
        codes[assignment, student] = code
        if code != 0:
            log(f"{assignment} {student}: nbgrader exited {code} (as serial autograde would):\n{tail}")
    left = incomplete(course, db_url, pairs)
    if left:
        raise RuntimeError(f"grades incomplete for {left}: run the same command again")
    log(f"graded {len(pairs)} submissions ({len(assignments)} assignments, {len({s for _, s in pairs})} students)")
    return codes


# -- the cluster's processes ----------------------------------------------------------------------

def _state(course):
    return course / STATE


def certificates(state):
    """``(ca, cert, key)``: the cluster's files under ``state``/tls/, made on first use: a private CA
    and one certificate it signed, which the scheduler, the workers and the client all present
    (mutual TLS: a connection without it is refused). The key is 0600, the folder 0700."""
    folder = state / "tls"
    ca, cert, key = folder / "ca.pem", folder / "cluster.pem", folder / "cluster-key.pem"
    if all(p.exists() for p in (ca, cert, key)):
        return ca, cert, key
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def issue(subject_key, name, issuer_key, issuer_name, is_ca):
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name)
                .public_key(subject_key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=365))
                .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
                .sign(issuer_key, hashes.SHA256()))

    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shousi-grader cluster CA")])
    leaf_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shousi-grader cluster")])
    pem = serialization.Encoding.PEM
    ca.write_bytes(issue(ca_key, ca_name, ca_key, ca_name, True).public_bytes(pem))
    cert.write_bytes(issue(leaf_key, leaf_name, ca_key, ca_name, False).public_bytes(pem))
    key.touch(mode=0o600)
    key.write_bytes(leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca, cert, key


def security(course):
    """The ``distributed.Security`` of the cluster ``start`` made in ``course``: mutual TLS, required."""
    from distributed.security import Security

    ca, cert, key = certificates(_state(course))
    return Security(tls_ca_file=str(ca), tls_client_cert=str(cert), tls_client_key=str(key), require_encryption=True)


def _tls_options(state, role):
    ca, cert, key = certificates(state)
    return ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)] + \
        (["--protocol", "tls"] if role == "scheduler" else [])


def start(course, workers, threads=1, port=0):
    """Start ``dask scheduler`` and ``workers`` ``dask worker`` processes (one grading slot each,
    each in its own working directory under cluster/), speaking mutual TLS; returns the scheduler
    file's path."""
    state = _state(course)
    state.mkdir(mode=0o700, exist_ok=True)
    state.chmod(0o700)  # scheduler.json, the certificates, the logs: the instructor's alone
    scheduler_file = state / "scheduler.json"
    scheduler_file.unlink(missing_ok=True)
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler", *_tls_options(state, "scheduler")]
    pids = {"scheduler": _spawn(dask + ["--scheduler-file", str(scheduler_file), "--port", str(port),
                                        "--dashboard-address", ":0", "--host", "127.0.0.1"], state / "scheduler.log")}
    for _ in range(600):
        if scheduler_file.exists():
            break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"the scheduler did not start: see {state / 'scheduler.log'}")
    scheduler_file.chmod(0o600)
    for i in range(workers):
        pids[f"worker-{i}"] = start_worker(course, f"worker-{i}", threads)
    (state / "pids.json").write_text(json.dumps(pids))
    return scheduler_file


def start_worker(course, name, threads=1):
    """One ``dask worker`` process in cluster/<name>/; returns its process id."""
    state = _state(course)
    folder = state / name
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GRADER_WORKER_DIR=str(folder), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", *_tls_options(state, "worker"),
           "--scheduler-file", str(state / "scheduler.json"),
           "--nthreads", str(threads), "--nworkers", "1", "--no-nanny", "--name", name,
           "--local-directory", str(folder), "--dashboard-address", ":0", "--host", "127.0.0.1"]
    return _spawn(cmd, folder / "worker.log", env=env, cwd=folder)


_STARTED = []  # the scheduler and workers this process started: they outlive _spawn (stop() ends them by
# pid), and a dropped Popen of a running process is a ResourceWarning


def _spawn(cmd, logfile, env=None, cwd=None):
    with open(logfile, "a") as log:
        _STARTED.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                         start_new_session=True))
    return _STARTED[-1].pid


def stop(course, grace_s=15):
    """Stop every process ``start`` started: the workers, then the scheduler; whatever has not exited
    after ``grace_s`` seconds (a worker whose shutdown raced the scheduler's) is killed."""
    pids_file = _state(course) / "pids.json"
    if not pids_file.exists():
        return
    pids = running_pids(course)
    order = [pid for name, pid in pids.items() if name != "scheduler"] + [pids["scheduler"]]
    for pid in order:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(alive(pid) for pid in order) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in order:
        if alive(pid):
            _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5  # SIGKILL is not instant: return once they are gone
    while any(alive(pid) for pid in order) and time.monotonic() < deadline:
        time.sleep(0.05)
    pids_file.unlink()


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def running_pids(course):
    """{"scheduler": pid, "worker-0": pid, ...} of the processes ``start`` started."""
    return json.loads((_state(course) / "pids.json").read_text())


def alive(pid):
    """True while process ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def client_for(course, workers=None, timeout=120):
    """A ``distributed.Client`` of the running cluster (``DASK_SCHEDULER_ADDRESS`` when set, as on
    SLURM or Kubernetes; else the one ``start`` started), once ``workers`` workers are there."""
    from distributed import Client

    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        client = Client(address, timeout=timeout)
    else:
        client = Client(scheduler_file=str(_state(course) / "scheduler.json"), timeout=timeout,
                        security=security(course))
    if workers:
        client.wait_for_workers(workers, timeout=timeout)
    return client


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a scheduler and workers on this machine")
    p_start.add_argument("--workers", type=int, default=os.cpu_count())
    sub.add_parser("stop", help="stop them")
    p_grade = sub.add_parser("grade", help="autograde every hand-in on the running cluster")
    p_grade.add_argument("assignments", nargs="*", help="default: every assignment with a graded cell")
    p_grade.add_argument("--student", action="append", help="only these students (repeatable)")
    args = parser.parse_args(argv)
    if args.command == "start":
        print(f"scheduler file: {start(COURSE, args.workers)}")
    elif args.command == "stop":
        stop(COURSE)
    else:
        db_url = os.environ.get("NBGRADER_DB_URL")
        if not db_url:
            sys.exit("grader.cluster grade: 请先设置 NBGRADER_DB_URL（tools/postgres.sh url）/ set NBGRADER_DB_URL "
                     "first (tools/postgres.sh url): workers share a PostgreSQL gradebook")
        with client_for(COURSE) as client:
            try:
                grade(client, COURSE, db_url, args.assignments or None, args.student)
            except RuntimeError as error:
                sys.exit(f"grader.cluster grade: {error}")


if __name__ == "__main__":
    main()
