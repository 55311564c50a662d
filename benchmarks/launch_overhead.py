"""Time to the first logged training step: through `distrecipe launch` versus the launcher directly.

distrecipe adds a Python start, recipe resolution, config emission, the run
directory and a supervising parent to every launch; this measures what that costs
where users feel it, before the first step. Each round runs the demo recipe once
through distrecipe and once by calling the exact command distrecipe recorded (the
same launcher, argv and environment, with the run directory's files copied), in
alternating order after one warm-up, and compares medians. Goal: ratio ≤ 1.05.

    .venv/bin/python benchmarks/launch_overhead.py [--rounds 3] [--recipe recipes/tiny-cpu.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_STEP = '{"step": 1,'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def time_to_first_step(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning `argv` until it prints the first step's line; then let it finish."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    elapsed = None
    for line in proc.stdout:
        if elapsed is None and line.startswith(FIRST_STEP):
            elapsed = time.perf_counter() - start
    if proc.wait() != 0 or elapsed is None:
        raise SystemExit(f"run failed (exit {proc.returncode}): {argv}")
    return elapsed


def through_distrecipe(recipe: Path, run_dir: Path) -> float:
    argv = [sys.executable, "-m", "distrecipe", "launch", str(recipe), "--run-dir", str(run_dir),
            "--set", f"launch.master_port={free_port()}", "--", "-m", "distrecipe.launch.tiny_train",
            "--steps", "1"]
    return time_to_first_step(argv, dict(os.environ))


def directly(recorded: Path, run_dir: Path) -> float:
    """The launcher command distrecipe recorded, on a copy of its run directory."""
    shutil.copytree(recorded, run_dir)
    (run_dir / "metrics.jsonl").unlink(missing_ok=True)
    record = json.loads((recorded / "run.json").read_text())
    argv = [arg.replace(str(recorded), str(run_dir)) for arg in record["argv"]]
    if "--master_port" in argv:  # a fresh port, as distrecipe's run gets: reusing one costs seconds
        argv[argv.index("--master_port") + 1] = str(free_port())
    env = {**os.environ, "DISTRECIPE_RUN_DIR": str(run_dir),
           **{k: v for k, v in record["env"].items() if k == "OMP_NUM_THREADS"}}
    return time_to_first_step(argv, env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "tiny-cpu.yaml")
    args = parser.parse_args()
    wrapped: list[float] = []
    direct: list[float] = []
    recipe = args.recipe.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        through_distrecipe(recipe, reference)  # also the warm-up: page cache, bytecode
        for round_ in range(args.rounds):
            ours, theirs = Path(tmp) / f"distrecipe-{round_}", Path(tmp) / f"direct-{round_}"
            if round_ % 2:  # alternate the order so a warming machine favours neither
                direct.append(directly(reference, theirs))
                wrapped.append(through_distrecipe(recipe, ours))
            else:
                wrapped.append(through_distrecipe(recipe, ours))
                direct.append(directly(reference, theirs))
            print(f"round {round_ + 1}: distrecipe {wrapped[-1]:.2f} s, direct {direct[-1]:.2f} s",
                  flush=True)
    ratio = statistics.median(wrapped) / statistics.median(direct)
    print(f"time to first step: distrecipe launch {statistics.median(wrapped):.2f} s, launcher directly "
          f"{statistics.median(direct):.2f} s, ratio {ratio:.3f} (goal ≤ 1.05)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
