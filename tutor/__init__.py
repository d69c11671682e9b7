"""Learner-facing helpers for the course: plots, checks and grading entry points.

Importing this package is cheap and never imports the reference package ``solutions``. It takes
the integrity snapshot (``tutor.integrity``) that ``tutor.grading.grade`` verifies: the locked
setup cell of every notebook imports ``tutor`` before any learner code runs.

``tutor.progress()`` shows the learner's own record (``tutor.store``): which graded cells pass in each
chapter, the drills, and the mistakes their checks named over time.
"""
from . import integrity as _integrity

_integrity.snapshot()


def progress():
    """Print which graded cells pass in each chapter, the drills passed and the mistakes your checks
    named over time (kept in ``progress.json`` in your workspace, nowhere else)."""
    from .store import progress as show

    show()
