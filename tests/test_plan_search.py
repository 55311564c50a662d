"""`plan --search`: every candidate fits, the ranking is by step time, and the winner
written with `--write` loads back to exactly the plan the search ranked first."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from distrecipe.api import load_plan
from distrecipe.errors import RecipeError
from distrecipe.job import Plan, plan_values
from distrecipe.plan.search import TIE, preference, rank, search, why
from distrecipe.translator.load import load_recipe, recipe_from_text
from distrecipe.translator.resolve import resolve
from distrecipe.translator.targets import TARGETS, EmitOptions, emitted_targets
from tests.conftest import RECIPES, Result
from tests.strategies import recipe_documents, to_yaml
from tests.test_fast_path import run_probe

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
SET_GPU = ("cluster.gpu=h100",)


def test_every_ranked_recipe_fits_and_is_ordered_by_step_time() -> None:
    """Fastest first; within `TIE` of a group's fastest, the stated preferences decide."""
    recipe = load_recipe(SEED, SET_GPU)
    result = search(recipe, gpus_per_node=8)
    assert result.ranked and result.tried > len(result.ranked)  # some do not fit: DDP, for one
    assert result.ranked == rank(list(reversed(result.ranked)))
    fastest = min(c.seconds for c in result.ranked)
    assert result.ranked[0].seconds <= fastest * (1 + TIE)
    for before, after in zip(result.ranked, result.ranked[1:], strict=False):
        assert after.seconds > before.seconds or preference(before) <= preference(after) \
            or after.seconds >= before.seconds / (1 + TIE)
    for candidate in result.ranked:
        est = candidate.estimate
        assert est.fits and est.plan.batch.global_ == 256
        assert est.plan.batch.micro * est.plan.batch.accumulation * est.plan.dims.dp == 256


def test_host_memory_limits_offload() -> None:
    unlimited = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    tight = search(load_recipe(SEED, (*SET_GPU, "cluster.cpu_memory=1GB")), gpus_per_node=8)
    assert any(c.estimate.plan.recipe.offload.enabled for c in unlimited.ranked)
    assert not any(c.estimate.plan.recipe.offload.enabled for c in tight.ranked)


def test_written_winner_resolves_to_the_ranked_plan(cli: Callable[..., Result], tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    result = cli("plan", SEED, "--set", "cluster.gpu=h100", "--search", "--write", best)
    assert result.code == 0, result.err
    first = result.out.splitlines()[1]
    assert first.startswith("  1. ")
    winner = search(load_recipe(SEED, SET_GPU), gpus_per_node=8).ranked[0]
    assert plan_values(load_plan(best)) == plan_values(winner.estimate.plan)


def test_search_without_a_gpu_model_ranks_by_fit_and_traffic(cli: Callable[..., Result]) -> None:
    """The seed names no GPU: no step time, but what fits and what each rank sends can be
    judged, and the search ranks by that and says so, instead of refusing."""
    result = cli("plan", SEED, "--search")
    assert result.code == 0, result.err
    head, *lines = result.out.splitlines()
    assert "fit 80 GB; no cluster.gpu or cluster.peak_tflops, so no step time" in head
    assert "least traffic per rank first" in head
    ranked = search(load_recipe(SEED), gpus_per_node=8)
    assert not ranked.timed and all(c.estimate.step is None for c in ranked.ranked)
    sent = [round(c.traffic) for c in ranked.ranked]
    assert sent == sorted(sent) and sent[0] < sent[-1]
    assert "s/step" not in lines[0] and " GB per rank per step; needs " in lines[0]
    timed = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    assert timed.timed and len(timed.ranked) == len(ranked.ranked)  # the same recipes fit


def test_search_needs_a_memory_budget(cli: Callable[..., Result], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(SEED.read_text().replace(", gpu_memory: 80GB", ""))
    result = cli("plan", recipe, "--search")
    assert result.code == 2
    assert "plan --search needs cluster.gpu_memory (or cluster.gpu)" in result.err


def test_search_loads_no_engine() -> None:
    assert run_probe("plan", str(SEED), "--set", "cluster.gpu=h100", "--search") == "HEAVY:"


def test_model_parallel_layouts_are_what_each_engine_runs() -> None:
    """FSDP2 under torchrun (torchtitan) takes tensor, pipeline and context parallel;
    DeepSpeed AutoTP or Ulysses, never both, never a pipeline; every candidate's
    emitted targets accept it (no error finding)."""
    result = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    plans = [c.estimate.plan for c in result.ranked]
    assert any(p.recipe.strategy == "fsdp" and p.dims.pipeline > 1 for p in plans)
    assert any(p.recipe.strategy == "fsdp" and p.dims.sequence > 1 for p in plans)
    assert any(p.recipe.strategy == "zero" and p.dims.sequence > 1 for p in plans)
    for p in plans:
        if p.recipe.strategy == "zero":
            assert p.dims.pipeline == 1 and (p.dims.tensor == 1 or p.dims.sequence == 1)
        if p.dims.pipeline > 1:
            assert p.batch.accumulation >= p.dims.pipeline
        for target in emitted_targets(p):
            module = import_module(f"distrecipe.translator.{target}")
            assert not [f for f in module.findings(p) if f.severity == "error"], p


def test_accelerate_fsdp_searches_no_pipeline() -> None:
    recipe = load_recipe(SEED, (*SET_GPU, "launch.backend=accelerate", "strategy=fsdp"))
    plans = [c.estimate.plan for c in search(recipe, gpus_per_node=8).ranked]
    assert plans and all(p.dims.pipeline == 1 for p in plans)
    assert any(p.dims.sequence > 1 for p in plans)


def test_seed_search_is_the_documented_one() -> None:
    """docs/plan.md's figures: the engines' judgement drops none of the seed's candidates;
    pipeline stages that carry the embedding or the head fit less often than an even split
    of Ψ said (2,040 before), a *tight* verdict is not offered (2,032 before), and the torch
    family's plans take the wide band (1,987 before)."""
    result = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    assert (result.tried, len(result.ranked)) == (3552, 1839)
    best = result.ranked[0].estimate.plan
    assert (best.recipe.strategy, best.stage, best.dims.sequence, best.recipe.activation_checkpointing) == (
        "fsdp", 3, 2, "none")


def _verl_warnings(plan: Plan) -> set[str] | None:
    try:
        output = TARGETS["verl"](plan, EmitOptions())
    except RecipeError:
        return None
    return {f.code for f in output.findings if f.severity == "warning"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=recipe_documents(strategies=("zero", "fsdp"), rl=True))
def test_rl_search_names_only_what_verl_runs(doc: dict[str, Any]) -> None:
    """Under verl the search offers no layout verl refuses or maps to something else
    (ZeRO-1 is FSDP2 stage 2, optimizer-only offload moves the parameters too)."""
    doc["cluster"]["gpu"] = "h100"
    recipe = recipe_from_text(to_yaml(doc))
    own = resolve(recipe)
    own_warnings = _verl_warnings(own)
    assert own_warnings is not None
    for candidate in search(recipe, own.dims.gpus_per_node).ranked:
        found = _verl_warnings(candidate.estimate.plan)
        assert found is not None and found <= own_warnings, (candidate.overrides(), found)


def test_rl_search_drops_zero1_and_optimizer_only_offload() -> None:
    recipe = load_recipe(SEED, (*SET_GPU, "rl.rollout_n=4", "rl.prompts_per_step=64"))
    plans = [c.estimate.plan for c in search(recipe, gpus_per_node=8).ranked]
    assert plans and {p.stage for p in plans} == {2, 3}
    assert all(p.recipe.offload.params != "none" or p.recipe.offload.optimizer == "none" for p in plans)
    assert all(p.recipe.activation_checkpointing != "selective" for p in plans)


def test_megatron_candidates_say_whether_the_optimizer_is_distributed() -> None:
    """Megatron's stage 0 and stage 1 are two candidates; each line says which it is."""
    recipe = load_recipe(SEED, ("cluster.gpu=h100", "strategy=megatron", "stage=1"))
    ranked = search(recipe, gpus_per_node=8).ranked
    lines = [why(candidate, 80e9) for candidate in ranked]
    assert {c.estimate.plan.stage for c in ranked} == {0, 1}
    assert len(set(lines)) == len(lines)
    for candidate, line in zip(ranked, lines, strict=True):
        words = "Megatron (distributed optimizer)" if candidate.estimate.plan.stage else \
            "Megatron (no distributed optimizer)"
        assert line.startswith(words + ", ")


def test_the_search_discriminates(cli: Callable[..., Result]) -> None:
    """Candidates differ where the engines differ: the top ten are not one step time, and
    each line says what decides its place (matmul size, exposed traffic of what is sent)."""
    import json

    data = json.loads(cli("plan", SEED, "--set", "cluster.gpu=h100", "--search", "--top", "10",
                          "--format", "json").out)
    assert len(data["candidates"]) == 10 and data["fitting"] > 10
    seconds = [c["seconds"] for c in data["candidates"]]
    assert len({round(s, 3) for s in seconds}) >= 4
    first = data["candidates"][0]
    assert first["rank"] == 1 and first["fits"] is True and first["set"]["batch.global"] == 256
    assert first["seconds"] == pytest.approx(first["compute_seconds"] + first["bubble_seconds"]
                                             + first["exposed_seconds"] + first["offload_seconds"])
    text = cli("plan", SEED, "--set", "cluster.gpu=h100", "--search", "--top", "3").out
    assert len([line for line in text.splitlines() if line.startswith("  ")]) == 3
    assert "at matmul size" in text and "GB sent" in text
    assert cli("plan", SEED, "--top", "3").code == 2  # --top needs --search
