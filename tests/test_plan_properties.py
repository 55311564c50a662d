"""Any valid recipe plans without a traceback, and the numbers keep the table's laws."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrecipe.api import load_plan
from distrecipe.errors import RecipeError
from distrecipe.job import RESOLVED_ONLY, Plan, plan_values
from distrecipe.plan import render
from distrecipe.plan.advice import advise, advised
from distrecipe.plan.engine import POINTS
from distrecipe.plan.memory import local_params
from distrecipe.plan.report import compare, estimate, variants
from distrecipe.recipe import Offload
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve, variant
from distrecipe.translator.targets import TARGETS, EmitOptions, emitted_targets
from tests.emit_strategies import engine_documents, plan_of
from tests.strategies import recipe_documents, to_yaml

TABLE = [(16, 0), (4, 12), (2, 14), (0, 16), (6, 12)]
"""(not sharded, sharded ÷ N) bytes per parameter of DDP, ZeRO-1, -2, -3 (or FSDP2), Megatron."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=recipe_documents(strategies=("ddp", "zero", "fsdp", "megatron")))
def test_every_valid_recipe_plans(doc: dict[str, Any]) -> None:
    plan = resolve(recipe_from_text(to_yaml(doc)))
    est = estimate(plan)
    json.dumps(render.as_json(est, advise(plan)))
    assert render.text(est, advise(plan)).count("\n") > 10
    assert est.engine.peak >= est.engine.total("rest") >= 0
    for point in POINTS:
        assert all(size >= 0 for size in est.engine.points[point].values())
    assert est.traffic_engine.total >= 0 and est.traffic_formula.total >= 0

    psi = local_params(plan)
    unsharded = variant(plan, parallel={"shard_group": "all"}, offload=Offload())
    rows = [estimate(variant) for variant in variants(unsharded)]  # the seed's table, unfiltered
    if plan.precision != "fp32":
        for row, (whole, split) in zip(rows, TABLE, strict=True):
            assert row.formula.total == pytest.approx(whole * psi + split * psi / plan.dims.dp, rel=1e-12)
    totals = [row.formula.total for row in rows[:4]]
    assert totals == sorted(totals, reverse=True)  # each stage shards one more part



def named(plan: Plan) -> list[Plan]:
    """Every recipe the report names: the `--compare` rows (which the "fits" advice picks
    from) and the lever combination "it fits with" advises."""
    rows = [row.plan for row in compare(plan)]
    trial = None if estimate(plan).fits else advised(plan)
    return rows + ([trial] if trial is not None else [])


def as_sets(plan: Plan, variant: Plan) -> list[str]:
    """The variant as `--set` keys on the recipe, the recipe's launcher pinned."""
    old, new = plan_values(plan), plan_values(variant)
    changed = {key: value for key, value in new.items() if old.get(key) != value and key not in RESOLVED_ONLY}
    changed["launch.backend"] = plan.backend
    return [f"{key}={json.dumps(value)}" for key, value in changed.items()]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.one_of(engine_documents(rl=True), engine_documents()), memory=st.sampled_from(["8GB", "24GB", "80GB"]),
       rollout_tp=st.sampled_from([None, 1, 4]))
def test_the_report_names_only_what_the_recipes_engine_runs(
        doc: dict[str, Any], memory: str, rollout_tp: int | None) -> None:
    """Each compare row and advised change, applied to the recipe with `--set`, resolves
    and compiles for the target(s) its job reads with no error finding (DR208, DR220)."""
    doc["cluster"]["gpu_memory"] = memory
    if rollout_tp is not None:
        doc["native"] = {"verl": [f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout_tp}"]}
    try:
        plan = plan_of(doc)
    except RecipeError:
        return  # rl drawn to break one of verl's batch rules: no report to check
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated.yaml"
        path.write_text(to_yaml(doc), encoding="utf-8")
        for variant in named(plan):
            applied = load_plan(path, as_sets(plan, variant))
            assert (applied.recipe.strategy, applied.stage, applied.recipe.offload) == (
                variant.recipe.strategy, variant.stage, variant.recipe.offload)
            for target in emitted_targets(applied):
                output = TARGETS[target](applied, EmitOptions())  # raises on an error finding
                assert not [f for f in output.findings if f.severity == "error"], target
