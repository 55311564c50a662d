# Two commands matter: `make demo` (the main job on the embedded default recipe) and
# `make test` (everything CI runs). Both build .venv from nothing but Python.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU build of torch: an unpinned torch would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0
PIP    := $(BIN)/pip install --quiet --disable-pip-version-check

.PHONY: demo test test-fast lint bench clean skypilot

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

# SkyPilot, the judge of `launch --skypilot`'s task files, in a venv of its own: it pins
# click<8.2, which huggingface_hub (>=8.4.2) and wandb refuse, so it cannot share .venv.
# The tests call its interpreter in a subprocess (tests/launch/skypilot_judge.py).
SKYPILOT     := skypilot==0.14.1
SKY_VENV     := .venv-skypilot
$(SKY_VENV)/.installed:
	$(PYTHON) -m venv $(SKY_VENV)
	$(SKY_VENV)/bin/pip install --quiet --disable-pip-version-check $(SKYPILOT)
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

clean:
	rm -rf $(VENV) $(SKY_VENV) out runs .pytest_cache .mypy_cache .ruff_cache .hypothesis
