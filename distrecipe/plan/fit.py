"""`batch.micro: auto` by memory: the largest micro-batch that fits, accumulation follows.

With the global batch fixed and both micro and accumulation left `auto`, the batch
algebra alone would pick accumulation 1 and the largest micro-batch, which for an 8B
model at 8K tokens needs several times a GPU. When the recipe says enough to judge
memory (parameters, shape, `batch.seq_len`, `cluster.gpu_memory`), the resolver asks
this module instead: every micro-batch that divides the samples each rank takes per
step, largest first, estimated exactly as `distrecipe plan` does, and the first that
needs at most `gpu_memory × (1 − AUTO_HEADROOM)` wins. Under verl only the training
phase depends on the micro-batch, so that is what is judged, with the rollout engine's
share included when it is kept through training (`rl.free_rollout_memory: false`);
a rollout phase that does not fit is `plan`'s to report, whatever the micro-batch.
"""

from __future__ import annotations

from distrecipe.job import Plan
from distrecipe.plan.allocator import AUTO_HEADROOM
from distrecipe.plan.report import estimate
from distrecipe.plan.units import gb
from distrecipe.translator.resolve import resolve


def judgeable(plan: Plan) -> bool:
    """Whether memory can be estimated at all: a size, a shape, a sequence, a GPU."""
    m = plan.recipe.model
    return None not in (m.params, m.hidden_size, m.layers, m.heads, m.vocab, plan.recipe.batch.seq_len,
                        plan.gpu_memory) and plan.recipe.cluster.device == "gpu"


def largest_micro(plan: Plan) -> Plan:
    """`plan` with the largest fitting micro-batch and the accumulation it implies, and
    both choices explained in the provenance. Micro 1 when none fits (`plan` then says
    what else to change)."""
    assert plan.gpu_memory is not None  # judgeable() is the caller's guard
    per_rank = plan.batch.global_ // plan.dims.dp
    limit = plan.gpu_memory * (1 - AUTO_HEADROOM)
    tried: list[tuple[int, float]] = []
    for micro in sorted((d for d in range(1, per_rank + 1) if per_rank % d == 0), reverse=True):
        trial = _with_micro(plan, micro)
        need = estimate(trial).training_need
        if need <= limit:
            bigger = f"; micro {tried[-1][0]} would need {gb(tried[-1][1])}" if tried else ""
            why = (f"largest that fits {gb(plan.gpu_memory)} with {AUTO_HEADROOM:.0%} headroom: "
                   f"needs {gb(need)}{bigger}")
            return _chosen(trial, why)
        tried.append((micro, need))
    return _chosen(_with_micro(plan, 1), f"none fits {gb(plan.gpu_memory)} with {AUTO_HEADROOM:.0%} headroom "
                             f"(micro 1 needs {gb(tried[-1][1])}): see distrecipe plan")


def _with_micro(plan: Plan, micro: int) -> Plan:
    """The recipe resolved with `micro` answering its `batch.micro: auto`."""
    return resolve(plan.recipe, detected_gpus=plan.dims.gpus_per_node, micro=micro)


def _chosen(plan: Plan, why: str) -> Plan:
    plan.provenance["batch.micro"] = why
    batch = plan.batch
    plan.provenance["batch.accumulation"] = (f"global / (micro × DP) = {batch.global_} / "
                                             f"({batch.micro} × {plan.dims.dp}), micro chosen for memory")
    return plan
