"""`parallel.virtual_stages`: Megatron's interleaved 1F1B, from the recipe key to verl's
config, back through import, and into `plan`'s bubble, traffic and activations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import find, settings

from distrecipe.errors import RecipeError
from distrecipe.plan.activations import pipeline_in_flight, plan_activations
from distrecipe.plan.search import search
from distrecipe.plan.steptime import bubble, pipeline_bytes
from distrecipe.translator import deepspeed, verl
from distrecipe.translator.load import load_recipe
from tests.conftest import RECIPES, Result
from tests.emit_strategies import engine_documents, plan_of
from tests.test_verl_emit import QUIET, check_numbers, composed

VPP = "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size"


def megatron(**changes: Any) -> dict[str, Any]:
    """verl's Megatron actor on 8 GPUs: pipeline 2 × 4 DP, micro 2 × accumulation 8 = 64."""
    doc: dict[str, Any] = {
        "recipe": 1, "name": "t",
        "model": {"params": 8e9, "hidden_size": 4096, "layers": 36, "heads": 32, "kv_heads": 8,
                  "intermediate_size": 12288, "vocab": 151936},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100", "gpu_memory": "80GB"},
        "strategy": "megatron", "parallel": {"pipeline": 2, "virtual_stages": 2},
        "batch": {"micro": 2, "accumulation": 8, "global": 64, "seq_len": 4096},
        "rl": {"rollout_n": 4, "prompts_per_step": 16},
    }
    for key, value in changes.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    return doc


@pytest.mark.parametrize(("changes", "message"), [
    ({"parallel": {"pipeline": 1, "virtual_stages": 2}, "batch": {"micro": 2, "accumulation": 4, "global": 64}},
     "parallel.pipeline is 1"),
    ({"parallel": {"virtual_stages": 4}}, "36 does not split into pipeline × virtual_stages = 2 × 4 = 8"),
    ({"batch": {"micro": 2, "accumulation": 3, "global": 24}, "rl": {"rollout_n": 4, "prompts_per_step": 6}},
     "batch.accumulation is 3"),
])
def test_interleaving_preconditions_are_refused_at_resolve(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        plan_of(megatron(**changes))


def test_refusal_is_one_positioned_line(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    path = write("r.yaml", yaml.safe_dump(megatron(parallel={"pipeline": 2, "virtual_stages": 4})))
    result = cli("resolve", path)
    assert result.code == 2
    line = next(text for text in result.err.splitlines() if "error:" in text)
    assert line.startswith(f"{path}:")
    assert "virtual_stages that do: 1, 2, 3, 6, 9 or 18" in line


def test_schema_refuses_zero_virtual_stages(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    result = cli("resolve", write("r.yaml", yaml.safe_dump(megatron(parallel={"virtual_stages": 0}))))
    assert result.code == 2 and "virtual_stages" in result.err


def test_token_packed_micro_batches_skip_the_group_rule() -> None:
    """verl pads a token-packed step's micro-batch count up to a multiple of the pipeline."""
    plan = plan_of(megatron(batch={"micro": "auto", "accumulation": "auto", "global": 64,
                                   "micro_tokens": 8192}))
    assert plan.dims.virtual_stages == 2 and plan.batch.accumulation == 1


def test_verl_override_and_other_targets() -> None:
    plan = plan_of(megatron())
    assert (VPP, 2) in verl.overrides(plan)
    assert not [f for f in verl.findings(plan) if f.severity == "error"]
    assert not any(key == VPP for key, _ in verl.overrides(plan_of(megatron(parallel={"virtual_stages": 1}))))
    ds = {f.code: f.message for f in deepspeed.findings(plan)}
    assert "virtual_stages 2" in ds["DR218"]
    zero = plan_of(megatron(strategy="zero", parallel={"pipeline": 2, "virtual_stages": 2}))
    assert "virtual_stages 2" in {f.code: f.message for f in deepspeed.findings(zero)}["DR208"]


@pytest.mark.slow
@QUIET
def test_verl_composes_validates_and_splits_interleaving(judge: Any) -> None:
    plan = plan_of(megatron())
    cfg = composed(judge, plan)
    judge.validate(cfg)
    check_numbers(judge, plan, cfg)
    assert cfg.actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size == 2
    # The group rule the resolver enforces is the one verl's Megatron engine asserts.
    odd = [line.replace("ppo_micro_batch_size_per_gpu=2", "ppo_micro_batch_size_per_gpu=16")
           for line in verl.overrides_text(plan).splitlines()]
    with pytest.raises(AssertionError, match="divisible by 2"):
        judge.split(judge.compose(odd))


def test_import_maps_verls_key_back(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    plan = plan_of(megatron())
    path = write("verl_overrides.txt", verl.overrides_text(plan))
    result = cli("import", path)
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["parallel"]["virtual_stages"] == 2
    assert not any(VPP in line for line in recipe.get("native", {}).get("verl", []))


def test_native_key_contradicting_virtual_stages_is_refused() -> None:
    with pytest.raises(RecipeError, match=r"parallel\.virtual_stages"):
        plan_of(megatron(native={"verl": [f"{VPP}=3"]}))
    assert plan_of(megatron(native={"verl": [f"{VPP}=2"]})).dims.virtual_stages == 2


def test_bubble_divides_by_v_and_traffic_multiplies() -> None:
    """Narayanan et al. 2021 §2.2.2: idle (p − 1)/(v·m) of the ideal step; v times the sends."""
    plain, interleaved = plan_of(megatron(parallel={"virtual_stages": 1})), plan_of(megatron())
    idle = [b / (1 - b) for b in (bubble(plain), bubble(interleaved))]
    assert idle == pytest.approx([1 / 8, 1 / 16])
    assert pipeline_bytes(interleaved) == 2 * pipeline_bytes(plain)


def test_first_stage_holds_korthikantis_interleaved_factor() -> None:
    """Megatron's warm-up: the first rank holds p·v + p − 1 chunks of L/(p·v) layers, that is
    p·(1 + (p − 1)/(p·v)) micro-batches of L/p layers (Korthikanti 2022 §4.2.3)."""
    p, v, layers = 2, 3, 36
    small_head = {"vocab": 32000}  # so that the first stage, not the last, has the highest peak
    plan = plan_of(megatron(model=small_head, parallel={"pipeline": p, "virtual_stages": v}))
    plain = plan_of(megatron(model=small_head, parallel={"pipeline": p, "virtual_stages": 1}))
    assert pipeline_in_flight(plan) == p * v + p - 1 == 7
    assert pipeline_in_flight(plan, last=True) == (v - 1) * p + 1
    assert pipeline_in_flight(plan) * layers / (p * v) == pytest.approx(p * (1 + (p - 1) / (p * v)) * layers / p)
    first, before = plan_activations(plan)[0], plan_activations(plain)[0]
    assert first.head == before.head == 0
    assert first.layers / before.layers == pytest.approx(7 * 6 / (2 * 18))


def test_search_tries_two_virtual_stages_under_megatron_only() -> None:
    recipe = load_recipe(RECIPES / "seed-8b-32gpu-zero2.yaml",
                         ("cluster.gpu=h100", "strategy=megatron", "stage=1"))
    plans = [c.estimate.plan for c in search(recipe, gpus_per_node=8).ranked]
    interleaved = [p for p in plans if p.dims.virtual_stages == 2]
    assert interleaved and all(p.dims.pipeline == 2 and p.batch.accumulation % p.dims.pipeline == 0 for p in interleaved)
    seed = search(load_recipe(RECIPES / "seed-8b-32gpu-zero2.yaml", ("cluster.gpu=h100",)), gpus_per_node=8)
    assert all(c.estimate.plan.dims.virtual_stages == 1 for c in seed.ranked)


def test_the_emitter_property_tests_draw_interleaved_pipelines() -> None:
    """`engine_documents` (test_targets_judged, test_verl_emit) draws virtual stages, and
    only in combinations resolve accepts."""
    doc = find(engine_documents(rl=True), lambda d: d["parallel"].get("virtual_stages", 1) > 1,
               settings=settings(database=None, max_examples=2000))
    plan = plan_of(doc)
    assert plan.recipe.strategy == "megatron" and plan.dims.pipeline > 1 and plan.dims.virtual_stages > 1
    assert plan.batch.accumulation % plan.dims.pipeline == 0
