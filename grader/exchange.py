"""nbgrader's filesystem exchange, hardened for a class whose students share one machine.

nbgrader's own collect trusts the name of a hand-in folder, ``<student>+<assignment>+<timestamp>+<random>``:
any student can write one for someone else (``nbgrader submit --student alice``), date it in the future
so that it beats every later genuine hand-in, or invent a student who then lands in the gradebook. It
only warns when the folder's owner is not the student it names, and it follows symbolic links inside a
hand-in, so a link to the course's ``source/`` would be copied into ``submitted/`` as the instructor.

``ClassCollect`` decides who handed in from the file system, never from the name: a hand-in is
collected only when every file and folder in it is owned by the account of the student its name gives,
that student is in the gradebook's roster, nothing in it is a link or a special file, and its timestamp
is neither in the future nor earlier than the kernel's record of when its files were written (a
backdated folder, or a hand-in edited after it was made). Every refused hand-in gets one line, and the
student's latest accepted hand-in is collected instead. ``ClassReleaseFeedback`` makes each released
feedback page readable by its student: the page's name is a hash of a secret only that student's
(private) home and the course hold, in a folder nobody but the staff can list.

``ClassSubmit`` is the students' side (their nbgrader settings name it; ``tools/class_up.py`` copies this
module where their servers import it): nbgrader leaves a hand-in folder 0777 and its files 0644, so any
other student who learns its name can delete, replace or read what is in it; the class's hand-in folder is
0750, group course-staff (inbound/ is set-group-id). It also refuses ``--student`` with any name
but the login's, though only collect's check is a defence: a student may run nbgrader's own submit.

``configure(c, exchange_root)`` installs the staff's side; the course's ``nbgrader_config.py`` calls it
when ``tools/class_up.py`` set up a class.
"""
import datetime
import glob
import os
import pwd
import shutil
import stat

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import get_username, ignore_patterns, parse_utc

# Seconds a hand-in may take to be written after its timestamp (copying the notebooks, setting modes).
WRITE_SLACK_S = 120

NOT_OWNER = "{name}: 文件属于 {owner}，不是 {student}，不予收取 / owned by {owner}, not {student}: not collected"
NOT_IN_ROSTER = "{name}: {student} 不在花名册中，不予收取 / {student} is not in the roster: not collected"
FUTURE = "{name}: 时间戳在未来，不予收取 / its timestamp is in the future: not collected"
CHANGED = ("{name}: 文件在时间戳之后被改动（时间戳造假或交后修改），不予收取 / "
           "written after its timestamp (backdated, or edited after hand-in): not collected")
NOT_YOURS = ("只能以自己的身份提交：你是 {login}，不是 {student} / "
             "you can hand in as yourself only: you are {login}, not {student}")
BAD_NAME = "{name}: 时间戳无法识别，不予收取 / unreadable timestamp: not collected"
NOT_PLAIN = ("{name}: 含有链接或特殊文件 {entry}，不予收取 / "
             "holds a link or special file {entry}: not collected")


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def refusal(path, student, timestamp, roster):
    """The line refusing hand-in folder ``path`` of ``student`` made at ``timestamp`` (naive UTC, as
    nbgrader's ``parse_utc`` gives it), or None when it may be collected. Every entry is looked at
    with ``lstat``: links are never followed."""
    name = os.path.basename(path)
    if student not in roster:
        return NOT_IN_ROSTER.format(name=name, student=student)
    utc = timestamp.replace(tzinfo=datetime.UTC)
    if utc > datetime.datetime.now(datetime.UTC):
        return FUTURE.format(name=name)
    latest = 0.0
    for folder, dirs, files in os.walk(path):
        for entry in [folder] + [os.path.join(folder, f) for f in dirs + files]:
            info = os.lstat(entry)
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                return NOT_PLAIN.format(name=name, entry=os.path.relpath(entry, path))
            if _owner(info.st_uid) != student:
                return NOT_OWNER.format(name=name, owner=_owner(info.st_uid), student=student)
            latest = max(latest, info.st_ctime)  # the kernel sets ctime; no user can set it back
    if latest > utc.timestamp() + WRITE_SLACK_S:
        return CHANGED.format(name=name)
    return None


class ClassCollect(ExchangeCollect):
    """Collects, for each student, the latest hand-in that ``refusal`` accepts (see the module)."""

    def init_src(self):
        if not self.coursedir.course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        self.inbound_path = os.path.join(self.root, self.coursedir.course_id, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            roster = {s.id for s in gb.students}
            try:
                duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                duedate = None
        student_id = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student_id}+{self.coursedir.assignment_id}+*")
        accepted = []
        self.checked = {}  # hand-in folder -> what refusal() was given, to check again after the copy
        for path in sorted(glob.glob(pattern)):
            student, _, stamp = os.path.basename(path).rsplit("+", 3)[:3]
            try:
                timestamp = parse_utc(stamp)
            except (ValueError, OverflowError):
                self.log.error(BAD_NAME.format(name=os.path.basename(path)))
                continue
            line = refusal(path, student, timestamp, roster)
            if line:
                self.log.error(line)
            else:
                accepted.append({"username": student, "filename": os.path.basename(path), "timestamp": timestamp})
                self.checked[path] = (student, timestamp, roster)
        self.src_records = []
        for records in groupby(accepted, lambda r: r["username"]).values():
            records = self._sort_by_timestamp(records)
            if duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= duedate] or records
            self.src_records.append(records[0])

    def do_copy(self, src, dest, log=None):
        """Copies through a descriptor opened without following links, and keeps links as links, so a
        folder swapped for a link after the check copies nothing from elsewhere; a copy that holds a
        link after all, or whose hand-in changed while it was copied, is removed and refused."""
        if self.get_size(src) > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"Directory size is too big: {src}")
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            shutil.copytree(f"/proc/self/fd/{fd}", dest, symlinks=True,
                            ignore=ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                                   max_file_size=self.coursedir.max_file_size, log=self.log))
        finally:
            os.close(fd)
        links = [os.path.join(folder, e) for folder, dirs, files in os.walk(dest) for e in dirs + files
                 if os.path.islink(os.path.join(folder, e))]
        line = (NOT_PLAIN.format(name=os.path.basename(src), entry=os.path.relpath(links[0], dest)) if links
                else refusal(src, *self.checked[src]))  # changed while it was being copied
        if line:  # the other students are collected as usual
            shutil.rmtree(dest)
            self.log.error(line)
            return
        for folder, _, files in os.walk(dest):  # the course staff share the copy (group, no others)
            os.chmod(folder, 0o2770)
            for f in files:
                os.chmod(os.path.join(folder, f), 0o660)


class ClassSubmit(ExchangeSubmit):
    """A hand-in only its student and the staff can open (see the module)."""

    def init_dest(self):
        if self.coursedir.student_id not in ("*", get_username()):
            self.fail(NOT_YOURS.format(student=self.coursedir.student_id, login=get_username()))
        super().init_dest()

    def copy_files(self):
        super().copy_files()
        # Its folders keep inbound's group, course-staff (set at creation, before copying the mode of the
        # student's own folder cleared set-group-id); later files are the student's group, so they stay
        # 0644 inside folders that only the student and the staff may enter.
        self.set_perms(os.path.join(self.inbound_path, self.assignment_filename), fileperms=0o644, dirperms=0o750)


class ClassReleaseFeedback(ExchangeReleaseFeedback):
    """Released feedback pages readable by their student (0644): the folder is listable by nobody but
    the staff, and only the student and the course know the secret the page's name is a hash of."""

    def copy_files(self):
        super().copy_files()
        for page in glob.glob(os.path.join(self.dest_path, "*.html")):
            os.chmod(page, 0o644)


def configure(c, exchange_root):
    """The class's exchange: its root, the hardened collect and feedback release, and folders the
    instructor and the TA share (nbgrader's ``groupshared``: group-writable, set-group-id)."""
    c.Exchange.root = str(exchange_root)
    c.CourseDirectory.groupshared = True
    c.ExchangeFactory.collect = "grader.exchange.ClassCollect"
    c.ExchangeFactory.release_feedback = "grader.exchange.ClassReleaseFeedback"

