"""How much faster `distrecipe compile` is than merely importing DeepSpeed.

Both are timed in the same run, as fresh processes, median of N each; the figure
that matters is the ratio (goal ≥ 20×), not the absolute times of this machine.

    python benchmarks/cli_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    recipe = ROOT / "recipes" / "seed-8b-32gpu-zero3.yaml"
    # The console script users run, installed next to this interpreter.
    script = Path(sys.executable).with_name("distrecipe")
    # Like for like: pip byte-compiles DeepSpeed (and an installed distrecipe) at install
    # time, but an editable checkout under PYTHONDONTWRITEBYTECODE (set on these
    # machines) would recompile every distrecipe module on every run. The .pyc files go
    # to the package's own __pycache__ (ignored by git), as an install would put them.
    compileall.compile_dir(ROOT / "distrecipe", quiet=1)
    compile_times, import_times = [], []
    with tempfile.TemporaryDirectory() as out:
        # Interleaved, so a noisy neighbour slows both sides alike.
        for _ in range(args.runs):
            compile_times.append(seconds([str(script), "compile", str(recipe), "-o", out]))
            import_times.append(seconds([sys.executable, "-c", "import deepspeed"]))
    compile_s, import_s = statistics.median(compile_times), statistics.median(import_times)
    ratio = import_s / compile_s
    print(f"distrecipe compile: {compile_s * 1000:.0f} ms (median of {args.runs})")
    print(f"import deepspeed:   {import_s * 1000:.0f} ms (median of {args.runs})")
    print(f"ratio: compile is {ratio:.1f}x faster than importing DeepSpeed (goal >= 20x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
