"""How much faster `distrecipe compile` is than merely importing DeepSpeed.

Both are timed in the same run, as fresh processes, median of N each; the figure
that matters is the ratio (goal ≥ 20×), not the absolute times of this machine.
Every shipped recipe (`recipes/*.yaml`) is compiled, since compile also lints what it
writes (a recipe that does not fit is refused, exit 1, and timed all the same); the
ratio is against the median recipe, and the slowest is printed too. The distrecipe
timed is the one this interpreter imports (`PYTHONPATH=CHECKOUT` times another).

    python benchmarks/cli_speed.py [--runs 7] [--target all]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one fresh process: on a shared
    machine the CPU figure is the one a neighbour disturbs less."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    code = subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {code}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--target", default="deepspeed", help="compile --target (default deepspeed)")
    args = parser.parse_args()
    recipes = sorted((ROOT / "recipes").glob("*.yaml"))
    # The console script users run, installed next to this interpreter.
    script = Path(sys.executable).with_name("distrecipe")
    # Like for like: pip byte-compiles DeepSpeed (and an installed distrecipe) at install
    # time, but an editable checkout under PYTHONDONTWRITEBYTECODE (set on these
    # machines) would recompile every distrecipe module on every run. The .pyc files go
    # to the package's own __pycache__ (ignored by git), as an install would put them.
    spec = importlib.util.find_spec("distrecipe")
    package = Path(spec.origin).parent if spec is not None and spec.origin else ROOT / "distrecipe"
    compileall.compile_dir(package, quiet=1)
    compile_times: dict[str, list[tuple[float, float]]] = {recipe.name: [] for recipe in recipes}
    import_times = []
    with tempfile.TemporaryDirectory() as out:
        # Interleaved, so a noisy neighbour slows both sides alike.
        for _ in range(args.runs):
            for recipe in recipes:  # 0 written, 1 refused for a lint error: both are answers
                compile_times[recipe.name].append(
                    seconds([str(script), "compile", str(recipe), "-t", args.target, "-o", out], ok=(0, 1)))
            import_times.append(seconds([sys.executable, "-c", "import deepspeed"]))
    print(f"distrecipe: {package}")
    for clock, index in (("wall", 0), ("CPU", 1)):
        medians = {name: statistics.median(t[index] for t in times) for name, times in compile_times.items()}
        compile_s = statistics.median(medians.values())
        import_s = statistics.median(t[index] for t in import_times)
        slowest = max(medians, key=lambda name: medians[name])
        print(f"{clock}: " + ", ".join(f"{name} {median * 1000:.0f} ms" for name, median in medians.items()))
        print(f"{clock}: distrecipe compile -t {args.target}: {compile_s * 1000:.0f} ms (median recipe of "
              f"{len(recipes)}, median of {args.runs} runs each; "
              f"slowest {slowest} {medians[slowest] * 1000:.0f} ms)")
        print(f"{clock}: import deepspeed: {import_s * 1000:.0f} ms (median of {args.runs})")
        print(f"{clock}: ratio: compile is {import_s / compile_s:.1f}x faster than importing DeepSpeed "
              f"(goal >= 20x); slowest recipe {import_s / medians[slowest]:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
