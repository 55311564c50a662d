"""The engine view and traffic of layouts the CPU engine probe (`test_plan_engine.py`)
does not run: DDP under verl (FSDP2 on one-rank shard groups) and ZeRO++ hpZ."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.memory import local_params
from distrecipe.plan.report import estimate
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
    assert sent.total == pytest.approx(plan.accumulation * 2 * ring(32) * 4 * psi)
    assert sent.intra == 0.0  # a one-rank shard group sends nothing inside it
    torch_ddp = estimate(load_plan(DDP))
    assert "buffers" in torch_ddp.engine.points["backward"]
