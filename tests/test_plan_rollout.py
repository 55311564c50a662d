"""verl's rollout engine as the second phase of `plan` (distrecipe/plan/rollout.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.engines.verl import (
    ROLLOUT_PROFILE,
    one_sequence_kv,
    rollout_heads_refusal,
    rollout_layout_refusal,
)
from distrecipe.job import Plan
from distrecipe.plan.advice import advise
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.render import as_json, text
from distrecipe.plan.report import compare, estimate
from distrecipe.translator.verl import overrides
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
    # 0.83 fits 80 GB exactly; the actor's state beside it carries the torch family's band, the
    # wide one (+23.0 %: torchtitan is its only source): 0.79
    assert "it fits with rl.rollout_memory: 0.79 " in line
    assert "batch.micro" not in line and "offload" not in line and "stage" not in line


def test_a_share_below_the_rollout_engines_floor_does_not_fit_and_is_raised_to_it() -> None:
    """0.05 × 80 GB = 4 GB cannot hold the rollout's 7.6 GB of weights (Ψ × 2 bytes ÷ TP 2):
    vLLM has no memory left for the KV cache and refuses to start, however much the GPU has."""
    plan = plan_of(rl_doc(rollout_memory=0.05))
    est = estimate(plan)
    assert est.rollout is not None and est.rollout.weights == PSI  # 2 bytes over 2 ranks
    assert est.need < GPU and est.starved and est.fits is False
    (line,) = advise(plan)
    assert line.startswith("does not fit: rl.rollout_memory 0.05 gives the rollout engine 4 GB, "
                           "below its floor 9.75 GB")
    # (7.6e9 + 2 GiB) / 80e9 = 0.122: the first hundredth above leaves some KV cache.
    assert "it fits with rl.rollout_memory: 0.13 (" in line and "0.65 GB of KV cache" in line


def test_rollout_tensor_parallelism_and_dtype_come_from_native_verl() -> None:
    doc = rl_doc(rollout_memory=0.6)
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=4",
                              "actor_rollout_ref.rollout.dtype=float32"]}
    est = estimate(plan_of(doc))
    assert est.rollout is not None and est.rollout.tensor_stated
    assert est.rollout.weights == pytest.approx(PSI * 4 / 4)
    assert "(Ψ × 4 bytes ÷ rollout tensor parallelism 4)" in text(est, [])


def test_no_share_fits_beside_the_actor_means_more_gpus_never_a_share_below_the_floor() -> None:
    """A 70B rollout copy alone (70 GB per GPU over TP 2) outgrows a 40 GB GPU: no fraction,
    offload or training lever helps, so the advice names more GPUs or more rollout TP."""
    doc = rl_doc(rollout_memory=0.5)
    doc["model"] = {"params": 70e9}
    doc["cluster"]["gpu_memory"] = 40 * 10**9
    (line,) = advise(plan_of(doc))
    assert line.startswith("does not fit: the rollout engine needs at least 72.15 GB per GPU")
    assert "rl.rollout_memory" not in line
    assert line.endswith("more GPUs (cluster.nodes) to shard the actor, or a larger "
                         "actor_rollout_ref.rollout.tensor_model_parallel_size in native.verl")


def test_verl_is_not_offered_what_it_runs_as_something_else() -> None:
    """verl has no ZeRO-1 (DR201) and no DDP actor (DR205): neither is compared or advised."""
    plan = plan_of(rl_doc(rollout_memory=0.6))
    assert [row.label for row in compare(plan)] == ["FSDP2 (no reshard)", "FSDP2 (reshard)",
                                                    "Megatron (distributed optimizer)"]
    zero = rl_doc(rollout_memory=0.6)
    zero["strategy"], zero["stage"] = "zero", 2
    labels = [row.label for row in compare(plan_of(zero))]
    assert labels == ["FSDP2 (no reshard; ZeRO-2 as verl builds it)", "FSDP2 (reshard; ZeRO-3 as verl builds it)",
                      "Megatron (distributed optimizer)"]
    assert not any("ZeRO-1" in line for line in advise(plan_of(zero)))


@pytest.mark.parametrize(("strategy", "stage", "words"), [
    ("ddp", 0, "FSDP2 (fsdp_size 1; DDP as verl builds it)"),
    ("zero", 1, "FSDP2 (no reshard; ZeRO-1 as verl builds it)"),
    ("zero", 3, "FSDP2 (reshard; ZeRO-3 as verl builds it)"),
    ("fsdp", 2, "FSDP2 (no reshard)"),
])
def test_verl_plans_are_labelled_by_the_fsdp2_it_builds(strategy: str, stage: int, words: str) -> None:
    """verl builds every non-Megatron actor with FSDP2 (`engines.verl.actor_engine`): the
    label says so, not DDP or ZeRO-n, and keeps the recipe's words after it."""
    doc = rl_doc(rollout_memory=0.6)
    doc["strategy"], doc["stage"] = strategy, stage
    assert estimate(plan_of(doc)).label == words
    supervised = rl_doc()
    del supervised["rl"]
    supervised["strategy"], supervised["stage"] = strategy, stage
    assert estimate(plan_of(supervised)).label == {"ddp": "DDP", "zero": f"ZeRO-{stage}"}.get(strategy, words)


def test_a_kept_share_is_freed_before_any_training_lever() -> None:
    doc = rl_doc(rollout_memory=0.78, free_rollout_memory=False)  # 0.8 needs offloading too
    plan = plan_of(doc)
    assert estimate(plan).fits is False
    (line,) = advise(plan)
    assert "it fits with rl.free_rollout_memory: true (" in line


def test_text_and_json_show_the_rollout_only_for_verl() -> None:
    est = estimate(plan_of(rl_doc(rollout_memory=0.6)))
    shown = text(est, [])
    (line,) = [row for row in shown.splitlines() if row.startswith("  rollout (verl)")]
    assert ("rl.rollout_memory 0.6 = 48 GB [weights 7.6 GB (Ψ × 2 bytes ÷ rollout tensor parallelism 2, "
            "verl's default) + start-up profile 2.15 GB + KV cache 38.25 GB] + actor state 11.4 GB") in line
    # The band moves only the actor's state and context beside vLLM's 48 GB share, which vLLM takes exactly.
    assert ("fits? yes: needs 61.55 GB (−18.0 % … +23.0 %: 59.11 GB–64.66 GB, wide (no band of its own for "
            "torch × eager-hf)) = the rollout phase (above); training") in shown
    said = est.verdict
    assert said is not None and said.exact == 0.6 * GPU and said.high == pytest.approx(0.6 * GPU + (est.need - 0.6 * GPU) * (1 + said.band.high))
    assert said.band.high == 0.2301  # the wide band
    data = as_json(est)
    assert data["rollout"]["engine"] == 0.6 * GPU and data["rollout"]["needed"] == data["need"]
    assert data["rollout"]["floor"] == PSI + ROLLOUT_PROFILE and data["rollout"]["starved"] is False
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
    assert plan.batch.micro > 1 and "largest that fits" in plan.provenance["batch.micro"]
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
    assert "  rollout (verl)     rl.rollout_memory 0.6 = 48 GB [weights 7.6 GB" in shown.out


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_under_verl_is_fsdp2s_view(stage: int) -> None:
    """verl builds a `strategy: zero` actor with FSDP2 (`actor.strategy` in the emitted
    overrides), so the engine view and the step time are FSDP2's, not DeepSpeed's."""
    rl = ("cluster.gpu=h100", "rl.rollout_n=4", "rl.prompts_per_step=64")
    seed = Path(__file__).parent.parent / "recipes" / "seed-8b-32gpu-zero2.yaml"
    zero = load_plan(seed, (*rl, f"stage={stage}"))
    fsdp = load_plan(seed, (*rl, "strategy=fsdp", f"stage={max(stage, 2)}"))
    assert dict(overrides(zero))["actor_rollout_ref.actor.strategy"] == "fsdp2"
    got, want = estimate(zero), estimate(fsdp)
    assert got.engine == want.engine and got.engine.engine.startswith("torch FSDP2")
    assert got.step == want.step
    deepspeed = estimate(load_plan(seed, ("cluster.gpu=h100", f"stage={stage}")))
    assert deepspeed.engine.engine.startswith("DeepSpeed")


QWEN7B = {"params": PSI, "hidden_size": 3584, "layers": 28, "heads": 28, "kv_heads": 4}
"""Qwen2.5-7B's shape: 4 kv heads of 128, so one token's K and V take 28 × 2 × 4 × 128 × 2 bytes."""


def test_one_sequences_kv_cache_is_whole_blocks_of_kv_heads_over_the_rollouts_tp() -> None:
    assert one_sequence_kv(32768, 28, 4, 128, 2, 1) == 1.75 * 2**30  # vLLM: "1.75 GiB KV cache is needed"
    assert one_sequence_kv(32768, 28, 4, 128, 2, 2) == 0.875 * 2**30
    assert one_sequence_kv(32768, 28, 4, 128, 2, 8) == one_sequence_kv(32768, 28, 4, 128, 2, 4)  # replicated
    assert one_sequence_kv(17, 1, 1, 1, 2, 1) == one_sequence_kv(32, 1, 1, 1, 2, 1) == 2 * 32 * 2


def test_a_stated_max_model_len_puts_one_sequences_kv_cache_in_the_floor() -> None:
    """verl's rollout.max_model_len is vLLM's: the share must hold the weights, the profile and
    one sequence that long (131072 tokens of Qwen2.5-7B over TP 2: 3.5 GiB)."""
    doc = rl_doc(rollout_memory=0.15)
    doc["model"] = QWEN7B
    bare = estimate(plan_of(doc)).rollout
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.max_model_len=131072"]}
    est = estimate(plan_of(doc))
    phase = est.rollout
    assert bare is not None and phase is not None and bare.sequence_kv == 0 and bare.max_len is None
    assert phase.max_len == 131072 and phase.sequence_kv == 3.5 * 2**30
    assert phase.floor == pytest.approx(bare.floor + 3.5 * 2**30)
    # 12 GB − (7.6 GB + 2 GiB) leaves 2.25 GB: less than one sequence, so vLLM refuses
    assert not bare.starved and phase.starved and est.fits is False
    assert "+ one sequence's KV cache 3.76 GB (rollout.max_model_len 131072)" in text(est, [])
    assert as_json(est)["rollout"]["sequence_kv"] == 3.5 * 2**30
    (line,) = advise(plan_of(doc))
    assert "one sequence's KV cache 3.76 GB" in line and "it fits with rl.rollout_memory: 0.17 (" in line  # 13.51 GB / 80 GB, the next hundredth


def test_lengths_or_a_shape_the_recipe_does_not_state_add_nothing() -> None:
    doc = rl_doc(rollout_memory=0.6)
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.max_model_len=131072"]}  # no model shape
    phase = estimate(plan_of(doc)).rollout
    assert phase is not None and phase.sequence_kv == 0
    doc["model"] = QWEN7B
    doc["native"] = {"verl": ["data.max_prompt_length=4096", "data.max_response_length=8192"]}
    phase = estimate(plan_of(doc)).rollout
    assert phase is not None and phase.sequence_kv == 0  # they cap requests; max_model_len stays the model's


@pytest.mark.parametrize(("world", "per_node", "tp", "dp", "name", "refused"), [
    (8, 8, 2, 1, None, False),
    (1, 1, 2, 1, None, True),  # verl's default TP 2 on one GPU
    (8, 8, 3, 1, None, True),
    (16, 8, 16, 1, None, False),  # a replica of two whole nodes
    (24, 6, 8, 1, None, True),  # 24 % 8 == 0, but 8 GPUs span nodes of 6 without filling them
    (24, 8, 3, 2, "vllm", True),  # vLLM's data parallel splits each node in groups of TP
    (24, 8, 3, 2, "sglang", False),
    (8, None, 3, 1, None, True),
])
def test_verls_rollout_layout_rules(world: int, per_node: int | None, tp: int, dp: int, name: str | None,
                                    refused: bool) -> None:
    assert (rollout_layout_refusal(world, per_node, tp, dp, 1, name) is not None) == refused


@pytest.mark.parametrize(("heads", "kv", "tp", "name", "refused"), [
    (28, 4, 2, None, None),
    (28, 4, 8, "vllm", "the model's 28 attention heads do not divide by the rollout's tensor parallelism 8 "
                       "(vLLM refuses it"),
    (32, 8, 16, "vllm", None),  # 8 kv heads, each replicated on 2 of the 16 ranks
    (24, 8, 12, None, "the model's 8 kv heads neither divide by the rollout's tensor parallelism 12"),
    (12, 6, 4, "sglang", "the model's 6 kv heads neither divide by the rollout's tensor parallelism 4 "
                         "nor divide it (SGLang"),
    (40, None, 8, None, None),  # kv heads default to the heads
    (28, 4, 8, "hf", None),  # verl's hf rollout splits no heads
    (None, None, 3, "vllm", None),  # heads not stated: no rule on a guess
    (7, 7, 1, "vllm", None),
])
def test_the_rollout_splits_whole_heads_as_vllm_requires(heads: int | None, kv: int | None, tp: int,
                                                         name: str | None, refused: str | None) -> None:
    """vLLM's `verify_with_parallel_config` (heads % TP) and `QKVParallelLinear` (kv heads
    split or replicated whole), in `engines.verl.rollout_heads_refusal`."""
    found = rollout_heads_refusal(heads, kv, tp, name)
    assert found == refused if refused is None else found is not None and found.startswith(refused)
    if found is not None:
        assert found.endswith({28: "∈ {1, 2, 4, 28}", 24: "∈ {1, 2, 4, 8, 24}", 12: "∈ {1, 2, 3, 6, 12}"}[heads or 0])


def test_plan_shows_heads_the_rollout_cannot_split() -> None:
    """Plan's rollout line carries the heads rule where the recipe states the heads, and only there."""
    doc = rl_doc(rollout_memory=0.6)
    doc["model"] = {"params": PSI, "heads": 28, "kv_heads": 4}
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=8"]}
    est = estimate(plan_of(doc))
    assert est.rollout is not None and est.rollout.refused is not None
    assert est.rollout.refused.startswith("the model's 28 attention heads do not divide by the rollout's "
                                          "tensor parallelism 8")
    assert est.rollout.refused in text(est, [])
    doc["model"] = {"params": PSI}
    assert estimate(plan_of(doc)).rollout.refused is None  # type: ignore[union-attr]


def test_plan_shows_a_layout_verl_refuses_and_advises_the_rollouts_tp() -> None:
    doc = rl_doc(rollout_memory=0.6)
    doc["cluster"]["gpus_per_node"] = 1
    doc["batch"] = {"micro": 4, "global": 40}
    doc["rl"]["prompts_per_step"] = 8
    plan = plan_of(doc)
    est = estimate(plan)
    assert est.rollout is not None and est.rollout.refused is not None
    assert est.rollout.refused.startswith("1 GPUs are not a multiple of the rollout's tensor × data × "
                                          "pipeline parallelism 2 × 1 × 1 = 2")
    assert est.rollout.refused in text(est, []) and as_json(est)["rollout"]["refused"] == est.rollout.refused
    (line,) = advise(plan)
    assert line.startswith("verl would not start: 1 GPUs") and "tensor_model_parallel_size" in line
    doc["native"] = {"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]}
    assert estimate(plan_of(doc)).rollout.refused is None  # type: ignore[union-attr]
