"""The sandbox every grading kernel runs in (Linux): what a submission's code can see and do.

A submission's code runs inside its grading kernel, started by the course's owner (``nbgrader
autograde``, the formgrader's button, a cluster worker). Before the kernel starts, ``enter`` puts it
in new Linux namespaces that an unprivileged user may create (no root, no setuid helper):

- **a user namespace** whose capabilities are dropped before any learner code runs (and
  ``no_new_privs`` set), so nothing below can be undone from inside;
- **a mount namespace with a root of its own** (a small tmpfs, then ``pivot_root``): read-only, the
  system (``/usr``, ``/etc`` with its secrets masked: ``MASKED``, ...), Python and its packages, and
  of the course only the code the checks import and the public data (``COURSE_READABLE``); writable,
  a scratch copy of the
  notebook's folder (a tmpfs at the same path, thrown away with the kernel), a fresh ``/tmp`` that
  is also ``$HOME`` (no IPython startup file, no config of the owner's), and the kernel's own
  connection folder. The gradebook, ``source/`` (hidden tests), ``answer_keys/``, every other
  submission, ``nbgrader_config.py`` and the owner's home do not exist in it;
- **a network namespace** with no interface but a loopback that is down: no network at all (the
  kernel talks to the grader over unix sockets, ``transport="ipc"``);
- **a PID namespace** whose process 1 is the kernel: when the kernel ends, every process it left
  behind (a detached ``posix_spawn``, a ``setsid`` daemon) is killed by the operating system;
- IPC and host-name namespaces of its own, and an environment without the grader's secrets
  (only ``KEPT_ENVIRONMENT`` passes).

The memory and CPU limits of ``grader/launcher.py`` are set after ``enter``, inside the sandbox.
``probe()`` tells, before any grading starts, whether this machine allows it (some distributions
switch unprivileged user namespaces off); ``grader.hardening`` then refuses to grade unsandboxed
unless the instructor says so (``c.ResilientExecute.sandbox = False``).
"""
import ctypes
import os
import select
import shutil
import signal
import sys
from pathlib import Path

COURSE = Path(__file__).resolve().parents[1]
# What of the course a kernel may read: the code its checks import and the public material.
COURSE_READABLE = ("tutor", "contract", "solutions", "grader", "data", "notebooks")
SYSTEM_READABLE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
# Secrets of the system that /etc would show a kernel graded by root (their owner): an empty file or folder
# is mounted over each that exists.
MASKED = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
          "/etc/ssh", "/etc/ssl/private")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
KEPT_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS", "NBGRADER_EXECUTION", "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION",
                    "JPY_PARENT_PID", "JPY_SESSION_NAME", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                    "PYTHONWARNINGS", "COURSE_LANG", "TUTOR_CHECK_TIME_LIMIT", "COVERAGE_PROCESS_START")
SCRATCH_SIZE = "256m"  # each of the notebook's scratch folder and /tmp (tmpfs: memory, outside RLIMIT_AS)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs flags -> the mount flags a read-only remount must keep (a user namespace may not drop them)
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(OSError):
    """The sandbox could not be set up (the kernel does not start)."""


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source, target, fstype=None, flags=0, data=None):
    enc = (lambda s: None if s is None else os.fsencode(s))
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _syscall(table, *args):
    number = table.get(os.uname().machine)
    if number is None:
        raise SandboxError(0, f"no syscall number for {os.uname().machine}")
    return _libc.syscall(number, *args)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _bind_readonly(source, target):
    """``source`` (a folder or a file) visible read-only at ``target``."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    _mount(source, target, flags=MS_BIND | MS_REC)
    flags = os.statvfs(target).f_flag
    kept = sum(ms for st, ms in KEPT_FLAGS if flags & st)
    _mount(None, target, flags=MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def readable_paths():
    """Every path a kernel may read (absolute, existing, none inside another): the system, this
    Python and its packages, and ``COURSE_READABLE``. Never the course folder itself."""
    paths = list(SYSTEM_READABLE)
    python = {sys.base_prefix, sys.prefix, *(p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix)))}
    paths += sorted(python) + [str(COURSE / name) for name in COURSE_READABLE]
    found = []
    for path in paths:
        path = os.path.realpath(path) if not os.path.islink(path) else path
        if os.path.lexists(path) and not any(path == p or path.startswith(p + "/") for p in found):
            found.append(path)
    return found


def _scratch_copy(workdir, target):
    """The notebook's folder copied into its scratch tmpfs (hidden entries left out). Nothing when
    the folder holds the course itself (a maintainer's run from the repository root): the course
    is exactly what a kernel must not see."""
    if COURSE == Path(workdir) or Path(workdir) in COURSE.parents:
        return
    shutil.copytree(workdir, target, dirs_exist_ok=True, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n.startswith(".")])


def _mask(root):
    """An empty read-only file or folder over each of ``MASKED`` under ``root``."""
    empty = os.path.join(root, ".masked")
    Path(empty).touch(mode=0o444)
    for path in MASKED:
        target = root + path
        if os.path.islink(target) or not os.path.lexists(target):
            continue
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555")
        else:
            _mount(empty, target, flags=MS_BIND)
            _mount(None, target, flags=MS_REMOUNT | MS_BIND | MS_RDONLY)


def _build_root(root, workdir, private):
    """Mount the kernel's file system under ``root`` (see the module docstring)."""
    _mount(None, "/", flags=MS_REC | MS_PRIVATE)
    os.makedirs(root, exist_ok=True)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    for folder, options in (("/tmp", f"size={SCRATCH_SIZE},mode=1777"), (workdir, f"size={SCRATCH_SIZE},mode=0755")):
        os.makedirs(root + folder, exist_ok=True)
        _mount("tmpfs", root + folder, "tmpfs", MS_NOSUID | MS_NODEV, options)
    _scratch_copy(workdir, root + workdir)
    for path in readable_paths():
        target = root + path
        if os.path.islink(path):  # /bin -> usr/bin on a merged-/usr system
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(path), target)
        else:
            try:
                _bind_readonly(path, target)
            except SandboxError:
                if path != "/sys":  # /sys is a convenience (CPU counts); the rest is needed
                    raise
    _mask(root)
    os.makedirs(root + "/dev", exist_ok=True)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            Path(f"{root}/dev/{name}").touch()
            _mount(f"/dev/{name}", f"{root}/dev/{name}", flags=MS_BIND)
    os.makedirs(root + "/dev/shm", exist_ok=True)
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    os.makedirs(root + private, exist_ok=True)
    _mount(private, root + private, flags=MS_BIND)
    os.makedirs(root + "/proc", exist_ok=True)
    try:  # this PID namespace's processes only
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except SandboxError:  # a container that masks parts of /proc refuses a new one: the host's, read-only
        _bind_readonly("/proc", root + "/proc")
    os.chdir(root)
    os.makedirs(".old", exist_ok=True)
    _check(_syscall(SYS_PIVOT_ROOT, b".", b".old"), "pivot_root")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    _mount(None, "/", flags=MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _drop_privileges():
    """No capability left, none to be gained by ``exec``: the mounts above cannot be undone."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty (two 32-bit words each)
    _check(_syscall(SYS_CAPSET, header, data), "capset")


def _environment(home):
    kept = {k: v for k, v in os.environ.items() if k in KEPT_ENVIRONMENT or k.startswith("LC_")}
    kept.update(HOME=home, TMPDIR="/tmp", IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib",
                XDG_CONFIG_HOME=f"{home}/.config", XDG_CACHE_HOME=f"{home}/.cache",
                JUPYTER_CONFIG_DIR=f"{home}/.jupyter")
    os.environ.clear()
    os.environ.update(kept)
    os.makedirs(home, exist_ok=True)


def _relay(child, launcher):
    """In the process outside the PID namespace (which may start no thread: it has unshared its PID
    namespace): forward signals to ``child`` (the kernel) and exit with it, or kill it when process
    ``launcher`` is gone (the kernel has PR_SET_PDEATHSIG: this process's exit ends the namespace)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    kernel = os.pidfd_open(child)
    watched = [kernel] + ([os.pidfd_open(launcher)] if launcher else [])
    ready, _, _ = select.select(watched, [], [])  # Python retries it after a relayed signal
    if kernel not in ready:
        os._exit(1)
    _, status = os.waitpid(child, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def enter(workdir, private, launcher=None):
    """Move this (single-threaded) process into a new sandbox whose working folder is a scratch
    copy of ``workdir`` and in which the folder ``private`` (the kernel's connection files) is
    writable. Returns in the sandboxed process (process 1 of its PID namespace, capabilities
    dropped, working directory set); the process that called it stays outside, relays signals to
    it and exits with it, or with process ``launcher`` when given. Raises ``SandboxError`` in the caller
    when the sandbox cannot be made."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS),
           "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(ready_w)
        error = os.read(ready_r, 4096)  # empty: the kernel's sandbox is ready
        os.close(ready_r)
        if error:
            os.waitpid(pid, 0)
            raise SandboxError(0, error.decode(errors="replace"))
        _relay(pid, launcher)
    os.close(ready_r)
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _libc.sethostname(b"grader", 6)
        workdir, private = os.path.realpath(workdir), os.path.realpath(private)
        _build_root(os.path.join(private, "root"), workdir, private)
        _environment("/tmp/home")
        os.chdir(workdir)
        _drop_privileges()
    except BaseException as exc:  # noqa: BLE001  (reported to the caller, which raises it)
        os.write(ready_w, f"{type(exc).__name__}: {exc}".encode())
        os._exit(1)
    os.close(ready_w)


def probe():
    """None when a sandbox can be made here, else why not (one line). Runs ``enter`` in a child."""
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="grader-probe-") as private, \
            tempfile.TemporaryDirectory(prefix="grader-probe-work-") as workdir:
        read_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_w[0])
            try:
                enter(workdir, private)
                message = b"" if not os.path.exists(str(COURSE / "nbgrader_config.py")) else b"course visible"
            except BaseException as exc:  # noqa: BLE001
                message = f"{exc}".encode() or b"failed"
            os.write(read_w[1], message)
            os._exit(0)
        os.close(read_w[1])
        message = b""
        while chunk := os.read(read_w[0], 4096):
            message += chunk
        os.close(read_w[0])
        os.waitpid(pid, 0)
    return message.decode(errors="replace") or None
