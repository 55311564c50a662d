"""Host memory: offload's pinned state per node, against `cluster.cpu_memory`, in `plan`."""

from __future__ import annotations

from collections.abc import Callable

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


def test_size_reads_in_terabytes_from_one() -> None:
    assert (host.size(2.684e12), host.size(2e12), host.size(144e9)) == ("2.68 TB", "2 TB", "144 GB")
