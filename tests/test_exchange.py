"""The class's collect (grader/exchange.py) on hand-in folders made here, as whoever runs the tests: each
refusal's line, and the copy that follows no link. The same attacks as the real accounts of a class:
tests/test_class_attacks.py (root)."""
import datetime
import getpass
import logging
import os
import sys

import pytest
from nbgrader.coursedir import CourseDirectory

from grader import exchange

ME = getpass.getuser()
NOW = None  # naive UTC, as nbgrader's parse_utc gives: set when each test starts (below)


@pytest.fixture(autouse=True)
def _now(monkeypatch):
    """The time of this test's hand-ins is now, not when the module was imported: a pytest worker may
    run this file many minutes after collecting it, and a hand-in written that long after its
    timestamp is refused (exchange.WRITE_SLACK_S)."""
    monkeypatch.setattr(sys.modules[__name__], "NOW", datetime.datetime.now(datetime.UTC).replace(tzinfo=None))


def hand_in(tmp_path, name="h", notebook="{}"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "01_attention.ipynb").write_text(notebook)
    (folder / "timestamp.txt").write_text(str(NOW))
    return folder


def test_a_hand_in_of_its_own_student_made_now_is_accepted(tmp_path):
    assert exchange.refusal(str(hand_in(tmp_path)), ME, NOW, {ME}) is None


EXPECTED = {
    "not in the roster": exchange.NOT_IN_ROSTER.format(name="h", student="mallory"),
    "another's name": exchange.NOT_OWNER.format(name="h", owner=ME, student="alice"),
    "future": exchange.FUTURE.format(name="h"),
    "backdated": exchange.CHANGED.format(name="h"),
    "link": exchange.NOT_PLAIN.format(name="h", entry="link.ipynb"),
}


@pytest.mark.parametrize("case", EXPECTED)
def test_each_refusal_has_its_one_line(tmp_path, case):
    folder = hand_in(tmp_path)
    student, stamp, roster = ME, NOW, {ME, "alice"}
    if case == "not in the roster":
        student = "mallory"
    elif case == "another's name":
        student = "alice"
    elif case == "future":
        stamp = NOW + datetime.timedelta(days=1)
    elif case == "backdated":
        stamp = NOW - datetime.timedelta(seconds=exchange.WRITE_SLACK_S + 60)
    else:
        (folder / "link.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    line = exchange.refusal(str(folder), student, stamp, roster)
    assert line == EXPECTED[case]
    assert "\n" not in line and "不予收取 / " in line and line.endswith("not collected")  # 中文 / English


def test_a_folder_that_is_a_link_is_refused(tmp_path):
    target = hand_in(tmp_path)
    (tmp_path / "link").symlink_to(target)
    assert exchange.refusal(str(tmp_path / "link"), ME, NOW, {ME}) == exchange.NOT_PLAIN.format(name="link", entry=".")


@pytest.fixture
def collect(tmp_path, caplog):
    coursedir = CourseDirectory(root=str(tmp_path / "course"))
    collector = exchange.ClassCollect(coursedir=coursedir)
    collector.log = logging.getLogger("class-collect-test")
    caplog.set_level(logging.ERROR, "class-collect-test")
    return collector


def test_the_copy_keeps_links_as_links_and_refuses_them(tmp_path, collect, caplog):
    """A link put in after the check is neither followed nor kept: nothing of its target is copied."""
    src = hand_in(tmp_path, "src")
    secret = tmp_path / "secret.txt"
    secret.write_text("the reference")
    (src / "sneaky.txt").symlink_to(secret)
    collect.checked = {str(src): (ME, NOW, {ME})}
    collect.do_copy(str(src), str(tmp_path / "dest"))
    assert not (tmp_path / "dest").exists()
    assert exchange.NOT_PLAIN.format(name="src", entry="sneaky.txt") in caplog.text


def test_a_hand_in_changed_while_it_is_copied_is_refused(tmp_path, collect, caplog):
    """The check runs again after the copy: a hand-in edited meanwhile (its ctime) is not collected."""
    src = hand_in(tmp_path, "src")
    old = NOW - datetime.timedelta(seconds=exchange.WRITE_SLACK_S + 60)
    collect.checked = {str(src): (ME, old, {ME})}  # as if checked at `old`, then edited now
    collect.do_copy(str(src), str(tmp_path / "dest"))
    assert not (tmp_path / "dest").exists()
    assert exchange.CHANGED.format(name="src") in caplog.text


def test_an_accepted_hand_in_is_copied_for_the_staff(tmp_path, collect, caplog):
    src = hand_in(tmp_path, "src", notebook='{"cells": []}')
    collect.checked = {str(src): (ME, NOW, {ME})}
    collect.do_copy(str(src), str(tmp_path / "dest"))
    copied = tmp_path / "dest" / "01_attention.ipynb"
    assert copied.read_text() == '{"cells": []}' and not caplog.text
    assert os.stat(copied).st_mode & 0o777 == 0o660 and os.stat(tmp_path / "dest").st_mode & 0o7777 == 0o2770
