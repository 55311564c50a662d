# Two commands matter: `make demo` (the main job on the embedded default recipe) and
# `make test` (everything CI runs). Both build .venv from nothing but Python, from the
# lock files in requirements/: every package at one exact version, engines included, so
# a fresh clone installs today what it installed yesterday. `make lock` re-resolves them
# (scripts/lock.py); `make drift` reports what the engines' newest releases change.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# uv installs a lock about three times faster than pip (parallel downloads and unpacking).
# It reads no pip.conf, so pip's configured wheel folder (where a machine keeps its CPU
# build of torch) is passed on. A lock is complete: --no-deps skips the resolver, and
# `uv pip check` proves the set consistent.
UV_VERSION := 0.13.9
UV         := $(BIN)/uv
FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
LOCKED      = $(UV) pip install --quiet --no-deps $(if $(FIND_LINKS),--find-links $(FIND_LINKS)) --python

.PHONY: demo test test-fast lint bench clean skypilot lock drift bands

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(UV): | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# One stamp per install set, redone when its lock or pyproject.toml changes. The demo
# needs only DeepSpeed; the tests also install every engine they use as an oracle.
$(VENV)/.demo-installed: requirements/demo.txt pyproject.toml | $(UV)
	$(LOCKED) $(BIN)/python -r requirements/demo.txt
	$(LOCKED) $(BIN)/python -e .
	$(UV) pip check --quiet --python $(BIN)/python
	touch $@

$(VENV)/.test-installed: requirements/test.txt pyproject.toml | $(UV)
	$(LOCKED) $(BIN)/python -r requirements/test.txt
	$(LOCKED) $(BIN)/python -e .
	$(UV) pip check --quiet --python $(BIN)/python
	touch $@

# SkyPilot, the judge of `launch --skypilot`'s task files, in a venv of its own: it pins
# click<8.2, which huggingface_hub (>=8.4.2) and wandb refuse, so it cannot share .venv.
# The tests call its interpreter in a subprocess (tests/launch/skypilot_judge.py).
SKY_VENV     := .venv-skypilot
$(SKY_VENV)/.installed: requirements/skypilot.txt | $(UV)
	$(PYTHON) -m venv $(SKY_VENV)
	$(LOCKED) $(SKY_VENV)/bin/python -r requirements/skypilot.txt
	touch $@

skypilot: $(SKY_VENV)/.installed

# The main job on the embedded default: a ~100k-parameter model trained for real on
# 2 CPU ranks through DeepSpeed ZeRO-2, one JSON line of loss per optimizer step.
demo: $(VENV)/.demo-installed
	$(BIN)/distrecipe launch recipes/tiny-cpu.yaml

lint: $(VENV)/.test-installed
	$(BIN)/ruff check distrecipe tests benchmarks scripts
	$(BIN)/mypy

# Two workers, one per core: the SLURM and Ray cluster tests keep to one (tests/conftest.py CLUSTERS).
test: lint $(SKY_VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=10

test-fast: $(VENV)/.test-installed $(SKY_VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not slow"

bench: $(VENV)/.test-installed
	$(BIN)/python benchmarks/cli_speed.py

# The memory error bands `plan`'s fits/tight/does-not-fit verdict reads, from the published
# corpus (distrecipe/plan/bands.json, and its table in docs/plan.md): rerun after a planner
# change or new corpus rows.
bands: $(VENV)/.test-installed
	$(BIN)/python scripts/plan_bands.py

# Re-resolve requirements/*.txt from pyproject.toml's ranges (then: the tables of any
# engine release that moved, scripts/engine_tables.py, and `make drift`'s review).
lock:
	$(PYTHON) scripts/lock.py

# Not part of `make test`: installs each engine's newest release in scratch, writes its
# table there, re-judges the corpus with it and prints what changed.
drift: $(VENV)/.test-installed
	$(BIN)/python scripts/drift.py

clean:
	rm -rf $(VENV) $(SKY_VENV) out runs .pytest_cache .mypy_cache .ruff_cache .hypothesis
