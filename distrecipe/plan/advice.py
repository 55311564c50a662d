"""Fit verdict and the seed's decision tree, with the trade-off said in numbers.

The tree (seed, "决策树"): the model fits on one GPU → DDP; otherwise ZeRO / FSDP,
the least sharding that fits (each stage buys memory with traffic or latency); still
not → offload; a single layer too large for one GPU → tensor parallel. Activations do
not shard, so when they alone break the budget the answer is recompute, not a stage.
Trade-offs use the seed's formula numbers ("ZeRO-3 saves 15.5 GB per GPU and costs
15.5 GB more traffic per step"); fitting uses the engine view (`report.Estimate.need`).
"""

from __future__ import annotations

from dataclasses import replace

from distrecipe.model_shapes import llama
from distrecipe.plan.report import Estimate, compare, estimate
from distrecipe.plan.units import gb
from distrecipe.recipe import Offload, Plan


def advise(plan: Plan) -> list[str]:
    """Advice lines for `plan`, most important first."""
    current = estimate(plan)
    lines: list[str] = []
    if current.budget is None:
        return [*lines, "cluster.gpu_memory is not set: cannot say whether it fits"]
    budget = current.budget
    rows = [row for row in compare(plan) if row.plan.strategy != "megatron"]
    pick = _first_fit(rows)
    if pick is None and plan.activation_checkpointing != "full":
        recomputed = [estimate(replace(r.plan, activation_checkpointing="full")) for r in rows]
        pick = _first_fit(recomputed)
        if pick is not None:
            mine = estimate(replace(plan, activation_checkpointing="full"))
            lines.append(
                f"no stage fits with activations of {gb(current.activation)}: turn on "
                f"activation_checkpointing: full (activations {gb(pick.activation)}); "
                + (f"{mine.label} then needs {gb(mine.need)} of {gb(budget)}" if mine.fits else
                   f"then {pick.label} fits with {gb(pick.need)} of {gb(budget)}"))
            if mine.fits and pick.label != mine.label:
                lines.append(f"{pick.label} would fit too with less sharding ({gb(pick.need)}, "
                             f"sending {gb(pick.traffic_engine.total)} per step against "
                             f"{gb(mine.traffic_engine.total)})")
            return lines
    if pick is None:
        offloaded = estimate(replace(rows[3].plan, activation_checkpointing="full",
                                     offload=Offload(optimizer="cpu")))
        if offloaded.fits:
            lines.append(f"nothing fits on the GPUs alone: {offloaded.label} with full "
                         f"recompute needs {gb(offloaded.need)} per GPU and "
                         f"{gb(sum(offloaded.engine.cpu.values()) * plan.gpus_per_node)} "
                         "of host memory per node")
        else:
            lines.append(_tensor_parallel(plan, offloaded))
        return lines
    lines.append(_verdict(current, pick, budget))
    following = _next_stage(rows, current)
    saved = 0.0 if following is None else current.formula.total - following.formula.total
    if following is not None and current.fits and saved > 0:
        extra = following.traffic_formula.total - current.traffic_formula.total
        lines.append(f"{following.label} saves {gb(saved)} per GPU and costs {gb(extra)} more "
                     f"traffic per step; {current.label} already fits: keep {current.label}")
    return lines


def _first_fit(rows: list[Estimate]) -> Estimate | None:
    return next((row for row in rows if row.fits), None)


def _verdict(current: Estimate, pick: Estimate, budget: float) -> str:
    usable = f"{gb(budget)}"
    if current.fits and pick.label == current.label:
        return f"fits: {current.label} needs {gb(current.need)} of {usable}"
    if current.fits:
        return (f"fits: {current.label} needs {gb(current.need)} of {usable}; {pick.label} "
                f"also fits with less sharding ({gb(pick.need)}, sending "
                f"{gb(pick.traffic_engine.total)} per step against "
                f"{gb(current.traffic_engine.total)})")
    return (f"does not fit: {current.label} needs {gb(current.need)} of {usable}; "
            f"{pick.label} fits with {gb(pick.need)}")


def _next_stage(rows: list[Estimate], current: Estimate) -> Estimate | None:
    """The next more sharded row after the current one (ZeRO-2 → ZeRO-3)."""
    labels = [row.label for row in rows]
    if current.label not in labels:
        return None
    index = labels.index(current.label)
    return rows[index + 1] if index + 1 < len(rows) else None


def _tensor_parallel(plan: Plan, best: Estimate) -> str:
    inventory = llama(plan.model)
    layer = "" if inventory is None else (
        f"; one layer alone holds {gb(inventory.block_params * plan.precision_bytes)} of weights")
    return (f"nothing fits even with ZeRO-3, offload and recompute ({gb(best.need)} per GPU)"
            f"{layer}: split layers with tensor parallelism (parallel.tensor)")

