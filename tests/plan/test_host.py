"""Host memory: offload's pinned state per node, against `cluster.cpu_memory`, in `plan`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.plan import host
from distrecipe.plan.report import estimate
from distrecipe.plan.units import GB
from tests.conftest import RECIPES, Result

OFFLOAD = RECIPES / "seed-8b-32gpu-zero2-offload.yaml"


def test_zero2_offload_keeps_what_deepspeed_pins() -> None:
    """stage_1_and_2.py with `offload_optimizer`: the fp32 partition and its fp32 `.grad`,
    Adam's moments, the 16-bit copy of the partition (`param_buffer_of_bit16_for_cpu_offload_groups`)
    and, with accumulation 4, the 16-bit gradients between micro-steps (`accumulated_grads_in_cpu`):
    (4 + 4 + 8 + 2 + 2) × 8e9 / 32 per rank, × 8 ranks per node."""
    est = estimate(load_plan(OFFLOAD))
    assert est.plan.batch.accumulation == 4
    assert est.engine.cpu == {"master weights": 1 * GB, "optimizer": 2 * GB, "fp32 gradients": 1 * GB,
                              "16-bit parameters": 0.5 * GB, "accumulated gradients": 0.5 * GB}
    assert host.per_node(est) == 40 * GB
    once = estimate(load_plan(OFFLOAD, ("batch.micro=8",)))  # accumulation 1: nothing kept between
    assert once.plan.batch.accumulation == 1 and "accumulated gradients" not in once.engine.cpu


@pytest.mark.parametrize(("cpu", "code", "said"), [
    ((), 0, "per node 40 GB (cluster.cpu_memory not set: not checked)"),
    (("--set", "cluster.cpu_memory=64GB"), 0, "per node 40 GB of 64 GB\n"),
    (("--set", "cluster.cpu_memory=30GB"), 1, "per node 40 GB of 30 GB: more than the node has"),
])
def test_plan_checks_the_host(cli: Callable[..., Result], cpu: tuple[str, ...], code: int, said: str) -> None:
    result = cli("plan", OFFLOAD, "--set", "batch.micro=1", *cpu)
    assert result.code == code, result.err
    assert said in result.out
    fits = next(line for line in result.out.splitlines() if line.startswith("fits? "))
    assert fits.startswith("fits? no" if code else "fits? yes")
    if code:
        assert fits.endswith("; offload needs host 40 GB per node of 30 GB: more than the node has")
        advice = result.out.split("advice\n")[1]
        assert advice.startswith("  - does not fit: ZeRO-2 + offload needs host 40 GB per node of 30 GB")


def test_plan_json_says_the_host_need_and_verdict(cli: Callable[..., Result]) -> None:
    """`host_fits` is null where unchecked (no offload, or no `cluster.cpu_memory`)."""
    for sets, verdict in (((), None), (("--set", "cluster.cpu_memory=30GB"), False),
                          (("--set", "cluster.cpu_memory=64GB"), True)):
        data = json.loads(cli("plan", OFFLOAD, "--set", "batch.micro=1", *sets, "--format", "json").out)
        assert (data["host_bytes_per_node"], data["host_fits"]) == (40 * GB, verdict)
    bare = json.loads(cli("plan", RECIPES / "seed-8b-32gpu-zero2.yaml", "--format", "json").out)
    assert (bare["host_bytes_per_node"], bare["host_fits"], bare["cpu_memory"]) == (0, None, None)


def test_size_reads_in_terabytes_from_one() -> None:
    assert (host.size(2.684e12), host.size(2e12), host.size(144e9)) == ("2.68 TB", "2 TB", "144 GB")


PROBE = Path(__file__).resolve().parents[1] / "offload_probe.py"
PROBE_RECIPE = """recipe: 1
name: offload-probe
model: {hidden_size: 128, layers: 4, heads: 4, kv_heads: 2, intermediate_size: 384, vocab: 1024}
cluster: {nodes: 1, gpus_per_node: 1, device: cpu}
strategy: zero
stage: 2
offload: {optimizer: cpu}
batch: {micro: 2, accumulation: 1, global: 2, seq_len: 32}
precision: bf16
launch: {backend: deepspeed}
"""


@pytest.mark.slow  # three DeepSpeed runs on the CPU accelerator
@pytest.mark.parametrize(("stage", "accumulation"), [(2, 1), (2, 2), (3, 2)])
def test_the_host_terms_are_what_deepspeed_keeps(write: Callable[[str, str], Path], stage: int,
                                                 accumulation: int) -> None:
    """`tests/offload_probe.py` counts what DeepSpeed pins, Adam's moments and ZeRO-3's fp32
    partition on the host; the engine view's `cpu` is all of it but ZeRO-1/2's one staging
    buffer of the largest parameter tensor (`temp_grad_buffer_for_cpu_offload`, 16-bit),
    which the plan leaves out (docs/plan.md)."""
    recipe = write("probe.yaml", PROBE_RECIPE)
    est = estimate(load_plan(recipe, (f"stage={stage}", f"batch.accumulation={accumulation}",
                                      f"batch.global={2 * accumulation}")))
    done = subprocess.run([sys.executable, str(PROBE), str(stage), str(accumulation)], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    staging = 2 * got["largest"] if stage < 3 else 0
    assert got["pinned"] + got["adam"] + got["fp32_unpinned"] - staging == sum(est.engine.cpu.values())
