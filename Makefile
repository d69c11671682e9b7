# Two commands for users (see README): `make lab` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup lab workspace reset test test-fast test-browser build lint site site-serve class-up class-down test-class

# torch: the CPU build by default on Linux, from PyTorch's own wheel index (plain PyPI gives
# Linux the CUDA build: about 20 nvidia-*/triton packages, several GB). `make setup TORCH=cuda`
# takes PyPI's default build instead (CUDA on Linux); TORCH_INDEX=<url> names another index
# (e.g. https://download.pytorch.org/whl/cu128). macOS gets PyPI's wheels (CPU/MPS) either way.
# Where the index cannot be reached, torch comes from the default index (pip.conf) and the
# set-up says so. To switch an existing environment: `rm -rf .venv`, then `make setup TORCH=...`.
TORCH ?= cpu
CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(if $(filter cpu,$(TORCH)),$(if $(filter Linux,$(shell uname -s)),$(CPU_INDEX)))

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@index="$(TORCH_INDEX)"; \
	if [ -n "$$index" ] && ! $(PY) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)' "$$index" 2>/dev/null; then \
	  echo "setup: $$index 无法访问，torch 改从默认索引安装 / unreachable: torch comes from the default package index (pip.conf; on Linux, plain PyPI gives the CUDA build)"; \
	  index=; \
	fi; \
	echo "setup: pip install -r requirements.txt -e . $${index:+(torch from $$index)}"; \
	$(PY) -m pip install --quiet --disable-pip-version-check $${index:+--extra-index-url $$index} -r requirements.txt -e .
	@# The course's own packages, compiled once: every grading kernel imports them, and an environment
	@# with PYTHONDONTWRITEBYTECODE set would otherwise compile them anew in each (about 0.1 s a notebook).
	$(PY) -m compileall -q contract solutions tutor grader
	touch $(STAMP)

setup: $(STAMP)

# Jupyter refuses to start as root (containers, cloud shells) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
PORT ?= 8888
LAB_ARGS ?=

# The course language: `make lab COURSE_LANG=en` opens the English edition (notebooks/en/, copied
# into workspace/en/; the Chinese workspace/ is left as it is). `make lab LANG=en` says the same when
# LANG is given on the command line; the LANG of the environment (a locale such as en_US.UTF-8) never
# chooses the course language, and a LANG given here is not passed on to Jupyter as a locale.
ifeq ($(origin LANG),command line)
COURSE_LANG ?= $(LANG)
unexport LANG
endif
COURSE_LANG ?= zh
CHECK_LANG := case "$(COURSE_LANG)" in zh|en) ;; *) echo "COURSE_LANG 只能是 zh 或 en / COURSE_LANG must be zh or en, got '$(COURSE_LANG)'"; exit 2;; esac
EDITION := $(if $(filter en,$(COURSE_LANG)),/en)
NOTEBOOK_DIR := notebooks$(EDITION)
WORKSPACE := workspace$(EDITION)

# The server is rooted at the repository (formgrader's links to source/ and release/ work) and
# opens the learner's workspace/. The venv's bin goes first on PATH for every process the server
# starts: kernels, and `alembic`, which nbgrader runs to create gradebook.db. JUPYTER_CONFIG_PATH
# adds the course's JupyterLab settings (jupyter/labconfig/page_config.json: no "Jupyter news" prompt).
# COURSE_LANG goes to the server too: nbgrader_config.py's class (Formgrader, the Assignment List) is
# the edition's (docs/INSTRUCTOR.md, "An English class").
# JupyterLab keeps the open tabs and the layout in a workspace on the server and restores them, each
# notebook with a kernel, when the page opens. Each edition has a workspace of its own, course-zh or
# course-en, kept with the learner's copies (workspace/.jupyterlab-workspaces/, git-ignored), and
# `make lab` opens it reset (`?reset`): no tab of the other edition or of an earlier session comes
# back, and no kernel starts until the learner opens a notebook. A reload keeps the current tabs.
LAB_WORKSPACES := $(abspath workspace/.jupyterlab-workspaces)
lab: $(STAMP) workspace
	COURSE_LANG=$(COURSE_LANG) PATH="$(abspath $(VENV))/bin:$$PATH" \
	  JUPYTER_CONFIG_PATH="$(abspath jupyter)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(VENV)/bin/jupyter lab --ServerApp.root_dir=. --LabApp.workspaces_dir="$(LAB_WORKSPACES)" \
	  --LabApp.default_url='/lab/workspaces/course-$(COURSE_LANG)/tree/$(WORKSPACE)?reset' \
	  --ServerApp.port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

# The learner's working copies (git-ignored): each self-study notebook is copied once; a file that
# is already there is never overwritten, so `git pull` + `make lab` only adds new chapters.
# The English edition has its own folder, workspace/en/.
workspace:
	@$(CHECK_LANG)
	@mkdir -p $(WORKSPACE)
	@for nb in $(NOTEBOOK_DIR)/*.ipynb; do \
	  name=$${nb##*/}; \
	  if [ ! -e "$(WORKSPACE)/$$name" ]; then cp "$$nb" "$(WORKSPACE)/$$name" && echo "$(WORKSPACE)/$$name: 新章节 / new chapter"; fi; \
	done

# Start one chapter afresh: `make reset CHAPTER=01_attention` (the old copy goes to workspace/backup/;
# with COURSE_LANG=en, the English copy, kept in workspace/en/backup/).
reset:
	@$(CHECK_LANG)
	@test -f "$(NOTEBOOK_DIR)/$(CHAPTER).ipynb" || { echo "用法 / usage: make reset CHAPTER=01_attention (one of: $(basename $(notdir $(wildcard $(NOTEBOOK_DIR)/*.ipynb))))"; exit 2; }
	@mkdir -p $(WORKSPACE)/backup
	@if [ -e "$(WORKSPACE)/$(CHAPTER).ipynb" ]; then \
	  backup="$(WORKSPACE)/backup/$(CHAPTER)-$$(date +%Y%m%d-%H%M%S).ipynb"; mv "$(WORKSPACE)/$(CHAPTER).ipynb" "$$backup"; \
	  echo "旧版本保存在 / old copy kept as $$backup"; \
	fi
	@cp "$(NOTEBOOK_DIR)/$(CHAPTER).ipynb" "$(WORKSPACE)/$(CHAPTER).ipynb" && echo "$(WORKSPACE)/$(CHAPTER).ipynb: 已重置 / reset"

# One worker per CPU; each test file stays on one worker (the nbgrader course and the simulated
# class are module-scoped fixtures). `.venv/bin/python -m pytest tests/x.py` runs serially.
# One torch/BLAS thread per worker (an exported OMP_NUM_THREADS wins): with a thread per core in
# every worker, torch spin-waits on the busy cores (make test-fast: 1 min 35 s -> 37 s here).
THREADS := OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1}

# Coverage of grader/ and tutor/ (pytest-cov, with the course's own Python subprocesses): the report
# lists the lines no test ran, and the run fails below the floor ([tool.coverage.report] fail_under);
# the 15 slowest tests are listed last (the suite should stay under 15 minutes on 2 cores). Files are handed to
# the workers in collection order (--no-loadscope-reorder: xdist would sort them by their number of tests), so
# the longest files, which tests/conftest.py collects first (LONGEST_FIRST), start at once.
test: $(STAMP)
	$(THREADS) $(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --cov --cov-report=term --durations=15

# The inner loop: everything but the tests marked slow (nbgrader end to end, the class
# simulation, notebook re-runs, builds in a temporary copy).
test-fast: $(STAMP)
	$(THREADS) $(PY) -m pytest -m "not slow" -n auto

# The course in a real browser (tests/browser/): `make lab` in a temporary copy, driven by
# Playwright (requirements-browser.txt) in Debian's chromium; screenshots in build/browser-screenshots/.
BROWSER_STAMP := $(VENV)/.browser-installed
SITE_STAMP := $(VENV)/.site-installed

$(BROWSER_STAMP): requirements-browser.txt $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-browser.txt
	touch $@

# The browser tests include the web edition's (tests/browser/test_site.py), which runs `make site`.
test-browser: $(BROWSER_STAMP) $(SITE_STAMP)
	$(PY) -m pytest tests/browser -m browser -v --durations=0

build: $(STAMP)
	$(PY) tools/build.py

# The web edition (docs/MAINTAINING.md, "The web edition"): build/site/zh/, build/site/en/ (once
# notebooks/en/ exists) from the self-study notebooks and the executed answer keys, with Sphinx +
# MyST-NB (requirements-site.txt; MathJax comes from a PyPI package: nothing is fetched at run time).
# Nothing is executed: run `make build` first when a lesson changed. Incremental: unchanged pages
# are not rendered again.
SITE_PORT ?= 8000

$(SITE_STAMP): requirements-site.txt $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-site.txt
	touch $@

site: $(SITE_STAMP)
	$(PY) -m tools.make_site

site-serve: site
	@echo "site: http://127.0.0.1:$(SITE_PORT)/ (Ctrl-C stops)"
	$(PY) -m http.server $(SITE_PORT) --bind 127.0.0.1 --directory build/site

# ruff's linter (pyproject.toml; lessons/ruff.toml for the lessons). `make test` runs it too
# (tests/test_lint.py). `$(PY) -m ruff check --fix .` fixes import order and the like.
lint: $(STAMP)
	$(PY) -m ruff check .

# A class on this machine (Linux, as root; docs/INSTRUCTOR.md §6): accounts, the course private to
# its staff, a hardened nbgrader exchange and a JupyterHub on CLASS_PORT (default 8765).
class-up:
	python3 tools/class_up.py up

class-down:
	python3 tools/class_up.py down

# The class's attack tests and its browser cycle (tests/test_class_attacks.py, tests/browser/test_class_cycle.py),
# as root on Linux: they reuse a class that is up, or make one (make class-up) and remove it afterwards.
test-class: $(BROWSER_STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest tests/test_class_attacks.py tests/browser/test_class_cycle.py -m classroom -v --durations=0
