"""The engine view: what DeepSpeed, torch FSDP2 and torch DDP really hold per rank.

The seed's table (`memory.py`) is the ZeRO paper's steady state. Engines hold more at
some moments and less at others; each term below was read from the installed sources
(deepspeed 0.19.8, torch 2.13) and is checked against the bytes real engines hold by
`tests/test_plan_engine.py` (bytes per parameter at N = 2 in `reference/memory.md`).

* DeepSpeed ZeRO-0, 16-bit: `FP16_Optimizer` (bf16 mode) keeps 2Ψ parameters, a 4Ψ
  fp32 master copy and 8Ψ Adam moments (14Ψ at rest); backward adds 2Ψ gradients and
  `step()` an fp32 copy of them (4Ψ): 20Ψ at the peak.
* DeepSpeed ZeRO-1/2 (`stage_1_and_2.py`): 2Ψ + 12Ψ/N at rest; after backward the 2Ψ/N
  gradient partition and the reduce bucket (`reduce_bucket_size` elements, two of them
  with `overlap_comm`); ZeRO-1 with accumulation keeps the full 2Ψ gradients between
  micro-steps (the seed's 4Ψ + 12Ψ/N). `step()` makes the fp32 copy of the partition
  (4Ψ/N) before it frees the 16-bit one: 2Ψ + 18Ψ/N, DeepSpeed's own estimate.
* DeepSpeed ZeRO-1/2 with `offload_optimizer` keeps on the host (pinned by default) the
  fp32 partition, its fp32 gradient, Adam's moments and a 16-bit copy of the partition
  (4 + 4 + 8 + 2 bytes per parameter over N), and with accumulation the 16-bit gradients
  between micro-steps (+2Ψ/N); ZeRO-3 the fp32 partition, moments, the fp32 sub-group
  gradients and the 16-bit gradient partition (`grad_partitions_flat_buffer`), and with
  `offload_param` the 16-bit parameter partition.
* DeepSpeed ZeRO-3 (`stage3.py`): 2Ψ/N shard + 12Ψ/N + a 2Ψ/N gradient buffer for its
  lifetime, whole copies of tensors under `stage3_param_persistence_threshold`, one
  reduce bucket from start-up; after forward up to `stage3_max_live_parameters` stay
  gathered until backward; `step()` walks the partition in sub-groups of
  `sub_group_size` elements (parameters are added to a sub-group until it reaches that
  size, so one may overshoot by a tensor's partition) and holds the fp32 gradient copy
  of one sub-group at a time (`_prepare_sub_group` makes it, `_release_sub_group` drops
  it): 4 bytes × the largest sub-group, 4Ψ/N only when the partition is one sub-group.
* fp32 training: ZeRO-0 runs the plain torch optimizer (no master, no copy: 16Ψ at the
  peak); ZeRO-1..3 still keep an fp32 partition beside the parameters and flatten the
  gradient partition into a new tensor in `step()`.
* ZeRO++ hierarchical partitioning (what a shard group becomes in DeepSpeed) keeps a
  secondary 16-bit partition of the parameters within each group: + 2Ψ/S (not measured).
* torch FSDP2: under mixed precision the sharded parameters stay fp32, so there is no
  separate master copy: 4Ψ/N + 8Ψ/N Adam at rest, + 4Ψ/N gradients after backward;
  `reshard_after_forward=False` keeps the 16-bit unsharded parameters from forward to
  backward.
* torch DDP as Accelerate runs it (fp32 parameters, bf16 autocast): 4Ψ + 8Ψ Adam + a
  4Ψ bucket copy of the gradients (`gradient_as_bucket_view` is off), + 4Ψ gradients.
  DDP under verl is FSDP2 on one-rank shard groups (`runs_fsdp2`): 16Ψ, no bucket copy.

The layer being computed and the one prefetched (ZeRO-3 / FSDP) are a transient
working set; `activations.py` counts them with the activations, not here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from distrecipe.engines.deepspeed import zero_setting
from distrecipe.engines.runner import DEEPSPEED_BACKENDS, runs_fsdp2, uses_deepspeed
from distrecipe.engines.verl import fsdp_size
from distrecipe.job import Plan
from distrecipe.model_shapes import inventory as model_inventory
from distrecipe.plan.fsdp1 import fsdp1
from distrecipe.plan.memory import (
    held_params,
    local_params,
    moment_bytes,
    pure_bf16,
    reduce_ranks,
    shard_ranks,
)

POINTS = ("rest", "forward", "backward", "step")
"""After the optimizer step, after forward, after backward (worst micro-step), inside step."""


@dataclass(frozen=True, slots=True)
class EngineView:
    """Bytes one rank holds at each point of a step, by component; `cpu` is host memory."""

    engine: str
    points: dict[str, dict[str, float]]
    cpu: dict[str, float]
    notes: tuple[str, ...] = ()

    def total(self, point: str) -> float:
        return sum(self.points[point].values())

    @property
    def peak_point(self) -> str:
        """Where the most is held; ties go to the point a user watches (after backward)."""
        return max(("backward", "step", "forward", "rest"), key=self.total)

    @property
    def peak(self) -> float:
        return self.total(self.peak_point)


@dataclass(frozen=True, kw_only=True, slots=True)
class DeepSpeedZero:
    """The `zero_optimization` knobs that change memory or traffic, as DeepSpeed reads them:
    built by `from_config`, so their aliases and defaults are DeepSpeed's key table's."""

    stage: int
    reduce_bucket_size: int
    overlap_comm: bool
    persistence_threshold: int
    max_live_parameters: int
    multi_rank_allreduce: bool
    offload_optimizer: bool
    offload_param: bool
    hpz_partition_size: int
    """ZeRO++ hierarchical partitioning: a secondary 16-bit parameter copy per group."""
    sub_group_size: int
    """ZeRO-3's optimizer step works on sub-groups of this many elements at a time."""
    allgather_bucket_size: int = 500_000_000
    """ZeRO-1/2's parameter all-gather runs in buckets of this many elements (one NCCL call each)."""

    @classmethod
    def from_config(cls, zero: Mapping[str, Any]) -> DeepSpeedZero:
        """Read a DeepSpeed `zero_optimization` section (`engines.deepspeed.zero_setting`)."""

        def offloaded(block: str) -> bool:
            return str(zero_setting(zero, block, "device")) != "none"

        stage = int(zero_setting(zero, "stage"))
        return cls(
            stage=stage,
            reduce_bucket_size=int(zero_setting(zero, "reduce_bucket_size")),
            overlap_comm=bool(zero_setting(zero, "overlap_comm")),
            persistence_threshold=int(zero_setting(zero, "param_persistence_threshold")),
            max_live_parameters=int(zero_setting(zero, "max_live_parameters")),
            multi_rank_allreduce=bool(zero_setting(zero, "use_multi_rank_bucket_allreduce")),
            offload_optimizer=offloaded("offload_optimizer"),
            offload_param=offloaded("offload_param") and stage == 3,
            hpz_partition_size=int(zero_setting(zero, "zero_hpz_partition_size")),
            sub_group_size=int(zero_setting(zero, "sub_group_size")),
            allgather_bucket_size=int(zero_setting(zero, "allgather_bucket_size")),
        )

    @classmethod
    def at_defaults(cls, stage: int) -> DeepSpeedZero:
        """DeepSpeed's own knobs at ZeRO `stage`: a plan judged without its emitted ds_config."""
        return cls.from_config({"stage": stage})


def _add(base: dict[str, float], **extra: float) -> dict[str, float]:
    out = dict(base)
    for key, value in extra.items():
        name = key.replace("_", " ")
        out[name] = out.get(name, 0.0) + value
    return out


def largest_sub_group(partitions: Sequence[float], size: int) -> float:
    """Elements in ZeRO-3's largest optimizer sub-group, grouped as
    `DeepSpeedZeroOptimizer_Stage3._create_fp16_sub_groups` does: tensors' partitions in
    order until the running sum reaches `size`."""
    total = sum(partitions)
    if size <= 0 or size >= total:
        return total
    largest = running = 0.0
    for elements in partitions:
        running += elements
        if running >= size:
            largest, running = max(largest, running), 0.0
    return max(largest, running)


def deepspeed(psi: float, n: int, zero: DeepSpeedZero, *, lp: int, accumulation: int,
              persistent: float = 0.0, sub_group: float | None = None, hp: int = 4,
              moments: int = 8) -> EngineView:
    """DeepSpeed ZeRO-0..3 with `lp`-byte parameters (2 for bf16/fp16, 4 for fp32).
    `sub_group`: elements in ZeRO-3's largest optimizer sub-group (default: the
    partition cut at `sub_group_size`). `hp`: bytes of the master partition and of the
    gradient copy step() makes (`master_weights_and_grads_dtype`: 2 under
    `bf16_master_weights_and_grads`, which still clones the partition); `moments`: Adam's
    m and v (4 under `bf16_optimizer_states`)."""
    stage = zero.stage
    master = 0.0 if lp == 4 else 4 * psi  # fp32 training has no master copy at stage 0
    # ZeRO-1..3 flatten the gradient partition into a new tensor of the master dtype inside
    # step(), whatever the parameters' dtype; stage 0 copies only when it wraps 16-bit ones.
    fp32_grads = hp * psi
    cpu: dict[str, float] = {}
    if stage == 0:
        rest = {"parameters": lp * psi, "master weights": master, "optimizer": 8 * psi}
        backward = _add(rest, gradients=lp * psi)
        points = {"rest": rest, "forward": rest, "backward": backward,
                  "step": _add(backward, fp32_gradients=master)}
        return EngineView("DeepSpeed ZeRO-0", points, cpu)
    master_shard = hp * psi / n
    pure = " (bf16 master weights)" if hp == 2 else ""
    copy = "fp32 gradients" if hp == 4 else "bf16 gradient copy"  # step()'s flattened partition
    bucket = zero.reduce_bucket_size * lp
    if stage in (1, 2):
        bucket *= 2 if zero.overlap_comm else 1
        rest = {"parameters": lp * psi}
        if zero.offload_optimizer:
            # Host, pinned (stage_1_and_2.py): the master partition and its `.grad` (fp32, or
            # bf16 under bf16 master weights), Adam's moments, a 16-bit copy of the partition
            # the step writes back through (`param_buffer_of_bit16_for_cpu_offload_groups`),
            # and with accumulation the 16-bit gradients kept between micro-steps
            # (`accumulated_grads_in_cpu`).
            cpu = {"master weights": master_shard, "optimizer": moments * psi / n,
                   copy: fp32_grads / n, "16-bit parameters": lp * psi / n}
            if accumulation > 1:
                cpu["accumulated gradients"] = lp * psi / n
            backward = _add(rest, buffers=bucket)
            points = {"rest": rest, "forward": rest, "backward": backward, "step": backward}
            return EngineView(f"DeepSpeed ZeRO-{stage} + optimizer offload{pure}", points, cpu)
        rest = _add(rest, master_weights=master_shard, optimizer=moments * psi / n)
        held = lp * psi if stage == 1 and accumulation > 1 else lp * psi / n
        backward = _add(rest, gradients=held, buffers=bucket)
        step = _add(rest, gradients=lp * psi / n, buffers=bucket, **{copy: fp32_grads / n})
        # The gradients and the bucket outlive a micro-step: the last forward sees them.
        points = {"rest": rest, "forward": backward if accumulation > 1 else rest,
                  "backward": backward, "step": step}
        return EngineView(f"DeepSpeed ZeRO-{stage}{pure}", points, cpu)
    shard = lp * psi / n
    # ZeRO++ hpZ keeps a second, group-local partition of the 16-bit parameters.
    secondary = lp * psi / zero.hpz_partition_size if zero.hpz_partition_size > 1 else 0.0
    rest = {"parameters": shard + secondary + lp * persistent, "gradients": lp * psi / n,
            "buffers": bucket}
    if zero.offload_param:
        cpu["parameters"] = shard
        rest["parameters"] = secondary + lp * persistent
    if zero.offload_optimizer:
        cpu.update({"master weights": master_shard, "optimizer": moments * psi / n,
                    "gradients": lp * psi / n, copy: fp32_grads / n})
        del rest["gradients"]
        step = rest
    else:
        rest.update({"master weights": master_shard, "optimizer": moments * psi / n})
        sub_group = min(psi / n, sub_group if sub_group is not None
                        else float(zero.sub_group_size or psi))
        step = _add(rest, **{copy: hp * sub_group})
    gathered = lp * min(psi - persistent, zero.max_live_parameters)
    points = {"rest": rest, "forward": _add(rest, gathered=gathered), "backward": rest,
              "step": step}
    name = "DeepSpeed ZeRO-3" + (" + offload" if cpu else "") + pure
    return EngineView(name, points, cpu)


def fsdp2(psi: float, n: int, *, reshard: bool, lp: int, offload: bool, pure: bool = False) -> EngineView:
    """torch FSDP2 (`fully_shard`) with fp32 sharded parameters and `lp`-byte compute; `pure`:
    a model cast to bf16, so the shards, their gradients and AdamW's moments are bf16."""
    hp = 2 if pure else 4
    state = {"parameters": hp * psi / n, "optimizer": 2 * hp * psi / n}
    grads = {"gradients": hp * psi / n}
    rest: dict[str, float] = {} if offload else state
    backward = rest if offload else _add(rest, **grads)
    forward = rest if reshard else _add(rest, gathered=lp * psi)
    cpu = _add(state, **grads) if offload else {}
    points = {"rest": rest, "forward": forward, "backward": backward, "step": backward}
    mode = f"reshard_after_forward={reshard}"
    extra = (", CPU offload" if offload else "") + (", pure bf16" if pure else "")
    return EngineView(f"torch FSDP2 ({mode}{extra})", points, cpu)


def ddp(psi: float, *, pure: bool = False) -> EngineView:
    """torch DDP under Accelerate: fp32 parameters, bucket copy of the gradients; `pure`: a
    model cast to bf16 (parameters, gradients, buckets and AdamW's moments in bf16)."""
    hp = 2 if pure else 4
    rest = {"parameters": hp * psi, "optimizer": 2 * hp * psi, "buffers": hp * psi}
    backward = _add(rest, gradients=hp * psi)
    points = {"rest": rest, "forward": rest, "backward": backward, "step": backward}
    kind = "bf16 parameters, no master copy" if pure else "fp32 parameters, autocast"
    return EngineView(f"torch DDP ({kind})", points, {})


def megatron_gradient_bytes(plan: Plan) -> int:
    """Bytes per element of Megatron-Core's gradient buffer (`main_grad`), which is also
    the dtype it reduces in: `reduce_dtype` where stated; else fp32 for bf16 training
    (`grad_reduce_in_fp32`, which verl sets and Megatron-LM forces for bf16), the
    training dtype for fp16 and fp32."""
    if plan.recipe.reduce_dtype is not None:
        return 4 if plan.recipe.reduce_dtype == "fp32" else 2
    return 4 if plan.precision in ("bf16", "fp32") else 2


def megatron(plan: Plan, psi: float) -> EngineView:
    """Megatron-Core: 16-bit parameters and a persistent gradient buffer
    (`megatron_gradient_bytes`); the distributed optimizer (stage 1) shards the fp32 master
    weights and Adam's moments over data × context parallel ranks, stage 0 keeps them
    whole. Adam's moments are 8 bytes, 4 with `optimizer.state_dtype: bf16` (the
    precision-aware optimizer). A 16-bit buffer is cast to fp32 for the step, one shard at
    a time. `offload.optimizer` is Megatron's `optimizer_cpu_offload` (master and moments
    on the host, the step there)."""
    lp, g = plan.precision_bytes, megatron_gradient_bytes(plan)
    n = shard_ranks(plan) if plan.stage >= 1 else 1
    if plan.backend in DEEPSPEED_BACKENDS:
        return megatron_deepspeed(plan, psi, n)
    opt = plan.recipe.optimizer
    moments = 4 if opt is not None and opt.state_dtype == "bf16" else 8
    master = 0.0 if lp == 4 else 4 * psi / n
    rest = {"parameters": lp * psi, "gradients": g * psi}
    state = {"master weights": master, "optimizer": moments * psi / n}
    cpu: dict[str, float] = {}
    if plan.recipe.offload.optimizer != "none":
        cpu = state
        step = rest
    else:
        rest.update(state)
        step = _add(rest, fp32_gradients=4 * psi / n if g < 4 else 0.0)
    points = {"rest": rest, "forward": rest, "backward": rest, "step": {k: v for k, v in step.items() if v}}
    kind = "distributed optimizer" if plan.stage >= 1 else "no distributed optimizer"
    name = f"Megatron-Core ({kind}, {'fp32' if g == 4 else '16-bit'} gradient buffer)"
    return EngineView(name + (" + optimizer offload" if cpu else ""), points, cpu)


def megatron_deepspeed(plan: Plan, psi: float, n: int) -> EngineView:
    """Megatron-DeepSpeed (`strategy: megatron` launched by DeepSpeed): Megatron's tensor
    parallelism, DeepSpeed's pipeline engine and optimizer. With bf16 and fp32 gradient
    accumulation (DeepSpeed's `BF16_Optimizer`, `grad_accum_dtype` fp32, its default for
    bf16) every micro-batch's backward leaves the 16-bit gradients in place
    (`clear_lp_grads` zeroes them, `update_hp_grads` adds them to the fp32 buffer:
    runtime/pipe/engine.py:838-862), so 2Ψ of them stay beside the unsharded 4Ψ fp32
    buffer, and stage 1 shards the fp32 master and Adam's moments; with 16-bit reduction
    (`reduce_dtype: bf16`, or fp16) DeepSpeed's ZeRO-1 or ZeRO-0 optimizer as `deepspeed`
    models it."""
    lp = plan.precision_bytes
    if lp == 2 and megatron_gradient_bytes(plan) == 4:
        rest = {"parameters": lp * psi, "gradients": (lp + 4) * psi, "master weights": 4 * psi / n,
                "optimizer": 8 * psi / n}
        points = {"rest": rest, "forward": rest, "backward": rest, "step": rest}
        return EngineView("Megatron-DeepSpeed (BF16_Optimizer: fp32 gradient accumulation)", points, {})
    view = deepspeed(psi, n, DeepSpeedZero.at_defaults(min(plan.stage, 1)), lp=lp,
                     accumulation=plan.batch.accumulation)
    return EngineView(view.engine.replace("DeepSpeed", "Megatron-DeepSpeed"), view.points, view.cpu)


def fsdp2_shard_ranks(plan: Plan) -> int:
    """Ranks FSDP2 shards the model state over: `memory.shard_ranks`, and under verl its
    `fsdp_size` (`engines.verl.fsdp_size`: 1 for DDP)."""
    return fsdp_size(plan) if plan.backend == "verl" else shard_ranks(plan)


def plan_engine_view(plan: Plan, zero: DeepSpeedZero | None = None, psi: float | None = None) -> EngineView:
    """The engine view for a Plan; `zero` is read from the emitted DeepSpeed config; `psi`
    the parameters of the pipeline stage judged (`stages.Stage.params`; Ψ/(t·p) if None)."""
    psi = local_params(plan) if psi is None else psi
    lp = plan.precision_bytes
    offloaded = plan.recipe.offload.enabled
    if plan.recipe.strategy == "megatron":  # Megatron keeps only its expert group's routed experts
        return megatron(plan, psi - (local_params(plan) - held_params(plan)))
    view = _engine_view(plan, zero, psi, lp, offloaded)
    if fsdp1(plan) is not None:  # FSDP1's state at the peak is FSDP2's (measured; `plan/fsdp1.py`)
        view = replace(view, engine=view.engine.replace("torch FSDP2", "torch FSDP1"))
    if plan.recipe.parallel.expert == 1:
        return view
    return replace(view, notes=(*view.notes, (
        f"expert parallelism ({plan.recipe.parallel.expert}) is not modelled in this engine view: every rank "
        "is counted holding all experts (an over-estimate; the formula view divides them)")))


def _engine_view(plan: Plan, zero: DeepSpeedZero | None, psi: float, lp: int, offloaded: bool) -> EngineView:
    if runs_fsdp2(plan):
        return fsdp2(psi, fsdp2_shard_ranks(plan), reshard=plan.reshard_after_forward, lp=lp,
                     offload=offloaded, pure=pure_bf16(plan))
    if not uses_deepspeed(plan):
        return ddp(psi, pure=pure_bf16(plan))
    settings = zero if zero is not None else DeepSpeedZero.at_defaults(plan.stage)
    inventory = model_inventory(plan.recipe.model)
    persistent = 0.0
    sub_group = None
    n = reduce_ranks(plan)
    if settings.stage == 3 and inventory is not None:
        persistent = min(psi, inventory.persistent(settings.persistence_threshold))
        split = plan.dims.tensor * plan.dims.pipeline
        tensors = inventory.tensors()
        sub_group = largest_sub_group([math.ceil(t / split / n) for t in tensors],
                                      settings.sub_group_size)
    # DeepSpeed shards over all N; a shard group becomes hpZ's secondary copy (`settings`).
    return deepspeed(psi, n, settings, lp=lp, accumulation=plan.batch.accumulation,
                     persistent=persistent, sub_group=sub_group, hp=2 if pure_bf16(plan) else 4,
                     moments=moment_bytes(plan))
