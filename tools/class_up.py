"""A class on one Linux machine, as root: `make class-up` / `make class-down` (docs/INSTRUCTOR.md §6).

`up` creates the accounts (the staff, instructor and ta, in the group course-staff; the students alice,
bob and carol) with private homes (0700) and random passwords (written to PASSWORDS, 0600, git-ignored),
installs the course where only the staff can read it, builds the hardened exchange, and starts a
JupyterHub (PyPI) with its proxy (configurable-http-proxy, npm), then prints `hub: URL` and
`course: PATH`. `down` stops every process of the class and removes the accounts and files `up` made,
and what the accounts left in /tmp, /var/tmp and /dev/shm.

Everything lives under BASE:
  venv/      the class's Python (requirements.txt + requirements-class.txt), without the course: a
             student's kernel cannot import the reference
  lib/       tutor/ and contract/, which every release notebook imports, and the students' side of the
             exchange (grader/exchange.py): world-readable
  course/    this repository's tracked files: instructor:course-staff, 2770 dirs, 0660 files
  exchange/  nbgrader's exchange root: root:root 1777 (sticky: nobody moves another's folder)
  etc/       Jupyter settings per role (staff, student)
  proxy/     configurable-http-proxy, from deploy/class/package.json
  hub/       JupyterHub's state and log: root only
"""
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = Path(os.environ.get("CLASS_BASE", "/srv/shousi-class"))
PORT = int(os.environ.get("CLASS_PORT", "8765"))  # the hub; the next two ports: its API and the proxy's
PASSWORDS = REPO / "build" / "class-passwords.txt"
GROUP = "course-staff"
STAFF = ["instructor", "ta"]
STUDENTS = ["alice", "bob", "carol"]
COURSE_ID = "shousi-transformer"
PYTHON = "/usr/bin/python3"  # Debian's (python3-venv): every account can run it, unlike a pyenv under /root
TEMP = ("/tmp", "/var/tmp", "/dev/shm")
DISABLED_FOR_STUDENTS = ["formgrader", "create-assignment", "course-list"]


def run(*cmd, **kwargs):
    """Runs cmd and stops the set-up if it fails."""
    return subprocess.run(cmd, check=True, **kwargs)


def write(path, text, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def accounts():
    """The group, then each account with a private home and a random password; each name is added to
    BASE/accounts as soon as it exists, so `down` removes what `up` made and nothing else."""
    run("groupadd", GROUP)
    made = BASE / "accounts"
    write(made, GROUP + "\n", mode=0o600)
    lines = []
    for user in STAFF + STUDENTS:
        with open(made, "a") as f:
            f.write(user + "\n")
        run("useradd", "--create-home", "--shell", "/bin/bash", "-K", "HOME_MODE=0700",
            *(["--groups", GROUP] if user in STAFF else []), user)
        password = secrets.token_urlsafe(12)
        run("chpasswd", input=f"{user}:{password}\n", text=True)
        lines.append(f"{user} {password}\n")
    write(PASSWORDS, "".join(lines), mode=0o600)


def _exists(lookup, name):
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def software():
    """The class's venv and proxy, both world-readable and owned by root."""
    run(PYTHON, "-m", "venv", BASE / "venv")
    run(BASE / "venv/bin/pip", "install", "--quiet", "--disable-pip-version-check",
        "-r", REPO / "requirements.txt", "-r", REPO / "requirements-class.txt")
    (BASE / "proxy").mkdir()
    shutil.copy(REPO / "deploy/class/package.json", BASE / "proxy")
    run("npm", "install", "--silent", "--no-audit", "--no-fund", "--omit=dev", cwd=BASE / "proxy")
    for package in ("tutor", "contract"):
        shutil.copytree(REPO / package, BASE / "lib" / package, ignore=shutil.ignore_patterns("__pycache__"))
    for module in ("__init__.py", "exchange.py"):  # the students' side of the exchange: ClassSubmit
        write(BASE / "lib/grader" / module, (REPO / "grader" / module).read_text())


def course():
    """The working tree (tracked and not ignored files), private to the staff, with its gradebook and roster."""
    dest = BASE / "course"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    write(dest / "class.json", json.dumps({"exchange": str(BASE / "exchange")}) + "\n")
    uid, gid = pwd.getpwnam("instructor").pw_uid, grp.getgrnam(GROUP).gr_gid
    for folder, _, names in os.walk(dest):
        os.chown(folder, uid, gid)
        os.chmod(folder, 0o2770)
        for name in names:
            path = os.path.join(folder, name)
            os.chown(path, uid, gid)
            os.chmod(path, 0o770 if os.access(path, os.X_OK) else 0o660)
    run(*as_user("instructor", "nbgrader", "generate_assignment", "*", "--force", "--log-level=ERROR", cwd=dest))
    for student in STUDENTS:
        run(*as_user("instructor", "nbgrader", "db", "student", "add", student, "--first-name", student.title(),
                     "--last-name", "Student", "--log-level=ERROR", cwd=dest))
    (dest / "gradebook.db").chmod(0o660)  # SQLite makes it 0644 & ~umask; the TA records grades too


def as_user(user, *cmd, cwd=None):
    """The command line that runs cmd as `user` in `cwd` (default: the home) with the environment and
    umask the hub gives that user's server (deploy/class/jupyterhub_config.py)."""
    staff = user in STAFF
    env = {"HOME": f"/home/{user}", "USER": user, "PATH": f"{BASE}/venv/bin:/usr/bin:/bin", "OMP_NUM_THREADS": "1",
           "JUPYTER_CONFIG_PATH": f"{BASE}/etc/{'staff' if staff else 'student'}",
           "PYTHONPATH": f"{BASE}/course" if staff else f"{BASE}/lib"}
    return ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            "sh", "-c", 'umask 007 && cd "$0" && exec "$@"', str(cwd or env["HOME"]), *map(str, cmd)]


def exchange():
    """Root-owned sticky root; the course's folder pre-made and owned by the instructor: students can
    hand in (inbound: write, no list, sticky) and fetch (outbound), never list or replace anything."""
    root = BASE / "exchange"
    root.mkdir()
    root.chmod(0o1777)
    uid, gid = pwd.getpwnam("instructor").pw_uid, grp.getgrnam(GROUP).gr_gid
    for sub, mode in (("", 0o2755), ("outbound", 0o2775), ("inbound", 0o3773), ("feedback", 0o2771)):
        path = root / COURSE_ID / sub
        path.mkdir(exist_ok=True)
        os.chown(path, uid, gid)
        path.chmod(mode)


def settings():
    """Per role: the exchange and course for nbgrader, which nbgrader extensions are on."""
    for role in ("staff", "student"):
        etc = BASE / "etc" / role
        lines = [f"c.Exchange.root = {str(BASE / 'exchange')!r}", f"c.CourseDirectory.course_id = {COURSE_ID!r}"]
        if role == "staff":
            lines.append(f"c.CourseDirectory.root = {str(BASE / 'course')!r}")
        else:
            lines.append('c.ExchangeFactory.submit = "grader.exchange.ClassSubmit"')
        write(etc / "nbgrader_config.py", "\n".join(lines) + "\n")
        disabled = {"@jupyterlab/apputils-extension:announcements": True}
        if role == "student":
            disabled |= {f"@jupyter/nbgrader:{name}": True for name in DISABLED_FOR_STUDENTS}
            server = {f"nbgrader.server_extensions.{name.replace('-', '_')}": False
                      for name in DISABLED_FOR_STUDENTS if name != "create-assignment"}
            write(etc / "jupyter_server_config.json", json.dumps({"ServerApp": {"jpserver_extensions": server}}))
        write(etc / "labconfig/page_config.json", json.dumps({"disabledExtensions": disabled}))


def hub():
    """JupyterHub in its own session (so `down` can stop it and its proxy), waited for until it answers."""
    state = BASE / "hub"
    state.mkdir(mode=0o700)
    env = {**os.environ, "CLASS_BASE": str(BASE), "CLASS_PORT": str(PORT),
           "PATH": f"{BASE}/venv/bin:/usr/bin:/bin"}
    with open(state / "hub.log", "w") as log:
        subprocess.Popen([BASE / "venv/bin/jupyterhub", "-f", REPO / "deploy/class/jupyterhub_config.py"],
                         cwd=state, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{PORT}/"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "hub/login", timeout=5)
            return url
        except OSError:
            time.sleep(1)
    sys.exit(f"class-up: hub 未启动 / the hub did not start: see {state / 'hub.log'}")


def up():
    started = time.monotonic()
    taken = [u for u in STAFF + STUDENTS if _exists(pwd.getpwnam, u)] + [GROUP] * _exists(grp.getgrnam, GROUP)
    if taken or BASE.exists():
        sys.exit(f"class-up: 已存在 / already exists: {', '.join(taken) or BASE} "
                 "(make class-down removes a class that make class-up made)")
    BASE.mkdir(mode=0o755, parents=True)
    accounts()
    software()
    exchange()
    settings()
    course()
    url = hub()
    print(f"class-up: {time.monotonic() - started:.0f} s; passwords: {PASSWORDS}")
    print(f"hub: {url}")
    print(f"course: {BASE / 'course'}")


def _made():
    """The group and the accounts `up` made (none when no class is up)."""
    made = BASE / "accounts"
    return made.read_text().split() if made.exists() else []


def _class_processes(users):
    """Processes of the class's accounts, and any process started from BASE (the hub, its proxy)."""
    uids = {pwd.getpwnam(u).pw_uid for u in users if _exists(pwd.getpwnam, u)}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if proc.stat().st_uid in uids or str(BASE) + "/" in cmdline:
                found.append(int(proc.name))
        except OSError:  # it ended meanwhile
            pass
    return found


def down():
    made = _made()
    users = [u for u in made if u != GROUP]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _class_processes(users):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        for _ in range(20):
            if not _class_processes(users):
                break
            time.sleep(0.5)
    uids = {pwd.getpwnam(u).pw_uid for u in users if _exists(pwd.getpwnam, u)}
    for top in TEMP:  # what the class's processes left in the shared temporary folders (grading's sockets)
        for entry in Path(top).iterdir():
            if entry.lstat().st_uid in uids:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    for user in users:
        if _exists(pwd.getpwnam, user):
            run("userdel", "--remove", user, stderr=subprocess.DEVNULL)
    if GROUP in made and _exists(grp.getgrnam, GROUP):
        run("groupdel", GROUP)
    shutil.rmtree(BASE, ignore_errors=True)
    PASSWORDS.unlink(missing_ok=True)
    print("class-down: 已清除 / removed")


if __name__ == "__main__":
    if sys.platform != "linux" or os.geteuid() != 0:
        sys.exit("class-up/down: 需要 Linux 上的 root / needs root on Linux")
    {"up": up, "down": down}[sys.argv[1]]()
