"""Running `distrecipe` for the fault tests: a subprocess in a scratch folder, this checkout first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import RECIPES, ROOT
from tests.ports import free_port

TINY = RECIPES / "tiny-cpu.yaml"
"""The recipe every checkpoint scenario trains, saves and resumes."""
TOLERANCE = 1e-6
"""Relative loss difference a resumed step may show against the uninterrupted run's: another
world sums the same samples in another order, so float rounding, not a lost step."""

WORLDS = {2: ["--set", "cluster.gpus_per_node=2", "--set", "batch.accumulation=2"],
          1: ["--set", "cluster.gpus_per_node=1", "--set", "batch.accumulation=4"]}
"""The tiny recipe's global batch 8 at world 2 and at world 1 (accumulation makes it up)."""


def distrecipe(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # cwd is a scratch folder, so this checkout's distrecipe is put first on the path.
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "distrecipe", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=environ)


def torchrun(world: int, script: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`script` on `world` gloo CPU ranks under torchrun, this checkout first on the path."""
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world), "--master_port",
            str(free_port()), str(script), *map(str, args)]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=environ)
