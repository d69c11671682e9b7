"""Learner-facing helpers for the course: plots, checks and grading entry points.

Importing this package is cheap and never imports the reference package ``solutions``. It takes
the integrity snapshot (``tutor.integrity``) that ``tutor.grading.grade`` verifies: the locked
setup cell of every notebook imports ``tutor`` before any learner code runs.
"""
from . import integrity as _integrity

_integrity.snapshot()
