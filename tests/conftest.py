"""Shared pytest fixtures: float64 default dtype, and a record of the largest differences
between the reference package and PyTorch's own modules (printed in the terminal summary).

Three rules for the whole suite:
- **A time limit per test** (pytest-timeout), sized by marker: ``TIMEOUTS``. A test that hangs fails
  with its stack instead of stalling the suite; a test may set its own ``@pytest.mark.timeout``.
- **``COURSE_REQUIRE_ALL=1``** (set by ``.ci/run``): a test skipped because a component is missing
  (PostgreSQL, Dask, a browser, root) fails instead, so CI cannot stay green without running it.
- **The class tests** (``classroom``: accounts and a JupyterHub) are left out unless asked for.
- **The longest files first** (``LONGEST_FIRST``): `make test` hands each file whole to one of two workers, in
  collection order (pytest-xdist ``--dist loadfile --no-loadscope-reorder``); a ten-minute file handed out last
  would run alone at the end.
- **The Chinese edition by default**: a ``COURSE_LANG`` exported in the shell (an English class's instructor's,
  docs/INSTRUCTOR.md) is dropped, so every test starts from the Chinese class and sets the English one itself.
"""
import os
import re
from pathlib import Path

import pytest
import torch

TIMEOUTS = {"classroom": 1800, "slow": 1500, None: 300}  # seconds: a slow test's module fixture grades a
# whole class; the first class test waits for `make class-up`
# The files that take longest under `make test` (its --durations list), longest first; the rest follow in name order.
LONGEST_FIRST = ("test_nbval_gpt.py", "test_feedback.py", "test_class_simulation.py", "test_nbval.py",
                 "test_nbgrader_e2e.py", "test_idiom_grading.py", "test_insight.py", "test_cluster.py")
MISSING = re.compile(r"not installed|could not|cannot be installed|needs root|not Linux|not root|no Chromium"
                     r"|no (CJK )?font", re.I)

os.environ.pop("COURSE_LANG", None)

_MAX_DIFFS = {}


def _keep(name, diff):
    _MAX_DIFFS[name] = max(diff, _MAX_DIFFS.get(name, 0.0))


@pytest.fixture
def float64():
    """Build tensors and modules in float64 (sinusoidal tables included), restore afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def max_diff(request):
    """``max_diff(name, actual, expected, tol=1e-12)``: assert the tensors agree, record the gap.

    The gap travels in the test report (``user_properties``), so that the summary also works
    when pytest-xdist runs the tests in worker processes."""

    def check(name, actual, expected, tol=1e-12):
        assert actual.shape == expected.shape, f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        diff = (actual.detach() - expected.detach()).abs().max().item() if actual.numel() else 0.0
        request.node.user_properties.append(("max_diff", (name, diff)))
        assert diff <= tol, f"{name}: max |diff| = {diff:.3e} > {tol:.0e}"
        return diff

    return check


def pytest_runtest_logreport(report):
    if report.when == "call":
        for key, value in report.user_properties:
            if key == "max_diff":
                _keep(*value)


def pytest_terminal_summary(terminalreporter):
    if _MAX_DIFFS:
        terminalreporter.section("largest float64 difference, reference vs PyTorch")
        for name, diff in sorted(_MAX_DIFFS.items()):
            terminalreporter.write_line(f"{name:<45s} {diff:.3e}")


def pytest_collection_modifyitems(config, items):
    """Each test gets its time limit; the files of ``LONGEST_FIRST`` go first. The class tests (marker
    ``classroom``: accounts and a JupyterHub made by `make class-up` as root) run only when asked for:
    `-m classroom` (make test-class) or their file named on the command line. `make test` and `make test-fast`
    leave them out: they change the machine's accounts."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its own order
    for item in items:
        if item.get_closest_marker("timeout") is None:
            size = next((m for m in ("classroom", "slow") if item.get_closest_marker(m)), None)
            item.add_marker(pytest.mark.timeout(TIMEOUTS[size]))
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    if "classroom" in config.getoption("markexpr"):
        return
    left_out = [item for item in items if "classroom" in item.keywords and item.path not in named]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def _required(report):
    """Turn a skip for a missing component into a failure under COURSE_REQUIRE_ALL=1."""
    if os.environ.get("COURSE_REQUIRE_ALL") != "1" or not report.skipped:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if MISSING.search(reason):
        report.outcome = "failed"
        report.longrepr = f"COURSE_REQUIRE_ALL=1, but skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _required(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _required(outcome.get_result())


@pytest.fixture(scope="session")
def klass():
    """The class of `make class-up` (tests/classroom.py): its hub's URL; shared by the attack tests and
    the browser cycle, so one class serves both."""
    from classroom import class_up

    yield from class_up()
