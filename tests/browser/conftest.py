"""Fixtures for the browser tests: JupyterLab started by `make lab` in a throw-away copy of the
course, driven by Playwright in Debian's Chromium (never a downloaded browser).

The server is the README's `make lab`, unchanged: the port is the recipe's PORT variable; the
token and a private Jupyter configuration come through environment variables that Jupyter reads
(JUPYTER_TOKEN, JUPYTER_CONFIG_DIR), so the test cannot drift from the recipe. It runs in a copy
of the working tree, so generating assignments, the gradebook and the learner workspace never
touch the repository. Screenshots land in build/browser-screenshots/ (git-ignored).
"""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)  # the environment running pytest: `make test-browser` uses .venv
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SHOTS = REPO / "build" / "browser-screenshots"
BROWSER_PACKAGES = "chromium fonts-noto-cjk fonts-noto-color-emoji"
# As the probe of this machine found: without the background-networking flags Chromium keeps
# trying to reach Google's hosts; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 120


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: the course in a real browser (make test-browser; "
                                       "left out of make test and make test-fast)")


def pytest_collection_modifyitems(config, items):
    """Browser tests run only when asked for: `-m browser` (make test-browser) or a path inside
    tests/browser/ on the command line. `make test` and `make test-fast` leave them out."""
    here = Path(__file__).parent
    asked = "browser" in config.getoption("markexpr") or any(
        Path(arg.split("::")[0]).resolve().is_relative_to(here) for arg in config.args)
    if not asked:
        left_out = [item for item in items if "browser" in item.keywords]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if "browser" not in item.keywords]


# ------------------------------------------------------------------ the browser


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium under Playwright; skips with the install command when either is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install {BROWSER_PACKAGES}` "
                    "(or set CHROMIUM=/path/to/chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright is not installed: `.venv/bin/pip install -r requirements-browser.txt` "
               "(make test-browser does it)")
    driver = sync_api.sync_playwright().start()
    chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()
    driver.stop()


@pytest.fixture(scope="session")
def expect(browser):
    """Playwright's auto-waiting assertions (imported only where Playwright is installed)."""
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=60_000)  # formgrader's first page creates the gradebook
    return playwright_expect


@pytest.fixture(scope="session")
def shots():
    """``shot(page_or_locator, name)`` saves build/browser-screenshots/<name>.png and returns the path."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()

    def shot(target, name):
        path = SHOTS / f"{name}.png"
        target.screenshot(path=str(path))
        return path

    shot.dir = SHOTS
    return shot


@pytest.fixture
def page(browser, lab):
    """A fresh tab on a HiDPI screen (device scale 2, so blurry figures show), logged in with the token."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=2,
                                  locale="zh-CN")
    context.set_default_timeout(60_000)
    tab = context.new_page()
    yield tab
    context.close()


# ------------------------------------------------------------------ the course and its server


def working_tree_copy(dest):
    """Tracked and untracked-but-not-ignored files of the working tree, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)  # keeps mtimes: make sees the venv as up to date


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_env(home, token):
    """The environment of a learner's shell: no venv on PATH, no MPLBACKEND (CI sets Agg), and a
    private Jupyter/IPython configuration (no personal settings). No setting hides the "Jupyter news"
    prompt here: `make lab` itself turns it off (jupyter/labconfig/page_config.json), as for a learner."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLBACKEND", "NBGRADER_EXECUTION", "VIRTUAL_ENV", "PYTHONPATH")
           and not k.startswith(("JUPYTER", "JPY_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not Path(p).resolve().is_relative_to(VENV.resolve()))
    env.update(JUPYTER_PORT_RETRIES="0", JUPYTER_TOKEN=token,
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               BROWSER="true")  # `make lab` opens a browser; here the test is the browser
    return env


class Lab:
    """A running `make lab`: its URL, its course directory and its log."""

    def __init__(self, course, port, token, log_path, proc):
        self.course, self.port, self.token, self.log_path, self.proc = course, port, token, log_path, proc
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path="lab", reset=True):
        """URL of ``path`` with the token; ``reset`` starts from an empty JupyterLab layout."""
        return f"{self.base}/{path}?{'reset&' if reset else ''}token={self.token}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def root(self):
        """The directory the server serves, as it says in its log."""
        for line in self.log().splitlines():
            if "Serving notebooks from local directory:" in line:
                return Path(line.split("directory:", 1)[1].strip())
        raise AssertionError("the server never said which directory it serves:\n" + self.log()[-3000:])

    def learner_notebook(self, name):
        """Path (relative to the server root) of ``name`` in the learner workspace `make lab` made:
        the one copy of it that git ignores (notebooks/, source/, release/, answer keys are tracked)."""
        copies = [p.relative_to(self.course) for p in self.course.rglob(name)
                  if ".ipynb_checkpoints" not in p.parts]
        ignored = [p for p in copies
                   if subprocess.run(["git", "check-ignore", "-q", str(p)], cwd=REPO).returncode == 0]
        assert len(ignored) == 1, (
            f"`make lab` should create one learner workspace copy of {name} (git-ignored); "
            f"found copies {[str(p) for p in copies]}, of which ignored: {[str(p) for p in ignored]}")
        return (self.course / ignored[0]).relative_to(self.root()).as_posix()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """`make lab` in a copy of the working tree, on a free port with a random token."""
    work = tmp_path_factory.mktemp("lab")
    working_tree_copy(work / "course")
    with make_lab(work) as server:
        yield server


@contextlib.contextmanager
def make_lab(work, *make_args):
    """`make lab [make_args]` in ``work``/course (a copy of the working tree), on a free port with a random token,
    with the private Jupyter configuration ``work`` holds (a second server in the same ``work`` finds what the
    first left there, as a learner's second `make lab` does); yields its ``Lab`` and stops it afterwards."""
    course = work / "course"
    port, token = _free_port(), os.urandom(16).hex()
    log_path = work / f"server-{port}.log"
    # -o: the venv is the one running these tests; never reinstall it from here.
    cmd = ["make", "-o", f"{VENV}/.installed", "lab", f"VENV={VENV}", f"PORT={port}", *make_args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=course, env=_server_env(work, token), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(course, port, token, log_path, proc)
    try:
        _wait_until_serving(server)
        yield server
    finally:
        _stop(proc)


def _wait_until_serving(server):
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"`make lab` exited with {server.proc.returncode}:\n{server.log()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{server.base}/api/status?token={server.token}", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"`make lab` did not serve on port {server.port} within {SERVER_START_S} s:\n"
                         f"{server.log()[-3000:]}")


def _stop(proc):
    """Stop `make lab` and everything it started (its own process group), gently first."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
