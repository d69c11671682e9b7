"""Learner-style implementations that prove the checks: ``wrong_*.py`` (each must fail its check
with the named diagnosis) and ``right_*.py`` (each must pass). Every module lists ``CASES``:
``(check name, object, expected diagnosis id)`` for wrong ones, ``(check name, object)`` for right ones."""
