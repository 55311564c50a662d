"""How much faster `distrecipe compile` is than merely importing DeepSpeed.

Both are timed in the same run, as fresh processes, median of N each; the figure
that matters is the ratio (goal ≥ 20×), not the absolute times of this machine.

    python benchmarks/cli_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    recipe = ROOT / "recipes" / "seed-8b-32gpu-zero3.yaml"
    # The console script users run, installed next to this interpreter.
    script = Path(sys.executable).with_name("distrecipe")
    with tempfile.TemporaryDirectory() as out:
        compile_s = median_seconds([str(script), "compile", str(recipe), "-o", out], args.runs)
    import_s = median_seconds([sys.executable, "-c", "import deepspeed"], args.runs)
    ratio = import_s / compile_s
    print(f"distrecipe compile: {compile_s * 1000:.0f} ms (median of {args.runs})")
    print(f"import deepspeed:   {import_s * 1000:.0f} ms (median of {args.runs})")
    print(f"ratio: compile is {ratio:.1f}x faster than importing DeepSpeed (goal >= 20x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
