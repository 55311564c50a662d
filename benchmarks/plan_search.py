"""How long `distrecipe plan --search` takes for an 8B model on 32 GPUs, beside
merely importing DeepSpeed, in the same run (goal: under 2 s, torch-free).

Both are timed as fresh processes, interleaved, median of N each.

    python benchmarks/plan_search.py [--runs 5]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(argv: list[str]) -> float:
    # This checkout's distrecipe, whatever the installed console script points at.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    recipe = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"
    compileall.compile_dir(ROOT / "distrecipe", quiet=1)  # as an install would (cli_speed.py)
    search = [sys.executable, "-m", "distrecipe", "plan", str(recipe), "--set", "cluster.gpu=h100",
              "--search"]
    search_times, import_times = [], []
    for _ in range(args.runs):
        search_times.append(seconds(search))
        import_times.append(seconds([sys.executable, "-c", "import deepspeed"]))
    search_s, import_s = statistics.median(search_times), statistics.median(import_times)
    print(f"distrecipe plan --search (8B, 32 GPUs): {search_s * 1000:.0f} ms "
          f"(median of {args.runs})")
    print(f"import deepspeed:                       {import_s * 1000:.0f} ms (median of {args.runs})")
    print(f"ratio: the search takes {search_s / import_s:.2f}x the time of importing DeepSpeed "
          f"(goal: under 2 s)")
    return 0 if search_s < 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
