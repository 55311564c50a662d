"""Fit verdict and what to change, one lever at a time, with the trade-off in numbers.

When the recipe does not fit, the levers are tried in the order they cost the least:
the micro-batch (accumulation follows, the global batch stays), then checkpointing
(selective, then full), then the ZeRO / FSDP stage (more sharding, more traffic), then
offload (host memory checked against `cluster.cpu_memory`), and only then tensor
parallelism. Under verl the rollout engine's share comes first (`rollout.py`): freeing
it for training where it is kept, and where the rollout phase is what does not fit, an
`rl.rollout_memory` between the rollout engine's floor (its weights and start-up
profile: never less, or vLLM does not start) and what fits beside the actor, then the
actor's offload with such a share, then the levers above; when even the floor beside the
most offloaded actor does not fit, more GPUs or more rollout tensor parallelism.
Each level keeps the earlier levers free, and the first combination that fits and that
the recipe's engine runs (`runnable.py`) is the one advised, in one line: nothing is
said about a lever that was not needed, so the advice cannot contradict itself. When it
fits, the next stage's saving is priced against its traffic, among the variants the
engine runs. Traffic and memory are the engine view throughout (the formula view is
`plan`'s alone); fitting is the verdict's *fits* (`report.Estimate.comfortable`): a *tight*
plan is advised as one that does not fit, a change that clears the band named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.model_shapes import inventory as model_inventory
from distrecipe.plan import host
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.report import Estimate, compare, estimate
from distrecipe.plan.rollout import fractions
from distrecipe.plan.runnable import runs
from distrecipe.plan.units import gb
from distrecipe.plan.verdict import band_text
from distrecipe.recipe import AUTO, Offload, Recompute, Strategy
from distrecipe.translator.resolve import variant

RECOMPUTE_ORDER: tuple[Recompute, ...] = ("none", "selective", "full")


def advise(plan: Plan) -> list[str]:
    """Advice lines for `plan`, most important first; where the job holds models `plan`
    cannot price (OpenRLHF's critic and reward model), a last line says the advice is a
    lower bound."""
    lines = _advise(plan)
    phase = estimate(plan).rollout
    if phase is not None and phase.unpriced:
        lines.append(f"a lower bound: {phase.trainer} also holds {', '.join(phase.unpriced)} on every GPU, "
                     "not priced here (their size is not the recipe's)")
    return lines


def _advise(plan: Plan) -> list[str]:
    current = estimate(plan)
    if current.budget is None:
        return ["cluster.gpu_memory is not set: cannot say whether it fits"]
    budget = current.budget
    if current.rollout is not None and current.rollout.refused:
        return [f"verl would not start: {current.rollout.refused}; state a rollout tensor parallelism "
                "that divides the GPUs (actor_rollout_ref.rollout.tensor_model_parallel_size in "
                "native.verl), then plan again"]
    if current.comfortable and host.allowed(current):
        return _when_it_fits(current, budget)
    said = current.verdict
    tight = said is not None and said.word == "tight" and host.allowed(current)
    head = (f"tight: {_shortfall(current)}, within the error band ({band_text(said)})"
            if tight and said is not None else f"does not fit: {_shortfall(current)}")
    trial = advised(plan)
    if trial is not None:
        est = estimate(trial)
        return [f"{head}; it fits with {_changes(plan, trial)} "
                f"({est.label} then needs {gb(est.need)}{_host(est)})"]
    if tight:
        return [f"{head}; no one change here clears the band: launch goes ahead, with a warning"]
    if current.rollout is not None and _rollout_cannot_fit(plan):
        return [_more_gpus(plan)]
    bound = _host_bound(plan)
    offload = Offload() if bound is not None else Offload(optimizer="cpu")
    lightest = _try(_most_sharded(plan), batch=_micro_batch(plan, 1), activation_checkpointing="full",
                    recompute_every=None, offload=offload)
    return [_tensor_parallel(plan, estimate(lightest or plan), bound)]


def advised(plan: Plan) -> Plan | None:
    """The first lever combination the resolver accepts, that fits (host memory included)
    and that the recipe's engine runs: what "it fits with" names; None when none does."""
    for trial in _levers(plan):  # each one the resolver accepted
        est = estimate(trial)
        if est.comfortable and host.allowed(est) and runs(plan, trial):
            return trial
    return None


def _host_bound(plan: Plan) -> Estimate | None:
    """Of the lever combinations that fit the GPU and that the engine runs but that offload
    more than `cluster.cpu_memory`, the one needing the least host memory: where only the
    host binds; None where none is refused for the host alone."""
    bound = [est for est in map(estimate, _levers(plan))
             if est.comfortable and host.fits(est) is False and runs(plan, est.plan)]
    return min(bound, key=lambda e: (host.per_node(e), e.need), default=None)


def _shortfall(current: Estimate) -> str:
    """What does not fit: the bytes, or a rollout share vLLM would not start with."""
    phase = current.rollout
    budget = current.budget or 0.0
    if phase is not None and phase.starved and phase.engine is not None:
        return (f"rl.rollout_memory {phase.fraction:g} gives the rollout engine {gb(phase.engine)}, "
                f"below its floor {gb(phase.floor)} ({phase.floor_text()}): vLLM would refuse to "
                "start (no memory for the KV cache)")
    if current.fits and host.fits(current) is False:
        return f"{current.label} needs {host.note(current)}"
    return f"{current.label} needs {gb(current.need)} of {gb(budget)}"


def _when_it_fits(current: Estimate, budget: float) -> list[str]:
    rows = [row for row in compare(current.plan) if row.plan.recipe.strategy != "megatron"]
    lines = [f"fits: {current.label} needs {gb(current.need)} of {gb(budget)}"]
    less = next((row for row in rows if row.comfortable), None)
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


ACTOR_OFFLOADS = (Offload(optimizer="cpu"), Offload(optimizer="cpu", params="cpu"))
"""The actor's offloads, least first (parameters need the most sharded stage)."""


def _levers(plan: Plan) -> Iterator[Plan]:
    """The plan changed by one more lever at a time, cheapest first (verl's rollout
    engine's share before all of them, where it is what does not fit)."""
    current = estimate(plan)
    if current.rollout is not None and plan.recipe.rl is not None:
        freed = _try(plan, rl={"free_rollout_memory": True}) if current.rollout.kept else None
        if freed is not None:
            plan = freed
            yield plan
            current = estimate(plan)
        if current.rollout_binds or current.starved:
            share = _share_that_fits(plan)
            if share is not None and share is not plan:
                yield share
            for offload in ACTOR_OFFLOADS:
                actor = _offloaded(plan, offload)
                offloaded = None if actor is None else _share_that_fits(actor)
                if offloaded is not None:
                    yield offloaded
            plan = share or plan
    yield from _training_levers(plan)


def _offloaded(plan: Plan, offload: Offload) -> Plan | None:
    """The plan with the actor offloaded, at the most sharded stage where parameters go;
    None where the resolver refuses that offload."""
    return _try(_most_sharded(plan) if offload.params != "none" else plan, offload=offload)


def _share_that_fits(plan: Plan) -> Plan | None:
    """The plan with `rl.rollout_memory` moved into the span vLLM starts with and the GPU
    holds beside the actor (the plan itself when it is already there); None when no share
    is both: the floor never gives way to the GPU's size."""
    phase = estimate(plan).rollout
    assert phase is not None and plan.recipe.rl is not None
    span = fractions(plan, phase)
    if span is None:
        return None
    least, largest = span
    fraction = min(max(phase.fraction, least), largest)
    if fraction == phase.fraction:
        return plan
    trial = _try(plan, rl={"rollout_memory": fraction})
    while trial is not None and not estimate(trial).comfortable and fraction > least:
        fraction = round(fraction - 0.01, 2)  # the actor's state carries the band: a share below
        trial = _try(plan, rl={"rollout_memory": fraction})
    return trial


def _rollout_cannot_fit(plan: Plan) -> bool:
    """Even the floor beside the most offloaded actor does not fit the GPU."""
    actor = _offloaded(plan, ACTOR_OFFLOADS[-1])
    return actor is None or _share_that_fits(actor) is None


def _more_gpus(plan: Plan) -> str:
    """verl's rollout phase cannot fit: what only more GPUs or more rollout TP change."""
    phase = estimate(_offloaded(plan, ACTOR_OFFLOADS[-1]) or plan).rollout
    assert phase is not None
    tp = "" if phase.tensor_stated else f" ({phase.trainer}'s default)"
    how = f" = Ψ × {phase.width} bytes ÷ rollout tensor parallelism {phase.tensor}{tp},"
    if phase.trainer == "verl":
        more = ("more GPUs (cluster.nodes) to shard the actor, or a larger "
                "actor_rollout_ref.rollout.tensor_model_parallel_size in native.verl")
    elif plan.gpu_memory is not None and phase.floor + CONTEXT >= plan.gpu_memory:
        more = (f"more GPUs do not help: the floor alone fills the GPU, and {phase.trainer}'s command here "
                f"runs vLLM at tensor parallelism {phase.tensor} (one engine per GPU), which the recipe does "
                "not set")
    else:
        more = (f"more GPUs (cluster.nodes) to shard the actor ({phase.trainer}'s vLLM runs at tensor "
                f"parallelism {phase.tensor} here, which the recipe does not set)")
    return (f"does not fit: the rollout engine needs at least {gb(phase.floor)} per GPU "
            f"({phase.floor_text(how)}) and the actor keeps "
            f"{gb(sum(phase.actor.values()) + sum(phase.beside.values()))} "
            f"beside it even offloaded: {more}")


def _training_levers(plan: Plan) -> Iterator[Plan]:
    """The training phase's levers, cheapest first."""
    micros = [m for m in _micros(plan) if m < plan.batch.micro]
    start = RECOMPUTE_ORDER.index(plan.recipe.activation_checkpointing)
    recomputes = [r for r in RECOMPUTE_ORDER[start:] if r != plan.recipe.activation_checkpointing]
    trials: list[tuple[Plan, dict[str, object]]] = [(plan, {"batch": _micro_batch(plan, m)}) for m in micros]
    for recompute in recomputes:
        trials += [(plan, {"batch": _micro_batch(plan, m), "activation_checkpointing": recompute,
                           "recompute_every": None}) for m in [plan.batch.micro, *micros]]
    for stage_plan in _more_sharded(plan):
        for recompute in [plan.recipe.activation_checkpointing, *recomputes]:
            trials += [(stage_plan, {"batch": _micro_batch(plan, m), "activation_checkpointing": recompute,
                                     "recompute_every": None}) for m in [plan.batch.micro, *micros]]
    sharded = _most_sharded(plan)
    for offload in ACTOR_OFFLOADS:
        for recompute in [plan.recipe.activation_checkpointing, *recomputes]:
            trials += [(sharded, {"batch": _micro_batch(plan, m), "offload": offload,
                                  "activation_checkpointing": recompute, "recompute_every": None})
                       for m in [plan.batch.micro, *micros]]
    for base, changes in trials:
        trial = _try(base, **changes)
        if trial is not None:
            yield trial


def _per_rank(plan: Plan) -> int:
    return plan.batch.global_ // plan.dims.dp


def _micros(plan: Plan) -> list[int]:
    """Micro-batches that divide a rank's share of the global batch, largest first."""
    per_rank = _per_rank(plan)
    return [m for m in range(per_rank, 0, -1) if per_rank % m == 0]


def _micro_batch(plan: Plan, micro: int) -> dict[str, object]:
    """The batch change to `micro` per GPU, the global batch kept (accumulation follows)."""
    return {"micro": micro, "accumulation": AUTO, "global_": plan.batch.global_}


def _try(plan: Plan, **changes: Any) -> Plan | None:
    """`plan` with `changes`, resolved again; None where the resolver refuses the variant."""
    try:
        return variant(plan, **changes)
    except RecipeError:
        return None


def _more_sharded(plan: Plan) -> list[Plan]:
    """The stages above the plan's, in its family (FSDP2 stays FSDP2), least first."""
    if plan.recipe.strategy == "megatron":
        return []
    family: Strategy = "fsdp" if plan.recipe.strategy == "fsdp" else "zero"
    stages = (2, 3) if family == "fsdp" else (1, 2, 3)
    trials = (_try(plan, strategy=family, stage=s, offload=Offload()) for s in stages if s > plan.stage)
    return [trial for trial in trials if trial is not None]


def _most_sharded(plan: Plan) -> Plan:
    more = _more_sharded(plan)
    return more[-1] if more else plan


def _changes(old: Plan, new: Plan) -> str:
    said = []
    a, b = old.recipe, new.recipe
    if (b.strategy, new.stage) != (a.strategy, old.stage):
        said.append(f"strategy {b.strategy}, stage {new.stage}")
    if new.batch.micro != old.batch.micro:
        said.append(f"batch.micro {new.batch.micro} (batch.accumulation {new.batch.accumulation})")
    if b.activation_checkpointing != a.activation_checkpointing:
        said.append(f"activation_checkpointing: {b.activation_checkpointing}")
    if b.rl is not None and a.rl is not None and b.rl != a.rl:
        if b.rl.free_rollout_memory != a.rl.free_rollout_memory:
            said.append(f"rl.free_rollout_memory: {str(b.rl.free_rollout_memory).lower()}")
        if b.rl.rollout_memory != a.rl.rollout_memory:
            phase = estimate(new).rollout
            assert phase is not None
            said.append(f"rl.rollout_memory: {b.rl.rollout_memory:g} (the rollout engine's "
                        f"{phase.floor_text().replace(' + ', ' and ')}, then {gb(phase.kv_cache or 0.0)} "
                        "of KV cache)")
    if b.offload != a.offload:
        said.append(f"offload.optimizer: {b.offload.optimizer}"
                    + (f", offload.params: {b.offload.params}" if b.offload.params != "none" else ""))
    return ", ".join(said)


def _host(est: Estimate) -> str:
    if not est.engine.cpu:
        return ""
    cpu = est.plan.recipe.cluster.cpu_memory
    of = f" of {host.size(cpu)}" if cpu is not None else " (cluster.cpu_memory not set: not checked)"
    return f" per GPU and {host.size(host.per_node(est))} of host memory per node{of}"


def _rank(rows: list[Estimate], row: Estimate) -> int:
    return [r.label for r in rows].index(row.label) if row.label in [r.label for r in rows] else len(rows)


def _next_stage(rows: list[Estimate], current: Estimate) -> Estimate | None:
    """The next more sharded row after the current one (ZeRO-2 → ZeRO-3)."""
    labels = [row.label for row in rows]
    if current.label not in labels:
        return None
    index = labels.index(current.label)
    return rows[index + 1] if index + 1 < len(rows) else None


def _tensor_parallel(plan: Plan, best: Estimate, bound: Estimate | None) -> str:
    """Nothing the levers reach fits: what binds (the GPU's memory, the host's, or both,
    as `search.binding` says it), then tensor parallelism, which needs less of either."""
    inventory = model_inventory(plan.recipe.model)
    layer = "" if inventory is None else (
        f"; one layer alone holds {gb(inventory.block_params * plan.precision_bytes)} of weights")
    split = _try(plan, parallel={"tensor": 2 * plan.dims.tensor}, batch={"accumulation": AUTO})
    how = "" if split is not None and runs(plan, split) else (
        f" with strategy megatron: this job cannot run parallel.tensor with strategy {plan.recipe.strategy}")
    if bound is not None:
        binds = (f"nothing fits: host memory binds: {_changes(plan, bound.plan)} fits the GPU "
                 f"({gb(bound.need)}) but {bound.label} needs {host.note(bound)}; without offload, micro 1, "
                 f"full recompute and the most sharding need {gb(best.need)} per GPU")
    else:
        both = host.fits(best) is False
        binds = (f"nothing fits: {'GPU and host memory bind' if both else 'GPU memory binds'}: micro 1, full "
                 f"recompute, the most sharding and offload need {gb(best.need)} per GPU"
                 + (f" and {host.note(best)}" if best.engine.cpu else ""))
    return f"{binds}{layer}: split layers with tensor parallelism (parallel.tensor){how}"
