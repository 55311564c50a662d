"""What a DeepSpeed probe run under torchrun does first and last.

`tests/pipeline_probe.py` and `tests/zero_step_probe.py` each measure one thing inside
DeepSpeed's engine on CPU ranks: both start DeepSpeed over gloo the same way and hand every
rank's figures to rank 0, which writes them for the test that launched the probe (`run`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from distrecipe.launch.tiny_train import skip_shm_build

ROOT = Path(__file__).resolve().parents[1]


def start(job_path: str) -> tuple[ModuleType, Any]:
    """DeepSpeed on CPU ranks over gloo, one thread each, and the job the test wrote."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed

    skip_shm_build()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.set_num_threads(1)
    with open(job_path) as f:
        return deepspeed, json.load(f)


def gather_to(out_path: str, measured: Any) -> None:
    """Every rank's `measured`, in rank order, written by rank 0 to `out_path`."""
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, measured)
    if dist.get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump(gathered, f, indent=1)
    dist.barrier()


def run(probe: str, job: Any, tmp_path: Path) -> Any:
    """The test's side: `python -m tests.<probe>` on 2 CPU ranks under torchrun, from the
    repository root (so the probe imports this module), and what its ranks measured."""
    job_path, out = tmp_path / "job.json", tmp_path / "out.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node", "2",
         "-m", f"tests.{probe}", str(job_path), str(out)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text(encoding="utf-8"))
