"""Grader-side code: runs inside the ``nbgrader`` process (``nbgrader_config.py`` installs it), never
in a learner's kernel. ``hardening`` survives broken and hostile submissions; ``feedback`` makes
the feedback pages read offline. Learner-side helpers live in ``tutor``."""
