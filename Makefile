# Two commands set everything up: `make demo` and `make test`.
# PYTHON may be given explicitly; otherwise find a Python 3.12 (a plain binary, or via pyenv).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTHON ?= $(shell bash .ci/find_python312)
# The extras `make venv` installs (pyproject.toml); CI adds `rl` (stable-baselines3, docs/rl.md).
EXTRAS ?= dev

.PHONY: venv view docs test demo dashboard lint format clean wheel

# The stamp names the extras, so that asking for other extras installs them.
$(VENV)/.installed-$(EXTRAS): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: no Python 3.12 found; install it or run 'make PYTHON=/path/to/python3.12'" >&2; exit 2; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip >/dev/null
	$(PY) -m pip install -e ".[$(EXTRAS)]"
	touch $@

venv: $(VENV)/.installed-$(EXTRAS) view

# The static view of the package for mypy, import-linter and pyright (tools/static_view.py).
view:
	@$(PYTHON) tools/static_view.py

# mypy and import-linter read the whole package as installed through the static view.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=.typecheck $(VENV)/bin/lint-imports

# The docs site (mkdocs.yml: the pages of docs/ and an API reference from the docstrings).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# `make test` runs the fast suite on every core (pytest-xdist, one test file per worker at a
# time); `make test TESTS=all` adds the slow tests to it, then runs the browser tests one by one
# (CI). Every test also passes alone and in any order: `.venv/bin/python -m pytest` runs serially.
XDIST := -n auto --dist loadfile
test: lint docs
	$(PY) -m pytest $(XDIST) $(if $(filter all,$(TESTS)),-m "not browser",)
	$(if $(filter all,$(TESTS)),$(PY) -m pytest -m browser,@true)

demo: venv
	$(VENV)/bin/mdpsim demo

dashboard: venv
	$(VENV)/bin/mdpsim dashboard

# The wheel (dist/mdpsim-*.whl), built afresh (a stale build/ could keep deleted modules).
wheel: venv
	rm -rf build dist
	$(PY) -m pip wheel --no-deps --no-build-isolation -q -w dist .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) build dist site .pytest_cache .ruff_cache .mypy_cache .typecheck .grimp_cache .import_linter_cache
