"""The measured search: launch each of `plan --search`'s fastest for a few steps, rank by what ran.

Each trial is a real `distrecipe launch` (a child process, through the recipe's own
launcher, with its run directory and `measured.json`), running the reference trainer on
the recipe's model shape with random weights and synthetic tokens (`tiny_train --model
recipe`). The search's candidates all keep the recipe's global batch (only micro-batch and
accumulation trade places), and each trial's resolved plan is read back to show it.
Trials run one after another, so they never compete for the devices. A trial that
crashes, runs out of memory or times out is recorded with its reason and ranked after
every measured one, in the search's order; the search goes on. Unlike DeepSpeed's
autotuner, the global batch never moves and the time is the whole optimizer step the
program saw, not one engine's share of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrecipe.launch.measure import MEASURED_FILE
from distrecipe.launch.spec import TINY_TRAINER
from distrecipe.output import to_json, write_files

TRIAL_TIMEOUT = 600.0
"""Seconds one trial may run before `launch --timeout` stops it (recorded as timed out)."""
REASON = re.compile(r"(error|Error|tiny_train:|out of memory)")


@dataclass(frozen=True, slots=True)
class TrialSpec:
    """One candidate to measure: what `plan --search` called it and the keys it sets."""

    label: str
    overrides: Mapping[str, object]
    predicted_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Trial:
    spec: TrialSpec
    run_dir: Path
    exit_code: int
    outcome: str
    """`measured`, `crashed (exit N): why`, `out of memory` or `timed out`."""
    global_batch: int | None
    step_seconds: float | None = None
    peak_bytes: float | None = None
    statistic: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return self.outcome == "measured"


def trial_argv(recipe: str, overrides: Sequence[str], spec: TrialSpec, run_dir: Path, steps: int,
               timeout: float) -> list[str]:
    """The `distrecipe launch` of one trial: the recipe, the candidate's keys, the trainer."""
    sets = [*overrides, *(f"{key}={json.dumps(value)}" for key, value in spec.overrides.items())]
    return [sys.executable, "-m", "distrecipe", "launch", recipe, *(w for s in sets for w in ("--set", s)),
            "--run-dir", str(run_dir), "--timeout", str(timeout),
            "--", "-m", TINY_TRAINER, "--model", "recipe", "--steps", str(steps)]


def _reason(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if REASON.search(line)]
    return lines[-1][:300] if lines else "no error line in its log"


def run_trial(recipe: str, overrides: Sequence[str], spec: TrialSpec, run_dir: Path, *, steps: int,
              timeout: float = TRIAL_TIMEOUT) -> Trial:
    """Launch one trial to its end and read what it recorded."""
    log_path = run_dir.with_name(run_dir.name + ".log")
    with log_path.open("w") as log:
        done = subprocess.run(trial_argv(recipe, overrides, spec, run_dir, steps, timeout),
                              stdout=log, stderr=subprocess.STDOUT, check=False)
    log_text = log_path.read_text(errors="replace")
    path = run_dir / MEASURED_FILE
    record: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    written = spec.overrides.get("batch.global")
    global_batch = record.get("recipe", {}).get("global", written if isinstance(written, int) else None)
    memory, step = record.get("memory", {}), record.get("step", {})
    if done.returncode == 0 and step.get("measured"):
        return Trial(spec, run_dir, 0, "measured", global_batch, step_seconds=step["median"],
                     peak_bytes=memory.get("peak"), statistic=memory.get("statistic"), record=record)
    if done.returncode == 124:
        outcome = "timed out"
    elif memory.get("out_of_memory_ranks") or "OutOfMemoryError" in log_text:
        outcome = "out of memory"
    elif done.returncode == 0:
        outcome = "crashed (exit 0): no step time recorded"
    else:
        outcome = f"crashed (exit {done.returncode}): {_reason(log_text)}"
    return Trial(spec, run_dir, done.returncode, outcome, global_batch, record=record)


def rank_trials(trials: Sequence[Trial]) -> list[Trial]:
    """Measured ones fastest first; then the failed, in the search's order."""
    ok = sorted((t for t in trials if t.measured), key=lambda t: t.step_seconds or 0.0)
    return [*ok, *(t for t in trials if not t.measured)]


def measure(recipe: str, overrides: Sequence[str], specs: Sequence[TrialSpec], root: Path, *,
            steps: int, timeout: float = TRIAL_TIMEOUT) -> list[Trial]:
    """Run every trial (`root/trial-N`, its log beside it), rank them, and write
    `root/search.json`."""
    root.mkdir(parents=True, exist_ok=True)
    trials = [run_trial(recipe, overrides, spec, root / f"trial-{index}", steps=steps, timeout=timeout)
              for index, spec in enumerate(specs, 1)]
    ranked = rank_trials(trials)
    write_files(root, {"search.json": to_json({"steps": steps, "trials": [as_json(t) for t in ranked]})})
    return ranked


def as_json(trial: Trial) -> dict[str, object]:
    return {"label": trial.spec.label, "set": dict(trial.spec.overrides), "run_dir": str(trial.run_dir),
            "outcome": trial.outcome, "exit_code": trial.exit_code, "global_batch": trial.global_batch,
            "measured_step_seconds": trial.step_seconds,
            "predicted_step_seconds": trial.spec.predicted_seconds,
            "peak_bytes": trial.peak_bytes, "memory_statistic": trial.statistic}
