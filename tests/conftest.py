"""Shared pytest fixtures: float64 default dtype, and a record of the largest differences
between the reference package and PyTorch's own modules (printed in the terminal summary)."""
import pytest
import torch

_MAX_DIFFS = {}


def _record(name, actual, expected):
    """Return max |actual - expected| and keep the largest value seen per ``name``."""
    diff = (actual.detach() - expected.detach()).abs().max().item() if actual.numel() else 0.0
    _MAX_DIFFS[name] = max(diff, _MAX_DIFFS.get(name, 0.0))
    return diff


@pytest.fixture
def float64():
    """Build tensors and modules in float64 (sinusoidal tables included), restore afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def max_diff():
    """``max_diff(name, actual, expected, tol=1e-12)``: assert the tensors agree, record the gap."""

    def check(name, actual, expected, tol=1e-12):
        assert actual.shape == expected.shape, f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        diff = _record(name, actual, expected)
        assert diff <= tol, f"{name}: max |diff| = {diff:.3e} > {tol:.0e}"
        return diff

    return check


def pytest_terminal_summary(terminalreporter):
    if _MAX_DIFFS:
        terminalreporter.section("largest float64 difference, reference vs PyTorch")
        for name, diff in sorted(_MAX_DIFFS.items()):
            terminalreporter.write_line(f"{name:<45s} {diff:.3e}")
