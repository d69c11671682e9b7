"""Students against students and against the course, on the class of `make class-up` (issue 34).

Each attack runs as the real account (runuser, with the environment the hub gives its server) and is
asserted blocked for a stated reason: the kernel's permission check (a private home, the course private
to its staff, the exchange's modes) or the class's collect (grader/exchange.py), which refuses with one
line a hand-in that is not its student's own. Linux and root only (`make test-class`).
"""
import grp
import os
import pwd
import shutil
import sqlite3
import stat

import pytest

from classroom import BASE, COURSE, EXCHANGE, sh, staff
from grader import exchange
from tools.class_up import GROUP, PASSWORDS

pytestmark = [pytest.mark.slow, pytest.mark.classroom]
DENIED = "Permission denied"
NOT_PERMITTED = "Operation not permitted"
A = "01_attention"


@pytest.fixture(scope="module", autouse=True)
def released(klass):
    out = staff("instructor", f"nbgrader release_assignment {A} --force")
    assert out.returncode == 0, out.stderr
    for student in ("alice", "bob"):
        out = sh(student, f"rm -rf {A} && nbgrader fetch_assignment {A}")
        assert out.returncode == 0, out.stderr


@pytest.fixture
def fresh():
    """No hand-in, no collected submission, no student cache (as root, between tests)."""
    for path in [*(EXCHANGE / "inbound").iterdir(), *(COURSE / "submitted").glob("*")]:
        path.unlink() if path.is_symlink() else shutil.rmtree(path)
    for student in ("alice", "bob"):
        shutil.rmtree(f"/home/{student}/.local/share/jupyter/nbgrader_cache", ignore_errors=True)


def collect(user="ta"):
    out = staff(user, f"nbgrader collect {A} --update")
    assert out.returncode == 0, out.stderr
    return out.stderr


def handin(student):
    """The student's genuine hand-in (`nbgrader submit`); returns its timestamp."""
    out = sh(student, f"nbgrader submit {A}")
    assert out.returncode == 0, out.stderr
    cached = sh(student, f"cat .local/share/jupyter/nbgrader_cache/shousi-transformer/{student}+{A}+*/timestamp.txt")
    return cached.stdout


def collected_timestamp(student):
    return (COURSE / "submitted" / student / A / "timestamp.txt").read_text()


def forge(student, name, *, link_to=None):
    """``student`` makes an inbound folder by hand (a copy of their fetched assignment, or a link)."""
    dest = EXCHANGE / "inbound" / name
    script = f'ln -s "{link_to}" "{dest}"' if link_to else f'cp -r {A} "{dest}"'
    out = sh(student, script)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ students against students


def test_bob_cannot_read_alices_work_or_her_nbgrader_secret():
    """Homes are 0700: Alice's notebooks and her nbgrader cache (the secret her feedback's name hashes)."""
    for path in (f"/home/alice/{A}/{A}.ipynb", "/home/alice/.local/share/jupyter/nbgrader_cache"):
        out = sh("bob", f'ls -R "{path}" && cat "{path}"')
        assert out.returncode != 0 and DENIED in out.stderr, out


def test_bob_cannot_list_the_hand_ins_or_the_feedback(fresh):
    """inbound/ is writable but not listable by students (3773), feedback/ only passable (2771)."""
    handin("alice")
    for sub in ("inbound", "feedback"):
        out = sh("bob", f"ls {EXCHANGE / sub}")
        assert out.returncode != 0 and DENIED in out.stderr, out


def test_bob_cannot_touch_alices_hand_in_even_knowing_its_name(fresh):
    """inbound/ is sticky: only the owner of an entry (or of the folder) may rename or delete it; the
    hand-in itself is 0750, group course-staff (ClassSubmit; nbgrader's own is 0777): Bob can neither
    read, delete nor replace the notebook in it."""
    handin("alice")
    (name,) = [p.name for p in (EXCHANGE / "inbound").iterdir()]
    nb = f'"{EXCHANGE}/inbound/{name}/{A}.ipynb"'
    for script in (f'mv "{EXCHANGE}/inbound/{name}" /tmp/stolen', f'rm -rf "{EXCHANGE}/inbound/{name}"',
                   f"cat {nb}", f"echo '{{}}' > {nb}"):
        out = sh("bob", script)
        assert out.returncode != 0 and (NOT_PERMITTED in out.stderr or DENIED in out.stderr), out
    assert (EXCHANGE / "inbound" / name / f"{A}.ipynb").exists()


def test_bob_cannot_replace_the_course_folder_of_the_exchange():
    """The exchange root is root's and sticky (1777): its course folder is the instructor's and stays
    where it is; outbound/ (2775) is the staff's, so no student replaces a released notebook."""
    for script in (f"mv {EXCHANGE} {EXCHANGE}.old", f"rm -rf {EXCHANGE}"):
        out = sh("bob", script)
        assert out.returncode != 0 and (NOT_PERMITTED in out.stderr or DENIED in out.stderr), out
    out = sh("bob", f"echo '{{}}' > {EXCHANGE}/outbound/{A}/{A}.ipynb")
    assert out.returncode != 0 and DENIED in out.stderr, out
    out = sh("bob", f"mkdir {EXCHANGE}/outbound/02_multihead")
    assert out.returncode != 0 and DENIED in out.stderr, out


def test_a_hand_in_in_someone_elses_name_is_refused(fresh):
    """`nbgrader submit --student alice` run by Bob: the class's submit refuses; nbgrader's own (which
    he may choose) makes a folder named for Alice but owned by Bob, which collect refuses."""
    alice = handin("alice")
    out = sh("bob", f"nbgrader submit {A} --student alice")
    assert out.returncode != 0 and exchange.NOT_YOURS.format(login="bob", student="alice") in out.stderr, out
    out = sh("bob", f"nbgrader submit {A} --student alice "
                    "--ExchangeFactory.submit=nbgrader.exchange.default.submit.ExchangeSubmit")
    assert out.returncode == 0, out.stderr
    log = collect()
    assert "owned by bob, not alice: not collected" in log and "文件属于 bob，不是 alice" in log, log
    assert collected_timestamp("alice") == alice


def test_a_future_timestamp_does_not_beat_a_later_genuine_hand_in(fresh):
    """A folder dated 2099 would win every `collect --update`: it is refused, the real one collected."""
    forge("alice", f"alice+{A}+2099-01-01 00:00:00.000000 UTC+forged")
    alice = handin("alice")
    for _ in range(2):
        log = collect()
        assert exchange.FUTURE.format(name=f"alice+{A}+2099-01-01 00:00:00.000000 UTC+forged") in log, log
        assert collected_timestamp("alice") == alice


def test_a_backdated_hand_in_is_refused(fresh):
    """A folder dated before the deadline but written now: the kernel's ctime gives it away."""
    name = f"bob+{A}+2020-01-01 00:00:00.000000 UTC+forged"
    forge("bob", name)
    log = collect()
    assert exchange.CHANGED.format(name=name) in log, log
    assert not (COURSE / "submitted" / "bob").exists()


def test_a_hand_in_for_an_invented_student_is_refused_and_the_roster_unchanged(fresh):
    name = f"mallory+{A}+2026-01-01 00:00:00.000000 UTC+forged"
    forge("bob", name)
    log = collect()
    assert exchange.NOT_IN_ROSTER.format(name=name, student="mallory") in log, log
    assert not (COURSE / "submitted" / "mallory").exists()
    with sqlite3.connect(COURSE / "gradebook.db") as db:
        assert {r[0] for r in db.execute("select id from student")} == {"alice", "bob", "carol"}


@pytest.mark.parametrize("target", ["solutions", "source"])
def test_a_hand_in_that_links_into_the_course_is_refused(fresh, target):
    """A link would make collect copy, as the staff, what it points to (the reference notebook)."""
    source_nb = COURSE / "source" / A / f"{A}.ipynb"
    now = sh("bob", "date -u '+%Y-%m-%d %H:%M:%S.%6N UTC'").stdout.strip()
    if target == "source":  # the whole hand-in folder is a link to the source assignment
        name = f"bob+{A}+{now}+link"
        forge("bob", name, link_to=source_nb.parent)
        entry = "."
    else:  # a hand-in folder whose notebook is a link to the source notebook
        name = f"bob+{A}+{now}+nblink"
        out = sh("bob", f'mkdir "{EXCHANGE}/inbound/{name}" && ln -s {source_nb} "{EXCHANGE}/inbound/{name}/{A}.ipynb"')
        assert out.returncode == 0, out.stderr
        entry = f"{A}.ipynb"
    log = collect()
    assert exchange.NOT_PLAIN.format(name=name, entry=entry) in log, log
    assert not (COURSE / "submitted" / "bob").exists()


def test_feedback_goes_to_its_own_student_only(fresh):
    """Bob fetches his feedback and never Alice's: her page's name hashes a secret he cannot read."""
    handin("alice")
    handin("bob")
    collect()
    for step in (f"nbgrader autograde {A} --force", f"nbgrader generate_feedback {A} --force",
                 f"nbgrader release_feedback {A}"):
        out = staff("ta", step)
        assert out.returncode == 0, out.stderr
    for student in ("alice", "bob"):
        out = sh(student, f"nbgrader fetch_feedback {A} && ls {A}/feedback/*/")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [f"{A}.html"], out.stdout
    out = sh("bob", f"nbgrader fetch_feedback {A} --student alice && ls {A}/feedback/*/ | wc -l")
    assert out.stdout.split()[-1] == "1", out  # still only his own page
    out = sh("bob", f"ls {EXCHANGE}/feedback")
    assert out.returncode != 0 and DENIED in out.stderr, out


# ------------------------------------------------------------------ students against the course


@pytest.mark.parametrize("path", [
    "solutions/attention.py", f"source/{A}/{A}.ipynb", "answer_keys", "gradebook.db", "submitted", "autograded",
    "feedback", "nbgrader_config.py", "tests"])
def test_alice_cannot_read_the_course(path):
    """The course is instructor:course-staff 2770: the reference, the hidden tests, the gradebook,
    everyone's hand-ins and feedback are the staff's alone."""
    out = sh("alice", f"ls {COURSE / path} || cat {COURSE / path}")
    assert out.returncode != 0 and DENIED in out.stderr, out


def test_alice_cannot_write_into_the_course():
    """Not a file of her own, not a line appended to the config that every staff command runs."""
    for script in (f"touch {COURSE}/x", f"echo 'import os' >> {COURSE}/nbgrader_config.py",
                   f"echo x > {COURSE}/gradebook.db"):
        out = sh("alice", script)
        assert out.returncode != 0 and DENIED in out.stderr, out


def test_a_students_python_cannot_import_the_reference():
    """The class's environment has no course in it: only tutor/ and contract/ (BASE/lib) are on the
    students' path, so `import solutions` fails in their kernels (and tutor works)."""
    out = sh("alice", "python -c 'import tutor.grading, contract' && python -c 'import solutions'")
    assert "No module named 'solutions'" in out.stderr, out


def test_alice_cannot_read_the_hub_state_or_the_passwords():
    for path in (BASE / "hub" / "cookie_secret", BASE / "hub" / "jupyterhub.sqlite", PASSWORDS):
        out = sh("alice", f"cat {path}")
        assert out.returncode != 0 and DENIED in out.stderr, out


def test_the_staff_share_the_course_and_nobody_else_can():
    """What the attacks above rely on, as modes: each home 0700, the course and its gradebook the
    group's (2770, 0660), the exchange root root's and sticky."""
    def mode(path):
        info = os.stat(path)
        return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid

    staff_gid = grp.getgrnam(GROUP).gr_gid
    for user in ("instructor", "ta", "alice", "bob", "carol"):
        assert mode(f"/home/{user}")[0] == 0o700
    assert mode(COURSE) == (0o2770, pwd.getpwnam("instructor").pw_uid, staff_gid)
    assert mode(COURSE / "gradebook.db")[0::2] == (0o660, staff_gid)
    assert mode(EXCHANGE.parent) == (0o1777, 0, 0)
    assert mode(PASSWORDS)[:2] == (0o600, 0)
    out = sh("ta", f"touch {COURSE}/ta-was-here && rm {COURSE}/ta-was-here")
    assert out.returncode == 0, out.stderr
