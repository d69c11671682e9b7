"""Shared pytest fixtures: float64 default dtype, and a record of the largest differences
between the reference package and PyTorch's own modules (printed in the terminal summary); the class
tests (`classroom`) left out unless asked for."""
from pathlib import Path

import pytest
import torch

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
    """The class tests (marker ``classroom``: accounts and a JupyterHub made by `make class-up` as root)
    run only when asked for: `-m classroom` (make test-class) or their file named on the command line.
    `make test` and `make test-fast` leave them out: they change the machine's accounts."""
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    if "classroom" in config.getoption("markexpr"):
        return
    left_out = [item for item in items if "classroom" in item.keywords and item.path not in named]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


@pytest.fixture(scope="session")
def klass():
    """The class of `make class-up` (tests/classroom.py): its hub's URL; shared by the attack tests and
    the browser cycle, so one class serves both."""
    from classroom import class_up

    yield from class_up()
