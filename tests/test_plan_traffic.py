"""The engine view and traffic of layouts the CPU engine probe (`test_plan_engine.py`)
does not run: DDP under verl (FSDP2 on one-rank shard groups) and ZeRO++ hpZ."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.hardware import GPUS
from distrecipe.plan.memory import local_params
from distrecipe.plan.report import deepspeed_zero, estimate
from distrecipe.plan.steptime import ring_bandwidth
from distrecipe.plan.traffic import ring
from distrecipe.translator.verl import overrides
from tests.conftest import RECIPES

DDP = RECIPES / "seed-8b-32gpu-ddp.yaml"


def test_ddp_under_verl_is_fsdp2_on_shard_groups_of_one() -> None:
    """verl builds DDP as FSDP2 with `fsdp_size=1`: a (32, 1) mesh, so every rank keeps
    FSDP2's fp32 parameters, gradients and Adam (16Ψ, no DDP bucket copy), and the fp32
    gradients are all-reduced over all 32 ranks on every micro-step."""
    plan = load_plan(DDP, ("launch.backend=verl", "rl.rollout_n=4", "rl.prompts_per_step=64"))
    assert ("actor_rollout_ref.actor.fsdp_config.fsdp_size", 1) in overrides(plan)
    est = estimate(plan)
    psi = local_params(plan)
    assert est.engine.engine.startswith("torch FSDP2")
    assert est.engine.points["backward"] == {"parameters": 4 * psi, "optimizer": 8 * psi,
                                             "gradients": 4 * psi}
    sent = est.traffic_engine
    assert sent.total == pytest.approx(plan.batch.accumulation * 2 * ring(32) * 4 * psi)
    assert sent.intra == 0.0  # a one-rank shard group sends nothing inside it
    torch_ddp = estimate(load_plan(DDP))
    assert "buffers" in torch_ddp.engine.points["backward"]


ZERO3 = RECIPES / "seed-8b-32gpu-zero3.yaml"


@pytest.mark.parametrize(("group", "in_node"), [(8, True), (16, False)])
def test_hpz_gathers_after_the_first_stay_in_its_group(group: int, in_node: bool) -> None:
    """ZeRO-3 with a shard group is ZeRO++ hpZ (`zero_hpz_partition_size`): the first
    forward gather and the gradient reduce-scatter span all 32 ranks; backward's re-gather
    and the later micro-steps' forward gathers read the secondary copy inside the group,
    on NVLink when the group fits in a node (8 of 8 GPUs), not when it spans two."""
    plan = load_plan(ZERO3, (f"parallel.shard_group={group}",))
    zero = deepspeed_zero(plan)
    assert zero is not None and zero.hpz_partition_size == group
    sent = estimate(plan).traffic_engine
    psi, lp, m = local_params(plan), plan.precision_bytes, plan.batch.accumulation
    released = psi - zero.max_live_parameters
    assert m == 4
    assert sent.sent["all-gather parameters"] == pytest.approx(ring(32) * lp * psi)
    assert sent.sent["reduce-scatter gradients"] == pytest.approx(m * ring(32) * lp * psi)
    backward = sent.sent["all-gather parameters (backward)"]
    later = sent.sent["all-gather parameters (later micro-steps)"]
    assert backward == pytest.approx(m * ring(group) * lp * released)
    assert later == pytest.approx((m - 1) * ring(group) * lp * psi)
    in_group = backward + later
    assert sent.intra == (pytest.approx(in_group) if in_node else 0.0)


def test_hpz_bytes_that_leave_the_node_run_over_the_whole_group() -> None:
    """Unlike HSDP's replica all-reduce (one rank per node), hpZ's cross-node bytes are
    the all-N gather and reduce-scatter: every rank of the node drives its own NIC."""
    plan = load_plan(ZERO3, ("parallel.shard_group=8", "cluster.gpu=h100"))
    est = estimate(plan)
    sent, h100 = est.traffic_engine, GPUS["h100"]
    assert est.step is not None and sent.intra
    expected = sent.intra / h100.intra + (sent.total - sent.intra) / ring_bandwidth(h100, 8)
    assert est.step.communication - est.step.latency == pytest.approx(expected)  # the bandwidth term
