"""Learner-facing helpers for the course: plots, checks and grading entry points.

Importing this package is cheap and never imports the reference package ``solutions``.
"""
