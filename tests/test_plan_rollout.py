"""verl's rollout engine as the second phase of `plan` (distrecipe/plan/rollout.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.plan.advice import advise
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.render import as_json, text
from distrecipe.plan.report import estimate
from distrecipe.recipe import Plan
from tests.emit_strategies import plan_of

GPU = 80 * 10**9
PSI = 7.6e9
CORPUS = Path(__file__).parent / "corpus" / "real" / "verl"


def rl_doc(**rl: Any) -> dict[str, Any]:
    """A 7.6B actor under FSDP2 on one node of 8 × 80 GB: 12Ψ/8 = 11.4 GB of state at rest."""
    return {
        "recipe": 1, "name": "grpo", "model": {"params": PSI},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory": GPU}, "strategy": "fsdp",
        "batch": {"micro": 4, "global": 320}, "rl": {"rollout_n": 5, "prompts_per_step": 64, **rl},
    }


def actor_at_rest(plan: Plan) -> float:
    return estimate(plan).engine.total("rest")


def test_rollout_phase_is_the_share_of_the_gpu_beside_the_actors_state() -> None:
    plan = plan_of(rl_doc(rollout_memory=0.6))
    est = estimate(plan)
    assert est.rollout is not None and est.rollout.stated
    assert actor_at_rest(plan) == pytest.approx(12 * PSI / 8)  # fp32 shard + Adam, no gradients
    assert est.rollout_need == pytest.approx(0.6 * GPU + 12 * PSI / 8 + CONTEXT)
    assert est.rollout_binds and est.need == est.rollout_need and est.fits


def test_verls_default_share_is_half_the_gpu() -> None:
    est = estimate(plan_of(rl_doc()))
    assert est.rollout is not None and est.rollout.fraction == 0.5 and not est.rollout.stated
    assert est.rollout.engine == GPU / 2


def test_a_share_kept_through_training_adds_to_the_training_phase() -> None:
    freed, kept = (estimate(plan_of(rl_doc(rollout_memory=0.5, free_rollout_memory=free)))
                   for free in (True, False))
    assert freed.training_need == freed.memory.needed
    assert kept.training_need == pytest.approx(kept.memory.needed + GPU / 2)
    assert kept.rollout_need == freed.rollout_need  # the rollout phase is the same


def test_without_sleep_mode_the_share_is_kept_through_training() -> None:
    doc = rl_doc(rollout_memory=0.5)
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.enable_sleep_mode=false"]}
    est = estimate(plan_of(doc))
    assert est.rollout is not None and not est.rollout.freed and est.rollout.in_training == GPU / 2


def test_between_phase_offload_in_native_verl_leaves_the_rollout_phase() -> None:
    doc = rl_doc(rollout_memory=0.6)
    doc["native"] = {"verl": ["actor_rollout_ref.actor.fsdp_config.param_offload=true",
                              "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"]}
    est = estimate(plan_of(doc))
    assert est.rollout is not None and est.rollout.actor == {}
    assert est.rollout_need == pytest.approx(0.6 * GPU + CONTEXT)


def test_recipe_offload_keeps_the_actor_on_the_host_in_both_phases() -> None:
    doc = rl_doc(rollout_memory=0.6)
    doc["offload"] = {"optimizer": "cpu", "params": "cpu"}
    est = estimate(plan_of(doc))
    assert est.rollout is not None and sum(est.rollout.actor.values()) == 0


def test_a_rollout_share_too_large_does_not_fit_and_the_advice_lowers_it_first() -> None:
    plan = plan_of(rl_doc(rollout_memory=0.95))
    est = estimate(plan)
    assert est.training_need < GPU < est.need and est.fits is False
    (line,) = advise(plan)
    assert "it fits with rl.rollout_memory: 0.83 " in line
    assert "batch.micro" not in line and "offload" not in line and "stage" not in line


def test_a_kept_share_is_freed_before_any_training_lever() -> None:
    doc = rl_doc(rollout_memory=0.8, free_rollout_memory=False)
    plan = plan_of(doc)
    assert estimate(plan).fits is False
    (line,) = advise(plan)
    assert "it fits with rl.free_rollout_memory: true (" in line


def test_text_and_json_show_the_rollout_only_for_verl() -> None:
    est = estimate(plan_of(rl_doc(rollout_memory=0.6)))
    shown = text(est, [])
    (line,) = [row for row in shown.splitlines() if row.startswith("  rollout (verl)")]
    assert "rl.rollout_memory 0.6 = 48 GB + actor state 11.4 GB" in line
    assert "fits? yes: needs 61.55 GB = the rollout phase (above); training" in shown
    data = as_json(est)
    assert data["rollout"]["engine"] == 0.6 * GPU and data["rollout"]["needed"] == data["need"]
    supervised = rl_doc()
    del supervised["rl"]
    other = estimate(plan_of(supervised))
    assert other.rollout is None and "rollout (verl)" not in text(other, [])
    assert as_json(other)["rollout"] is None


def test_auto_micro_judges_the_training_phase_only(tmp_path: Path) -> None:
    """The rollout phase does not depend on the micro-batch: a share that does not fit
    leaves `auto` to pick by training memory (and `plan` to say what does not fit)."""
    doc = rl_doc(rollout_memory=0.95)
    doc["model"] = {"params": PSI, "hidden_size": 3584, "layers": 28, "heads": 28, "kv_heads": 4,
                    "intermediate_size": 18944, "vocab": 152064}
    doc["batch"] = {"micro": "auto", "accumulation": "auto", "global": 320, "seq_len": 2048}
    plan = fitted(doc, tmp_path)
    assert plan.micro > 1 and "largest that fits" in plan.provenance["batch.micro"]
    doc["rl"]["free_rollout_memory"] = False  # now 76 GB stay through training: nothing fits
    assert "none fits" in fitted(doc, tmp_path).provenance["batch.micro"]


def fitted(doc: dict[str, Any], tmp_path: Path) -> Plan:
    """The Plan every command gets, `batch.micro: auto` chosen by memory."""
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return load_plan(path, ())


def test_a_corpus_scripts_plan_shows_the_rollout_share_it_sets(cli: Any, tmp_path: Path) -> None:
    script = CORPUS / "volcengine__verl__examples__grpo_trainer__run_qwen2-7b_hsdp.sh"
    assert "gpu_memory_utilization=0.6" in script.read_text(encoding="utf-8")
    imported = cli("import", script)
    assert imported.code == 0 and "rollout_memory: 0.6" in imported.out
    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(imported.out, encoding="utf-8")
    shown = cli("plan", recipe, "--set", "model.params=7.6e9", "--set", "cluster.gpu_memory=80e9")
    assert "  rollout (verl)     rl.rollout_memory 0.6 = 48 GB + actor state" in shown.out
