"""The class of `make class-up`, for the tests that act as its real accounts (tests/test_class_attacks.py,
tests/browser/test_class_cycle.py). Linux and root only; the tests skip and say why elsewhere.

``class_up()`` is a module fixture's body: it reuses a class that is already up (and leaves it up), or
brings one up with `make class-up` and takes it down with `make class-down` afterwards. ``sh(user, script)``
runs a shell script as that account, with the environment the hub gives its server.
"""
import grp
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from tools import class_up as tool

REPO = Path(__file__).resolve().parents[1]
BASE = tool.BASE
COURSE = BASE / "course"
EXCHANGE = BASE / "exchange" / tool.COURSE_ID


def require_root_linux():
    if sys.platform != "linux":
        pytest.skip("a class needs Linux accounts and runuser: not Linux")
    if os.geteuid() != 0:
        pytest.skip("make class-up creates accounts: run as root (make test-class)")


def class_up():
    """Yields the hub's URL; see the module."""
    require_root_linux()
    mine = not (BASE / "accounts").exists()
    if mine:
        out = subprocess.run(["make", "-s", "class-up"], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"course: {COURSE}" in out.stdout.splitlines(), out.stdout
    yield f"http://127.0.0.1:{tool.PORT}/"
    if mine:
        uids = {pwd.getpwnam(user).pw_uid for user in tool.STAFF + tool.STUDENTS}
        subprocess.run(["make", "-s", "class-down"], cwd=REPO, check=True)
        assert_nothing_left(uids)


def assert_nothing_left(uids):
    """After `make class-down`: no account, group, process or file of the class (its folders, the
    passwords, anything its accounts left in the shared temporary folders or /home)."""
    for user in tool.STAFF + tool.STUDENTS:
        with pytest.raises(KeyError):
            pwd.getpwnam(user)
    with pytest.raises(KeyError):
        grp.getgrnam(tool.GROUP)
    assert not BASE.exists() and not tool.PASSWORDS.exists()
    processes = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _uid(p) in uids]
    assert not processes, processes
    left = [path for top in (*tool.TEMP, "/home") for path in Path(top).iterdir() if _uid(path) in uids]
    assert not left, left


def _uid(path):
    try:
        return path.lstat().st_uid
    except OSError:  # gone meanwhile
        return None


def sh(user, script, cwd=None):
    """Runs ``script`` with sh as ``user`` (in ``cwd``, default the home); returns the CompletedProcess."""
    return subprocess.run(tool.as_user(user, "sh", "-c", script, cwd=cwd), capture_output=True, text=True)


def staff(user, script):
    """``sh`` in the course folder, as the course staff work."""
    return sh(user, script, cwd=COURSE)
