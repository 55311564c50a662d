"""Any valid recipe plans without a traceback, and the numbers keep the table's laws."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from distrecipe.plan import render
from distrecipe.plan.advice import advise
from distrecipe.plan.engine import POINTS
from distrecipe.plan.memory import local_params
from distrecipe.plan.report import compare, estimate
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
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
    unsharded = replace(plan, shard_group=plan.dp, offload=replace(plan.offload, optimizer="none",
                                                                   params="none"))
    rows = compare(unsharded)
    if plan.precision != "fp32":
        for row, (whole, split) in zip(rows, TABLE, strict=True):
            assert row.formula.total == pytest.approx(whole * psi + split * psi / plan.dp, rel=1e-12)
    totals = [row.formula.total for row in rows[:4]]
    assert totals == sorted(totals, reverse=True)  # each stage shards one more part
