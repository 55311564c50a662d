"""`batch.micro: auto` by memory: the largest micro-batch that fits, accumulation follows.

With the global batch fixed and both micro and accumulation left `auto`, the batch
algebra alone cannot choose: accumulation 1 and the largest micro-batch would need, for
an 8B model at 8K tokens, several times a GPU. Under `batch.micro_policy:
largest-that-fits` (the default) the micro-batch is chosen here, by memory, which needs
the parameters and shape, `batch.seq_len` and the GPU's memory (`cluster.gpu_memory`,
or what `cluster.gpu` implies); without them the resolver refuses, naming what is
missing (`translator.resolve.memory_inputs_missing`), and `accumulation-1` is the
explicit other meaning. Every micro-batch that divides the samples each rank takes per
step is tried, largest first, estimated exactly as `distrecipe plan` does, and the
first whose verdict is *fits* wins (`verdict.py`): `needed` at the pessimistic end of its
engine family's error band within `gpu_memory` less `cluster.headroom`, so a micro-batch
chosen for the user is never *tight*. Under verl only the training
phase depends on the micro-batch, so that is what is judged, with the rollout engine's
share included when it is kept through training (`rl.free_rollout_memory: false`);
a rollout phase that does not fit is `plan`'s to report, whatever the micro-batch.
"""

from __future__ import annotations

from distrecipe.job import Plan
from distrecipe.plan.report import estimate
from distrecipe.plan.units import gb
from distrecipe.plan.verdict import Verdict, band_text, verdict
from distrecipe.recipe import Recipe
from distrecipe.translator.resolve import memory_inputs_missing, needs_fit, resolve


def judgeable(plan: Plan) -> bool:
    """Whether memory can be estimated at all: a size, a shape, a sequence, a GPU."""
    return not memory_inputs_missing(plan.recipe, plan.gpu_memory)


def fitted(recipe: Recipe, *, detected_gpus: int | None = None, world: int | None = None) -> Plan:
    """`recipe` resolved, its `micro: auto` the largest that fits where the recipe asks so
    (`needs_fit`); without what memory needs, the resolver's error naming it."""
    if not needs_fit(recipe):
        return resolve(recipe, detected_gpus=detected_gpus, world=world)
    base = resolve(recipe, detected_gpus=detected_gpus, world=world, micro=1)
    if not judgeable(base):
        resolve(recipe, detected_gpus=detected_gpus, world=world)  # refuses, naming what is missing
        return base  # one sample per rank per step: micro 1 is the only choice
    return largest_micro(base)


def largest_micro(plan: Plan) -> Plan:
    """`plan` with the largest fitting micro-batch and the accumulation it implies, and
    both choices explained in the provenance. Micro 1 when none fits (`plan` then says
    what else to change)."""
    assert plan.gpu_memory is not None  # judgeable() is the caller's guard
    per_rank = plan.batch.global_ // plan.dims.dp
    tried: list[tuple[int, float]] = []
    room = ""
    for micro in sorted((d for d in range(1, per_rank + 1) if per_rank % d == 0), reverse=True):
        trial = _with_micro(plan, micro)
        judged = estimate(trial)
        need = judged.training_need
        said = verdict(trial, need, exact=judged.rollout.in_training if judged.rollout else 0.0)
        assert said is not None  # the GPU's memory is known
        room = _room(said)
        if said.word == "fits":
            bigger = f"; micro {tried[-1][0]} would need {gb(tried[-1][1])}" if tried else ""
            return _chosen(trial, f"largest that fits {room}: needs {gb(need)} ({band_text(said)}){bigger}")
        tried.append((micro, need))
    return _chosen(_with_micro(plan, 1), f"none fits {room} (micro 1 needs {gb(tried[-1][1])}): "
                                         "see distrecipe plan")


def _room(said: Verdict) -> str:
    """`80 GB`, or `80 GB less headroom 4 GB`, with the error band: what a micro-batch must fit."""
    kept = f" less headroom {gb(said.headroom)}" if said.headroom else ""
    return f"{gb(said.gpu_memory)}{kept} at the top of its error band"


def _with_micro(plan: Plan, micro: int) -> Plan:
    """The recipe resolved with `micro` answering its `batch.micro: auto`."""
    return resolve(plan.recipe, detected_gpus=plan.dims.gpus_per_node, micro=micro)


def _chosen(plan: Plan, why: str) -> Plan:
    plan.provenance["batch.micro"] = why
    batch = plan.batch
    plan.provenance["batch.accumulation"] = (f"global / (micro × DP) = {batch.global_} / "
                                             f"({batch.micro} × {plan.dims.dp}), micro chosen for memory")
    return plan
