"""Fit verdict and what to change, one lever at a time, with the trade-off in numbers.

When the recipe does not fit, the levers are tried in the order they cost the least:
the micro-batch (accumulation follows, the global batch stays), then checkpointing
(selective, then full), then the ZeRO / FSDP stage (more sharding, more traffic), then
offload (host memory checked against `cluster.cpu_memory`), and only then tensor
parallelism. Under verl the rollout engine's share comes first (`rollout.py`): freeing
it for training where it is kept, and where the rollout phase is what does not fit, the
largest `rl.rollout_memory` that fits, then the actor's offload, then the levers above.
Each level keeps the earlier levers free, and the first combination that fits is the
one advised, in one line: nothing is said about a lever that was not
needed, so the advice cannot contradict itself. When it fits, the next stage's saving
is priced against its traffic. Traffic and memory are the engine view throughout (the
formula view is `plan`'s alone); fitting is `report.Estimate.need`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from distrecipe.model_shapes import llama
from distrecipe.plan.report import Estimate, compare, estimate
from distrecipe.plan.rollout import largest_fraction
from distrecipe.plan.units import gb
from distrecipe.recipe import Offload, Plan, Recompute, Strategy

RECOMPUTE_ORDER: tuple[Recompute, ...] = ("none", "selective", "full")


def advise(plan: Plan) -> list[str]:
    """Advice lines for `plan`, most important first."""
    current = estimate(plan)
    if current.budget is None:
        return ["cluster.gpu_memory is not set: cannot say whether it fits"]
    budget = current.budget
    if current.fits:
        return _when_it_fits(current, budget)
    for trial in _levers(plan):
        est = estimate(trial)
        if est.fits and _host_fits(est):
            return [f"does not fit: {current.label} needs {gb(current.need)} of {gb(budget)}; "
                    f"it fits with {_changes(plan, trial)} ({est.label} then needs {gb(est.need)}"
                    f"{_host(est)})"]
    best = estimate(replace(_most_sharded(plan), micro=1, accumulation=_per_rank(plan),
                            activation_checkpointing="full", offload=Offload(optimizer="cpu")))
    return [_tensor_parallel(plan, best)]


def _when_it_fits(current: Estimate, budget: float) -> list[str]:
    rows = [row for row in compare(current.plan) if row.plan.strategy != "megatron"]
    lines = [f"fits: {current.label} needs {gb(current.need)} of {gb(budget)}"]
    less = next((row for row in rows if row.fits), None)
    if less is not None and less.label != current.label and _rank(rows, less) < _rank(rows, current):
        lines[0] += (f"; {less.label} also fits with less sharding ({gb(less.need)}, sending "
                     f"{gb(less.traffic_engine.total)} per step against "
                     f"{gb(current.traffic_engine.total)})")
    following = _next_stage(rows, current)
    if following is not None and following.need < current.need:
        extra = following.traffic_engine.total - current.traffic_engine.total
        lines.append(f"{following.label} saves {gb(current.need - following.need)} per GPU and "
                     f"{'costs ' + gb(extra) + ' more' if extra > 0 else 'sends ' + gb(-extra) + ' less'} "
                     f"traffic per step; {current.label} already fits: keep {current.label}")
    return lines


def _levers(plan: Plan) -> Iterator[Plan]:
    """The plan changed by one more lever at a time, cheapest first (verl's rollout
    engine's share before all of them, where it is what does not fit)."""
    current = estimate(plan)
    if current.rollout is not None and plan.rl is not None:
        if current.rollout.in_training:
            plan = replace(plan, rl=replace(plan.rl, free_rollout_memory=True))
            yield plan
            current = estimate(plan)
        assert current.rollout is not None and plan.rl is not None
        if current.rollout_binds:
            fraction = largest_fraction(plan, current.rollout)
            lowered = plan
            if fraction is not None and fraction < current.rollout.fraction:
                lowered = replace(plan, rl=replace(plan.rl, rollout_memory=fraction))
                yield lowered
            for offload in (Offload(optimizer="cpu"), Offload(optimizer="cpu", params="cpu")):
                yield replace(plan, offload=offload)
            plan = lowered
    yield from _training_levers(plan)


def _training_levers(plan: Plan) -> Iterator[Plan]:
    """The training phase's levers, cheapest first."""
    micros = [m for m in _micros(plan) if m < plan.micro]
    start = RECOMPUTE_ORDER.index(plan.activation_checkpointing)
    recomputes = [r for r in RECOMPUTE_ORDER[start:] if r != plan.activation_checkpointing]
    for micro in micros:
        yield _with_micro(plan, micro)
    for recompute in recomputes:
        for micro in [plan.micro, *micros]:
            yield replace(_with_micro(plan, micro), activation_checkpointing=recompute,
                                           checkpoint_every=None)
    for stage_plan in _more_sharded(plan):
        for recompute in [plan.activation_checkpointing, *recomputes]:
            for micro in [plan.micro, *micros]:
                yield replace(_with_micro(stage_plan, micro),
                                               activation_checkpointing=recompute, checkpoint_every=None)
    sharded = _most_sharded(plan)
    for offload in (Offload(optimizer="cpu"), Offload(optimizer="cpu", params="cpu")):
        for recompute in [plan.activation_checkpointing, *recomputes]:
            for micro in [plan.micro, *micros]:
                yield replace(_with_micro(sharded, micro), offload=offload,
                                         activation_checkpointing=recompute, checkpoint_every=None)


def _per_rank(plan: Plan) -> int:
    return plan.global_batch // plan.dp


def _micros(plan: Plan) -> list[int]:
    """Micro-batches that divide a rank's share of the global batch, largest first."""
    per_rank = _per_rank(plan)
    return [m for m in range(per_rank, 0, -1) if per_rank % m == 0]


def _with_micro(plan: Plan, micro: int) -> Plan:
    return replace(plan, micro=micro, accumulation=_per_rank(plan) // micro)


def _more_sharded(plan: Plan) -> list[Plan]:
    """The stages above the plan's, in its family (FSDP2 stays FSDP2), least first."""
    if plan.strategy == "megatron":
        return []
    family: Strategy = "fsdp" if plan.strategy == "fsdp" else "zero"
    stages = (2, 3) if family == "fsdp" else (1, 2, 3)
    return [replace(plan, strategy=family, stage=s, offload=Offload()) for s in stages if s > plan.stage]


def _most_sharded(plan: Plan) -> Plan:
    more = _more_sharded(plan)
    return more[-1] if more else plan


def _changes(old: Plan, new: Plan) -> str:
    said = []
    if (new.strategy, new.stage) != (old.strategy, old.stage):
        said.append(f"strategy {new.strategy}, stage {new.stage}")
    if new.micro != old.micro:
        said.append(f"batch.micro {new.micro} (batch.accumulation {new.accumulation})")
    if new.activation_checkpointing != old.activation_checkpointing:
        said.append(f"activation_checkpointing: {new.activation_checkpointing}")
    if new.rl is not None and old.rl is not None and new.rl != old.rl:
        if new.rl.free_rollout_memory != old.rl.free_rollout_memory:
            said.append(f"rl.free_rollout_memory: {str(new.rl.free_rollout_memory).lower()}")
        if new.rl.rollout_memory != old.rl.rollout_memory:
            said.append(f"rl.rollout_memory: {new.rl.rollout_memory:g} (the rollout engine's "
                        "weights and KV cache must fit in it)")
    if new.offload != old.offload:
        said.append(f"offload.optimizer: {new.offload.optimizer}"
                    + (f", offload.params: {new.offload.params}" if new.offload.params != "none" else ""))
    return ", ".join(said)


def _host_bytes(est: Estimate) -> float:
    return sum(est.engine.cpu.values()) * est.plan.gpus_per_node


def _host_fits(est: Estimate) -> bool:
    cpu = est.plan.cpu_memory
    return not est.plan.offload.enabled or cpu is None or _host_bytes(est) <= cpu


def _host(est: Estimate) -> str:
    if not est.plan.offload.enabled:
        return ""
    cpu = est.plan.cpu_memory
    of = f" of {gb(cpu)}" if cpu is not None else " (cluster.cpu_memory not set: not checked)"
    return f" per GPU and {gb(_host_bytes(est))} of host memory per node{of}"


def _rank(rows: list[Estimate], row: Estimate) -> int:
    return [r.label for r in rows].index(row.label) if row.label in [r.label for r in rows] else len(rows)


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
    return (f"nothing fits with micro 1, full recompute, the most sharding and offload "
            f"({gb(best.need)} per GPU){layer}: split layers with tensor parallelism "
            "(parallel.tensor)")
