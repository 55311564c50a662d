"""Bytes each rank sends per optimizer step, the seed's way and the engine's way.

A ring collective over N ranks sends (N−1)/N of the buffer per rank for a
reduce-scatter or an all-gather, and 2(N−1)/N for an all-reduce (= reduce-scatter +
all-gather). With G gradient bytes and P 16-bit parameter bytes:

| strategy          | per step (seed)                  | 8B, N = 32 |
|-------------------|----------------------------------|------------|
| DDP               | all-reduce 2(N−1)/N·G            | 31 GB      |
| ZeRO-1 / ZeRO-2   | reduce-scatter G + all-gather P  | 31 GB      |
| ZeRO-3 / FSDP     | + a second all-gather P (1.5×)   | 46.5 GB    |
| Megatron dist-opt | reduce-scatter fp32 G + gather P |            |

That is one reduction per step: gradient accumulation with `no_sync()` defers it to
the last micro-step; without it every micro-step reduces. Engines differ
(`reference/memory.md`, measured): DeepSpeed ZeRO-1/2 all-reduce instead of
reduce-scatter while `use_multi_rank_bucket_allreduce` is on (its default: 1.5× the
paper), ZeRO-2 and ZeRO-3 reduce on every micro-step, ZeRO-3 keeps parameters gathered
from forward to backward up to `stage3_max_live_parameters`, FSDP2 gathers every
micro-step and reduces in its reduce dtype, DDP under autocast reduces fp32 gradients.
With a shard group S < N (hybrid sharding), reduce-scatter and all-gather run inside
the group (within a node when S divides the node) and an all-reduce of the 1/S shard
runs across the N/S replicas (between nodes).
DeepSpeed's form of a shard group, ZeRO++ hpZ, differs: the first gather of a step and
the gradient reduce-scatter span all N; only the later gathers stay in the group.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.runner import runs_fsdp2, uses_deepspeed
from distrecipe.job import Plan
from distrecipe.plan.engine import DeepSpeedZero, fsdp2_shard_ranks, megatron_gradient_bytes
from distrecipe.plan.memory import local_params, reduce_ranks, shard_ranks
from distrecipe.plan.units import MiB

DDP_BUCKET = 25 * MiB
"""torch DDP's default `bucket_cap_mb` = 25 (MiB)."""


@dataclass(frozen=True, slots=True)
class Traffic:
    """Bytes one rank sends per optimizer step, by collective."""

    sent: dict[str, float]
    reductions: int
    """Gradient reductions per optimizer step."""
    intra: float | None = None
    """Of `total`, bytes that stay within a node (hybrid sharding only)."""

    @property
    def total(self) -> float:
        return sum(self.sent.values())


def ring(n: int) -> float:
    """Fraction of a buffer each rank sends in a ring reduce-scatter or all-gather."""
    return (n - 1) / n


def in_node(plan: Plan, ranks: int) -> bool:
    """True when each group of `ranks` neighbouring ranks (a hybrid shard group, an hpZ
    group) sits inside one node (its size divides the node), so its collectives stay
    on NVLink."""
    return plan.dims.gpus_per_node % ranks == 0


def formula(plan: Plan, *, no_sync: bool = True) -> Traffic:
    """The seed's volumes: once per step with `no_sync`, every micro-step without."""
    psi = local_params(plan)
    lp = plan.precision_bytes
    grads = psi * plan.gradient_bytes
    params = psi * lp
    reductions = 1 if no_sync else plan.batch.accumulation
    n, s = reduce_ranks(plan), shard_ranks(plan)
    if plan.recipe.strategy == "ddp" or plan.stage == 0:
        return Traffic({"all-reduce gradients": reductions * 2 * ring(n) * grads}, reductions)
    sent = {"reduce-scatter gradients": reductions * ring(s) * grads,
            "all-gather parameters": ring(s) * params}
    if plan.reshard_after_forward and plan.recipe.strategy != "megatron":
        sent["all-gather parameters (backward)"] = ring(s) * params
    intra = None
    if plan.dims.hybrid:
        intra = sum(sent.values()) if in_node(plan, s) else 0.0
        replicas = plan.dims.replicas
        sent["all-reduce shard across replicas"] = reductions * 2 * ring(replicas) * grads / s
    return Traffic(sent, reductions, intra)


def megatron(plan: Plan, psi: float) -> Traffic:
    """Megatron-Core's data-parallel traffic, once a step (its DDP reduces during the last
    micro-batch's backward): the distributed optimizer reduce-scatters the gradient buffer
    (`engine.megatron_gradient_bytes`) and all-gathers the updated 16-bit parameters over
    data × context ranks; without it (stage 0) the buffer is all-reduced."""
    g, lp = megatron_gradient_bytes(plan), plan.precision_bytes
    n = reduce_ranks(plan)
    if plan.stage == 0:
        return Traffic({"all-reduce gradients": 2 * ring(n) * g * psi}, 1)
    return Traffic({"reduce-scatter gradients": ring(n) * g * psi,
                    "all-gather parameters": ring(n) * lp * psi}, 1)


def reduce_bytes(plan: Plan) -> int:
    """Bytes per element FSDP2 and DeepSpeed reduce gradients in: `reduce_dtype` where
    stated (FSDP2's `MixedPrecisionPolicy.reduce_dtype`, DeepSpeed's
    `communication_data_type`); else fp32 where torchtitan (`mixed_precision_reduce`) and
    verl run FSDP2, the training dtype under Accelerate and DeepSpeed."""
    if plan.recipe.reduce_dtype is not None:
        return 4 if plan.recipe.reduce_dtype == "fp32" else 2
    if runs_fsdp2(plan) and plan.backend in ("verl", "torchrun"):
        return 4
    return plan.precision_bytes


def ddp_buckets(plan: Plan) -> float:
    """How many 25 MiB DDP buckets the 16-bit gradients fill (the seed's ≈610 for 8B)."""
    return local_params(plan) * plan.precision_bytes / DDP_BUCKET


def engine(plan: Plan, zero: DeepSpeedZero | None = None, psi: float | None = None) -> Traffic:
    """What the engine that runs `plan` sends, per `reference/memory.md`'s measurements.

    `zero` is read from the emitted ds_config (`report.deepspeed_zero`); without it a
    DeepSpeed plan is taken at DeepSpeed's defaults, never as Accelerate's DDP. `psi`: the
    parameters of the pipeline stage judged (Ψ/(t·p) if None).
    """
    psi = local_params(plan) if psi is None else psi
    lp = plan.precision_bytes
    n, m = reduce_ranks(plan), plan.batch.accumulation
    if plan.recipe.strategy == "megatron":
        return megatron(plan, psi)
    if runs_fsdp2(plan):
        s = fsdp2_shard_ranks(plan)
        grads = reduce_bytes(plan)
        sent = {"all-gather parameters": m * ring(s) * lp * psi,
                "reduce-scatter gradients": m * ring(s) * grads * psi}
        if plan.reshard_after_forward:
            sent["all-gather parameters (backward)"] = m * ring(s) * lp * psi
        intra = None
        if s < n:  # HSDP (verl's DDP too): the shard's gradients are all-reduced across replicas
            intra = sum(sent.values()) if in_node(plan, s) else 0.0
            sent["all-reduce shard across replicas"] = m * 2 * ring(n // s) * grads * psi / s
        return Traffic(sent, m, intra)
    if not uses_deepspeed(plan):
        # Accelerate's DDP: fp32 gradients under autocast, no_sync until the last micro-step.
        return Traffic({"all-reduce gradients": 2 * ring(n) * 4 * psi}, 1)
    if zero is None:  # DeepSpeed's defaults, as `engine.plan_engine_view` assumes too
        zero = DeepSpeedZero.at_defaults(plan.stage)
    grads = reduce_bytes(plan)
    if zero.stage == 0:
        return Traffic({"all-reduce gradients": 2 * ring(n) * grads * psi}, 1)
    if zero.stage in (1, 2):
        reductions = m if zero.stage == 2 else 1
        factor = 2 if zero.multi_rank_allreduce else 1
        name = "all-reduce gradients" if zero.multi_rank_allreduce else "reduce-scatter gradients"
        return Traffic({name: reductions * factor * ring(n) * grads * psi,
                        "all-gather parameters": ring(n) * lp * psi}, reductions)
    released = max(0.0, psi - zero.max_live_parameters)
    h = min(zero.hpz_partition_size, plan.dims.world)
    if h <= 1:
        return Traffic({"all-gather parameters": m * ring(n) * lp * psi,
                        "all-gather parameters (backward)": m * ring(n) * lp * released,
                        "reduce-scatter gradients": m * ring(n) * grads * psi}, m)
    # ZeRO++ hpZ (DeepSpeed 0.19.8 `partition_parameters.py`): a parameter released after
    # its first gather keeps a secondary partition over its group of h consecutive ranks
    # (`_partition_param_sec`; `groups._create_zero_param_parallel_group`), and every later
    # gather reads it inside the group (`_all_gather_coalesced` on `zero_param_process_group`)
    # until `step()` drops it (`invalidate_secondary_tensor`): the first micro-step's forward
    # gathers over all N, backward and later micro-steps' forwards within the group.
    # Gradients are reduce-scattered over all N.
    secondary = {"all-gather parameters (backward)": m * ring(h) * lp * released}
    if m > 1:
        secondary["all-gather parameters (later micro-steps)"] = (m - 1) * ring(h) * lp * psi
    sent = {"all-gather parameters": ring(n) * lp * psi, **secondary,
            "reduce-scatter gradients": m * ring(n) * grads * psi}
    return Traffic(sent, m, sum(secondary.values()) if in_node(plan, h) else 0.0)
