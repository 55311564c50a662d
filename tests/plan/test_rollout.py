"""The rollout phase `plan` prices: TRL's colocated vLLM beside verl's hybrid engine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.engines.trl import vllm_defaults
from distrecipe.plan.report import estimate

GRPO = """recipe: 1
name: grpo-7b-8gpu
model: {params: 7.6e9, hidden_size: 3584, layers: 28, heads: 28, kv_heads: 4, vocab: 152064}
cluster: {nodes: 1, gpus_per_node: 8, gpu: h100}
strategy: zero
stage: 3
batch: {micro: 4, global: 128, seq_len: 2048}
precision: bf16
optimizer: {name: adamw, lr: 1.0e-6}
rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}
launch: {backend: accelerate-deepspeed}
"""


def estimated(text: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return estimate(api.load_plan(path))


def test_trl_keeps_its_colocated_vllm_through_training(tmp_path: Path) -> None:
    est = estimated(GRPO, tmp_path)
    phase = est.rollout
    assert phase is not None and (phase.trainer, phase.freed, phase.tensor) == ("TRL", False, 1)
    assert phase.engine == pytest.approx(0.3 * 80e9) and phase.in_training == phase.engine
    assert phase.actor == {part: size for part, size in phase.actor.items() if size}  # nothing offloaded
    assert est.training_need == pytest.approx(est.memory.needed + 0.3 * 80e9)
    assert est.need > 80e9  # the kept fraction leaves the update no room: plan says it does not fit


def test_trl_s_sleep_mode_gives_the_fraction_back(tmp_path: Path) -> None:
    est = estimated(GRPO.replace("rollout_memory: 0.3", "rollout_memory: 0.3, free_rollout_memory: true"), tmp_path)
    assert est.rollout is not None and est.rollout.in_training == 0.0
    assert est.training_need == pytest.approx(est.memory.needed)


@pytest.mark.parametrize(("change", "trainer"), [
    (("rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}", "rl: {rollout_n: 8, prompts_per_step: 16}"),
     None),  # TRL generates with the trained model: no second engine
    (("launch: {backend: accelerate-deepspeed}", "launch: {backend: verl}"), "verl")])
def test_whose_rollout_engine_is_priced(change: tuple[str, str], trainer: str | None, tmp_path: Path) -> None:
    text = GRPO.replace(*change)
    if trainer == "verl":
        text = text.replace("strategy: zero", "strategy: fsdp")
    est = estimated(text, tmp_path)
    assert (est.rollout.trainer if est.rollout else None) == trainer


def test_the_defaults_are_grpoconfig_s() -> None:
    trl = pytest.importorskip("trl")
    fields = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    found = vllm_defaults()
    assert (found.memory, found.sleep, found.tensor) == (fields["vllm_gpu_memory_utilization"],
                                                         fields["vllm_enable_sleep_mode"],
                                                         fields["vllm_tensor_parallel_size"])


@pytest.mark.parametrize(("mode", "fraction", "stated"), [
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: colocate}", vllm_defaults().memory, False),
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: server}", None, False),
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: server, rollout_memory: 0.9}", None, False)])
def test_the_rollout_mode_says_whose_gpus_hold_vllm(mode: str, fraction: float | None, stated: bool,
                                                    tmp_path: Path) -> None:
    """Colocated without a fraction: GRPOConfig's default one; a server's GPUs are not the trainer's."""
    est = estimated(GRPO.replace("rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}", mode), tmp_path)
    if fraction is None:
        assert est.rollout is None and est.need == est.training_need == pytest.approx(est.memory.needed)
    else:
        assert est.rollout is not None and (est.rollout.fraction, est.rollout.stated) == (fraction, stated)
