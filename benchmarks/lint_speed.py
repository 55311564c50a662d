"""How fast `distrecipe lint` checks a repo of ds_configs, against DeepSpeed reading them.

1,000 valid ds_configs (ZeRO 0-3, offload, bf16/fp16, HF-style buckets) are written
to a temporary directory. `distrecipe lint DIR --world 8` runs once per repetition as
a fresh process, so its figure includes Python start-up and imports (goal: under 2 s
here). DeepSpeed's side is the same 1,000 files loaded with `DeepSpeedConfig` in one
process (world size patched, as `reference/deepspeed.md` shows). Both are also timed
in one process each with imports apart, and the ratio is printed both ways: the
checks alone, and with what each must import.

    python benchmarks/lint_speed.py [--files 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORLD = 8

LINT_LOOP = """
import json, sys, time
start = time.perf_counter()
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
imported = time.perf_counter()
report = lint([sys.argv[1]], config=LintConfig(), world={world})
done = time.perf_counter()
print(json.dumps({{"import": imported - start, "loop": done - imported, "files": report.files}}))
"""

DEEPSPEED_LOOP = """
import json, sys, time
from pathlib import Path
from unittest import mock
start = time.perf_counter()
import deepspeed.comm
from deepspeed.runtime.config import DeepSpeedConfig
imported = time.perf_counter()
paths = sorted(Path(sys.argv[1]).glob("*.json"))
with mock.patch.object(deepspeed.comm, "get_world_size", return_value={world}), \\
        mock.patch.object(deepspeed.comm, "get_rank", return_value=0):
    for path in paths:
        DeepSpeedConfig(json.loads(path.read_text()))
done = time.perf_counter()
print(json.dumps({{"import": imported - start, "loop": done - imported, "files": len(paths)}}))
"""


def ds_config(i: int) -> dict[str, Any]:
    """A valid, varied ds_config: the shapes repositories really keep."""
    stage = i % 4
    micro, accumulation = 1 + i % 8, 1 + (i // 8) % 4
    hidden = (1024, 2048, 4096, 5120)[(i // 32) % 4]
    config: dict[str, Any] = {
        "train_batch_size": micro * accumulation * WORLD,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accumulation,
        "gradient_clipping": 1.0,
        ("bf16" if i % 3 else "fp16"): {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": 0.1}},
        "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                              "reduce_bucket_size": hidden * hidden},
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
    }
    zero = config["zero_optimization"]
    if stage >= 1 and i % 5 == 0:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if stage == 3:
        zero["stage3_prefetch_bucket_size"] = int(0.9 * hidden * hidden)
        zero["stage3_param_persistence_threshold"] = 10 * hidden
        if i % 7 == 0:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return config


def in_one_process(script: str, directory: str) -> dict[str, float]:
    """Run a timing script in a fresh interpreter; it prints its import and loop seconds as JSON."""
    done = subprocess.run([sys.executable, "-c", script.format(world=WORLD), directory],
                          capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.files):
            (Path(tmp) / f"ds_config_{i:04d}.json").write_text(json.dumps(ds_config(i), indent=2) + "\n")
        lint_times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "distrecipe", "lint", tmp, "--world", str(WORLD),
                                   "--format", "json"], capture_output=True, text=True, check=False)
            lint_times.append(time.perf_counter() - start)
            report = json.loads(done.stdout)
            if done.returncode != 0 or report["files"] != args.files or report["findings"]:
                print(f"lint did not pass the generated configs cleanly:\n{done.stdout[:2000]}{done.stderr}")
                return 1
        lint_s = statistics.median(lint_times)
        ours, deepspeed = (in_one_process(loop, tmp) for loop in (LINT_LOOP, DEEPSPEED_LOOP))
    print(f"distrecipe lint: {args.files} files in {lint_s:.2f} s, one fresh process "
          f"(median of {args.runs}; goal < 2 s): {lint_s / args.files * 1000:.2f} ms per file")
    print(f"in one process, imports apart: lint {ours['loop']:.2f} s, "
          f"DeepSpeedConfig {deepspeed['loop']:.2f} s "
          f"(importing: distrecipe.lint {ours['import']:.2f} s, deepspeed {deepspeed['import']:.1f} s)")
    print(f"ratio DeepSpeedConfig / lint: {deepspeed['loop'] / ours['loop']:.2f} for the checks alone, "
          f"{(deepspeed['loop'] + deepspeed['import']) / (ours['loop'] + ours['import']):.1f} with imports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
