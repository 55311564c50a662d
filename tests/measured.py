"""One measured search of the demo recipe on two CPU ranks, shared by the tests of run
records (`tests/launch/test_measure.py`), the search (`tests/launch/test_trials.py`) and
calibration (`tests/plan/test_calibration.py`): three real launches, about 40 s, once a session.

The search's three fastest for `tiny-cpu` are ZeRO-3 at micro 4 with checkpointing full,
selective and none; the reference trainer does not reproduce selective recomputation, so
that trial really crashes (the rank exits 1 with its reason) and must be ranked last.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import RECIPES, ROOT

TINY = RECIPES / "tiny-cpu.yaml"
STEPS = 3
SEARCH = ("--set", "cluster.gpu_memory=8GB", "--search")


@dataclass(frozen=True)
class Search:
    code: int
    report: dict[str, Any]
    err: str
    root: Path

    @property
    def trials(self) -> list[dict[str, Any]]:
        measured: list[dict[str, Any]] = self.report["measured"]
        return measured


@functools.cache
def measured_search() -> Search:
    """`plan --search --measure 3 --write best.yaml` of the demo, run as a user runs it."""
    root = Path(tempfile.mkdtemp(prefix="distrecipe-measured-"))
    atexit.register(shutil.rmtree, root, True)
    done = subprocess.run([sys.executable, "-m", "distrecipe", "plan", str(TINY), *SEARCH, "--measure", "3",
                           "--measure-steps", str(STEPS), "--runs-root", str(root), "--format", "json",
                           "--write", str(root / "best.yaml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.stdout, done.stderr[-3000:]
    return Search(done.returncode, json.loads(done.stdout), done.stderr, root)


def measured_record(trial: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((Path(trial["run_dir"]) / "measured.json").read_text())
    return record


def write_run(directory: Path, overrides: list[str], *, peak: int, step_seconds: float | None,
              exit_code: int = 0) -> Path:
    """A run directory as `launch` leaves it, written by launch's own `write_measured`: the
    demo recipe with `overrides`, rank 0 peaking at `peak` bytes (reserved on GPUs, RSS on
    CPU) and three steps of `step_seconds` each."""
    from distrecipe.api import load_plan
    from distrecipe.launch import metrics
    from distrecipe.launch.measure import write_measured

    plan = load_plan(TINY, overrides)
    directory.mkdir(parents=True)
    lines = [] if step_seconds is None else [{"step": i, "step_seconds": step_seconds} for i in (1, 2, 3)]
    if plan.recipe.cluster.device == "gpu":
        lines.append({"rank": 0, "reserved_bytes": peak, "allocated_bytes": peak // 2})
    (directory / metrics.METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_measured(plan, peaks={0: peak}, run_dir=directory, exit_code=exit_code)
    return directory
