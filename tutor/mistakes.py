"""The known mistakes the checks name: ``MISTAKES[id] = (中文, English)`` and ``explain(id)``.

Each mistake is declared once, in the topic module of ``tutor.checks`` whose wrong implementation
makes it (``define_mistakes``), beside that implementation; this module only gathers them.
"""
from . import checks  # noqa: F401  (importing the topics declares their mistakes)
from .engine.messages import MISTAKES, explain

__all__ = ["MISTAKES", "explain"]
