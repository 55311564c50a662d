"""The engines' refusals of a recipe's layout, raised at the recipe's position.

An engine refuses these only when the model is built, the first batch arrives or the
cluster has started, so `compile` writes nothing and `launch` starts nothing for them:
both raise the same positioned error (exit 2), before lint's other checks.
"""

from __future__ import annotations

from distrecipe.engines.heads import refusal
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.keys import dotted
from distrecipe.recipe import Recipe


def check_split(recipe: Recipe, plan: Plan) -> None:
    """Lint's DR105: tensor parallelism that leaves ranks without an attention head."""
    refused = refusal(plan)
    if refused is not None:
        raise RecipeError(f"DR105 {refused.message}", recipe.at(*refused.keys, "parallel", "model"),
                          keys=refused.keys)


def check_rollout_layout(recipe: Recipe, plan: Plan) -> None:
    """verl's DR221 with the position of what to change: its workers would refuse the rollout
    engine's layout after the cluster starts (`--target all` reports verl as skipped)."""
    from distrecipe.engines.verl_rollout import rollout_layout

    refused = rollout_layout(plan)
    if refused is not None:
        message, key = refused
        raise RecipeError(f"DR221 {message}", recipe.at(dotted(key), "native", "cluster"))
