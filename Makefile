# Two commands for users (see README): `make lab` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup lab test build

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -e .
	touch $(STAMP)

setup: $(STAMP)

# Jupyter refuses to start as root (containers, cloud shells) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/ $(ROOT_FLAG)

# One worker per CPU; each test file stays on one worker (the nbgrader course and the simulated
# class are module-scoped fixtures). `.venv/bin/python -m pytest tests/x.py` runs serially.
test: $(STAMP)
	$(PY) -m pytest -n auto --dist loadfile

build: $(STAMP)
	$(PY) tools/build.py
