"""The engine view of Megatron-Core and Megatron-DeepSpeed (the CPU-rank measurements of
DeepSpeed, FSDP2 and DDP are `tests/test_plan_engine.py`, slow)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from distrecipe.job import Plan
from distrecipe.plan.engine import megatron, plan_engine_view
from distrecipe.plan.memory import plan_model_state
from distrecipe.plan.traffic import engine as traffic
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve

PSI = 1e9


def plan_of(**changes: Any) -> Plan:
    doc: dict[str, Any] = {"recipe": 1, "name": "m", "model": {"params": PSI, "hidden_size": 2048},
                           "cluster": {"nodes": 1, "gpus_per_node": 8}, "strategy": "megatron",
                           "batch": {"micro": 1, "global": 8}}
    doc.update(changes)
    return resolve(recipe_from_text(yaml.safe_dump(doc), "m.yaml"))


def test_megatron_core_keeps_its_gradient_buffer_in_the_reduce_dtype() -> None:
    """bf16 training reduces in fp32 by default (`grad_reduce_in_fp32`): 2 + 4 + 12/N bytes a
    parameter, the seed's 6Ψ + 12Ψ/N; `reduce_dtype: bf16` halves the buffer and its
    reduce-scatter, and the step casts one shard to fp32."""
    default = megatron(plan_of(), PSI)
    assert default.total("rest") == pytest.approx((2 + 4 + 12 / 8) * PSI)
    low = plan_of(reduce_dtype="bf16")
    view = megatron(low, PSI)
    assert view.points["rest"]["gradients"] == 2 * PSI
    assert view.points["step"]["fp32 gradients"] == pytest.approx(4 * PSI / 8)
    assert traffic(low, None, PSI).sent["reduce-scatter gradients"] == pytest.approx(7 / 8 * 2 * PSI)
    assert traffic(plan_of(), None, PSI).sent["reduce-scatter gradients"] == pytest.approx(7 / 8 * 4 * PSI)


def test_bf16_moments_halve_adams_state() -> None:
    view = megatron(plan_of(optimizer={"state_dtype": "bf16"}), PSI)
    assert view.points["rest"]["optimizer"] == pytest.approx(4 * PSI / 8)
    assert view.points["rest"]["master weights"] == pytest.approx(4 * PSI / 8)


def test_megatron_deepspeed_keeps_16_bit_and_fp32_gradients() -> None:
    """DeepSpeed's BF16_Optimizer (pipe/engine.py: clear_lp_grads, backward, update_hp_grads)
    leaves the 16-bit gradients beside the fp32 accumulation buffer: 2 + 2 + 4 + 12/N."""
    view = megatron(plan_of(launch={"backend": "deepspeed"}), PSI)
    assert view.engine.startswith("Megatron-DeepSpeed (BF16_Optimizer")
    assert view.total("rest") == pytest.approx((2 + 2 + 4 + 12 / 8) * PSI)
    zero1 = megatron(plan_of(launch={"backend": "deepspeed"}, reduce_dtype="bf16"), PSI)
    assert zero1.engine.startswith("Megatron-DeepSpeed ZeRO-1")


@pytest.mark.parametrize(("changes", "rest", "formula"), [
    # torch FSDP2 over a model cast to bf16: 2 + 8/2 bytes sharded at rest, AdamW's moments bf16.
    ({"strategy": "fsdp", "stage": 3, "launch": {"backend": "torchrun"}}, (2 + 4) / 8, "8Ψ/N"),
    # torch DDP: bf16 parameters, moments and bucket, whole on every rank.
    ({"strategy": "ddp", "stage": 0, "launch": {"backend": "accelerate"}}, 2 + 4 + 2, "8Ψ"),
    # DeepSpeed ZeRO-2 under bf16_master_weights_and_grads + bf16_optimizer_states: the master
    # partition is a bf16 clone (2/N), the moments 4/N.
    ({"strategy": "zero", "stage": 2, "launch": {"backend": "deepspeed"}}, 2 + (2 + 4) / 8, "2Ψ + 6Ψ/N"),
])
def test_pure_bf16_keeps_no_fp32_master(changes: dict[str, Any], rest: float, formula: str) -> None:
    """`optimizer.master_weights: bf16`: 2 + 2 + 4 bytes a parameter, not 2 + 2 + 12."""
    plan = plan_of(**changes, optimizer={"master_weights": "bf16", "state_dtype": "bf16"})
    view = plan_engine_view(plan, psi=PSI)
    assert view.total("rest") == pytest.approx(rest * PSI)
    assert plan_model_state(plan).formula == formula
