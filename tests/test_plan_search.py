"""`plan --search`: every candidate fits, the ranking is by step time, and the winner
written with `--write` loads back to exactly the plan the search ranked first."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path

from distrecipe.api import load_plan
from distrecipe.plan.search import search
from distrecipe.recipe import plan_values
from distrecipe.translator.load import load_recipe
from distrecipe.translator.targets import emitted_targets
from tests.conftest import RECIPES, Result
from tests.test_fast_path import run_probe

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
SET_GPU = ("cluster.gpu=h100",)


def test_every_ranked_recipe_fits_and_is_ordered_by_step_time() -> None:
    recipe = load_recipe(SEED, SET_GPU)
    result = search(recipe, gpus_per_node=8)
    assert result.ranked and result.tried > len(result.ranked)  # some do not fit: DDP, for one
    seconds = [c.seconds for c in result.ranked]
    assert seconds == sorted(seconds)
    for candidate in result.ranked:
        est = candidate.estimate
        assert est.fits and est.plan.global_batch == 256
        assert est.plan.micro * est.plan.accumulation * est.plan.dp == 256


def test_host_memory_limits_offload() -> None:
    unlimited = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    tight = search(load_recipe(SEED, (*SET_GPU, "cluster.cpu_memory=1GB")), gpus_per_node=8)
    assert any(c.estimate.plan.offload.enabled for c in unlimited.ranked)
    assert not any(c.estimate.plan.offload.enabled for c in tight.ranked)


def test_written_winner_resolves_to_the_ranked_plan(cli: Callable[..., Result], tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    result = cli("plan", SEED, "--set", "cluster.gpu=h100", "--search", "--write", best)
    assert result.code == 0, result.err
    first = result.out.splitlines()[1]
    assert first.startswith("  1. ")
    winner = search(load_recipe(SEED, SET_GPU), gpus_per_node=8).ranked[0]
    assert plan_values(load_plan(best)) == plan_values(winner.estimate.plan)


def test_search_needs_a_gpu_model(cli: Callable[..., Result]) -> None:
    result = cli("plan", SEED, "--search")
    assert result.code == 2
    assert "cluster.gpu or cluster.peak_tflops" in result.err


def test_search_loads_no_engine() -> None:
    assert run_probe("plan", str(SEED), "--set", "cluster.gpu=h100", "--search") == "HEAVY:"


def test_model_parallel_layouts_are_what_each_engine_runs() -> None:
    """FSDP2 under torchrun (torchtitan) takes tensor, pipeline and context parallel;
    DeepSpeed AutoTP or Ulysses, never both, never a pipeline; every candidate's
    emitted targets accept it (no error finding)."""
    result = search(load_recipe(SEED, SET_GPU), gpus_per_node=8)
    plans = [c.estimate.plan for c in result.ranked]
    assert any(p.strategy == "fsdp" and p.pipeline > 1 for p in plans)
    assert any(p.strategy == "fsdp" and p.sequence > 1 for p in plans)
    assert any(p.strategy == "zero" and p.sequence > 1 for p in plans)
    for p in plans:
        if p.strategy == "zero":
            assert p.pipeline == 1 and (p.tensor == 1 or p.sequence == 1)
        if p.pipeline > 1:
            assert p.accumulation >= p.pipeline
        for target in emitted_targets(p):
            module = import_module(f"distrecipe.translator.{target}")
            assert not [f for f in module.findings(p) if f.severity == "error"], p


def test_accelerate_fsdp_searches_no_pipeline() -> None:
    recipe = load_recipe(SEED, (*SET_GPU, "launch.backend=accelerate", "strategy=fsdp"))
    plans = [c.estimate.plan for c in search(recipe, gpus_per_node=8).ranked]
    assert plans and all(p.pipeline == 1 for p in plans)
    assert any(p.sequence > 1 for p in plans)
