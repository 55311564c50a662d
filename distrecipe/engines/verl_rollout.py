"""verl's rollout engine as a recipe sets it: what `native.verl` states, and whether verl's
workers can lay the rollout out on the plan's GPUs.

The recipe has no key for the rollout's degrees, dtype or length: `native.verl` states them
(read as Hydra reads the lines) or verl's defaults apply. The verl emitter's DR221, lint's
DR354 on a recipe and `plan`'s rollout phase all read them here, so they see one rollout.
This is not `engines.verl` because reading a line needs `engines.hydra`, which reads verl's
entry points from `engines.verl`.
"""

from __future__ import annotations

from collections.abc import Mapping

from distrecipe.engines.hydra import verl_pairs
from distrecipe.engines.verl import (
    ROLLOUT_DP,
    ROLLOUT_NAME,
    ROLLOUT_PP,
    ROLLOUT_TP,
    ROLLOUT_TP_DEFAULT,
    rollout_heads_refusal,
    rollout_layout_refusal,
)
from distrecipe.job import Plan
from distrecipe.keys import joined
from distrecipe.source import KeyPath


def rollout_layout(plan: Plan) -> tuple[str, KeyPath] | None:
    """verl's refusal of the rollout engine's layout on the plan's GPUs or of its split of the
    model's stated heads (`engines.verl.rollout_heads_refusal`), and the recipe key to point
    at (the `native.verl` line stating the rollout's tensor parallelism, else
    `cluster.gpus_per_node` or `model.heads`); None when verl lays it out or the recipe has
    no `rl`, or OpenRLHF runs it (its launch line gives every GPU its own vLLM engine,
    `--vllm.tensor_parallel_size 1`, which any GPU count and head count hold).

    The recipe has no key for the rollout's degrees: `native.verl` states them or verl's
    defaults apply (TP 2, DP and PP 1), as `plan` counts its weights."""
    if plan.recipe.rl is None or plan.backend == "openrlhf":
        return None
    stated = native_stated(plan)
    tp, dp, pp = (stated_degree(stated, path, default)
                  for path, default in ((ROLLOUT_TP, ROLLOUT_TP_DEFAULT), (ROLLOUT_DP, 1), (ROLLOUT_PP, 1)))
    name = stated.get(joined(ROLLOUT_NAME), (0, None))[1]
    line = stated.get(joined(ROLLOUT_TP))
    at_tp: KeyPath | None = None if line is None else ("native", "verl", line[0])
    refused = rollout_layout_refusal(plan.dims.world, plan.dims.gpus_per_node, tp, dp, pp, name)
    if refused is not None:
        return refused, at_tp or ("cluster", "gpus_per_node")
    refused = rollout_heads_refusal(plan.recipe.model.heads, plan.recipe.model.kv_heads, tp, name)
    if refused is not None:
        return refused, at_tp or ("model", "heads")
    return None


def native_stated(plan: Plan) -> dict[str, tuple[int, object]]:
    """What `native.verl` states: each dotted key's (index of its line, value), the last
    one winning, as Hydra takes it; `~key` deletes what an earlier line stated."""
    stated: dict[str, tuple[int, object]] = {}
    for index, (prefix, key, value) in enumerate(verl_pairs(plan.recipe.native.verl)):
        if prefix == "~":
            stated.pop(key, None)
        else:
            stated[key] = (index, value)
    return stated


def stated_degree(stated: Mapping[str, tuple[int, object]], path: KeyPath, default: int) -> int:
    """A degree `native.verl` states as a positive integer, else verl's default."""
    value = stated.get(joined(path), (0, None))[1]
    return value if type(value) is int and value >= 1 else default
