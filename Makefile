# Two commands matter: `make demo` (the main job on the embedded default recipe) and
# `make test` (everything CI runs). Both build .venv from nothing but Python.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU build of torch: an unpinned torch would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0
PIP    := $(BIN)/pip install --quiet --disable-pip-version-check

.PHONY: demo test test-fast lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# One stamp per install set, redone when pyproject.toml changes. The demo needs only
# DeepSpeed; the tests also install every engine they use as an oracle.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH) -e '.[deepspeed]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH) -e '.[test,dev]'
	touch $@

# The main job on the embedded default: a ~100k-parameter model trained for real on
# 2 CPU ranks through DeepSpeed ZeRO-2, one JSON line of loss per optimizer step.
demo: $(VENV)/.demo-installed
	$(BIN)/distrecipe launch recipes/tiny-cpu.yaml

lint: $(VENV)/.test-installed
	$(BIN)/ruff check distrecipe tests benchmarks scripts
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q --durations=10

test-fast: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(VENV)/.test-installed
	$(BIN)/python benchmarks/cli_speed.py

clean:
	rm -rf $(VENV) out runs .pytest_cache .mypy_cache .ruff_cache .hypothesis
