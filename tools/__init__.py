"""Maintainer tools: the build (``build.py``) and the class simulation (``simulate_class.py``)."""
