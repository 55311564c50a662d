"""The reference trainer's `--model recipe`: the recipe's shape, or a refusal, never something else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.job import plan_dict
from tests.measured import TINY

tiny_train = pytest.importorskip("distrecipe.launch.tiny_train")  # imports torch


def settings_of(overrides: list[str]) -> tuple[Any, dict[str, Any]]:
    plan = json.loads(json.dumps(plan_dict(load_plan(TINY, overrides))))
    return tiny_train.TrainSettings.from_plan(plan, steps=2, deepspeed=False, model="recipe"), plan


def test_the_recipe_model_has_the_plans_parameter_count() -> None:
    settings, plan = settings_of([])
    model = tiny_train.build_recipe_model(settings)
    assert sum(p.numel() for p in model.parameters()) == plan["recipe"]["model"]["params"]


@pytest.mark.parametrize(("overrides", "says"), [
    (["activation_checkpointing=selective"], "activation_checkpointing selective is not reproduced"),
    (["parallel.tensor=2", "batch.micro=4", "batch.accumulation=2"], "parallel.tensor 2 is not reproduced"),
    (["model.kv_heads=2"], "grouped-query heads"),
])
def test_what_it_cannot_reproduce_is_refused(overrides: list[str], says: str) -> None:
    settings, plan = settings_of(overrides)
    refusal = settings.refusal(plan)
    assert refusal is not None and says in refusal


def test_full_recomputation_is_reproduced() -> None:
    settings, plan = settings_of(["activation_checkpointing=full"])
    assert settings.refusal(plan) is None
    assert all(block.recompute for block in tiny_train.build_recipe_model(settings)
               if isinstance(block, tiny_train.Block))
