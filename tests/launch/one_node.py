"""The reference curve of the two-"node" runs: the tiny recipe as written, 1 node × 2 CPU
ranks, through one launcher (`--target`).

The K8s manifests' commands (test_k8s_run.py) and the SkyPilot run block
(test_skypilot_run.py) on 2 nodes × 1 rank must each reproduce it. It is the same run for
both, so it is made once per launcher and worker (a real launch, ≈ 20 s on two busy
cores), and the scheduler keeps every module importing this one on one worker
(tests/conftest.py `SHARED_RUNS`), so once per session.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import RECIPES, ROOT
from tests.ports import free_port

TINY = RECIPES / "tiny-cpu.yaml"


def environment() -> dict[str, str]:
    """A node's environment here: this checkout's distrecipe, the venv's `python3` first on PATH
    (the image, or the task's setup, installs it there)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}


@functools.cache
def one_node(target: str) -> tuple[dict[str, Any], ...]:
    """Rank 0's records of each optimizer step (metrics.jsonl, what the run printed)."""
    with tempfile.TemporaryDirectory() as runs:
        done = subprocess.run([sys.executable, "-m", "distrecipe", "launch", str(TINY), "--target", target,
                               "--runs-root", runs, "--set", f"launch.master_port={free_port()}"],
                              cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        (run_dir,) = Path(runs).iterdir()
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return tuple(json.loads(line) for line in lines)
