"""From what tensors hold to what the GPU must have: allocated, reserved, needed.

Three numbers, always named apart:

* **allocated**: the most bytes live tensors hold at once (`torch.cuda.max_memory_allocated`).
  The larger of two moments: the start of backward (model state after forward, every
  layer's saved activations, the loss's gradients or one recomputed layer, and the
  engine's communication buffers) and inside the optimizer step (the engine view's
  peak plus a torch optimizer's `foreach` temporaries, or ZeRO's flat 16-bit copy of the
  partition or sub-group whose fp32 gradient it is making: `flatten_copy`).
* **reserved**: what PyTorch's caching allocator has taken from the driver
  (`torch.cuda.max_memory_reserved`, what torchtitan and most published tables report).
  It exceeds allocated by freed blocks the cache cannot reuse: FSDP2's gradient shards
  from the previous step live in one buffer per block, each smaller than an activation
  tensor, so after `zero_grad` they stay cached beside the activations (*stranded*), and
  a calibrated share for splitting and rounding (`FRAGMENTATION`). The other way round, a
  tensor larger than any block backward freed takes a new segment on top of backward's
  reservation (`segments`): ZeRO-1/2's step copies (`zero_step`), the `BF16_Optimizer`'s
  fp32 copy of a gradient (`pipeline.fp32_copy_segment`).
* **needed**: reserved at the binding moment plus what lives outside the allocator (CUDA
  context, cuBLAS and NCCL buffers: `CONTEXT`). "Fits?" compares this with
  `cluster.gpu_memory`. The segments are not in it: a failed cudaMalloc makes the
  allocator free its unsplit cached segments and retry (`CUDACachingAllocator.cpp`), so
  they show in nvidia-smi (`shown`) only on a GPU with room for them.

Communication buffers, per engine, at the start of backward:

* FSDP2 (`fully_shard` per block, one unit for norm + output head, as torchtitan and
  Accelerate wrap Llama): the head's unit is gathered whole (16-bit), the block being
  computed and the one prefetched are gathered (2 blocks), and the reduce-scatter of a
  block holds its unsharded 16-bit gradient and the copy in the reduce dtype.
* FSDP1 (`plan/fsdp1.py`, asked for by the engines' own `native` keys): FSDP2's, and none
  on one rank without parameter mixed precision (`NO_SHARD`).
* DeepSpeed ZeRO-3: the block being computed and the prefetched one, and the output head
  (gathered module by module). Its reduce bucket is in the engine view.
* ZeRO-1/2, DDP: their buckets are in the engine view; nothing is gathered.
* Megatron-DeepSpeed's pipeline stages: the embedding's saved mask, DeepSpeed's pipeline
  buffers and the `BF16_Optimizer`'s fp32 gradient copy (`pipeline.py`).

`FRAGMENTATION` and `CONTEXT` are calibrated on the published runs in
`tests/corpus/gpu/published.csv` (`tests/test_plan_gpu.py` states the error of every row).
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.runner import runs_fsdp2, uses_deepspeed
from distrecipe.job import Plan
from distrecipe.model_shapes import inventory as model_inventory
from distrecipe.plan.activations import Activations
from distrecipe.plan.engine import EngineView, fsdp2_shard_ranks
from distrecipe.plan.fsdp1 import holds_no_buffers
from distrecipe.plan.memory import pure_bf16
from distrecipe.plan.pipeline import (
    COPY,
    fp32_copy_segment,
    largest_parameter,
    runs_pipeline_engine,
    stage_parts,
)
from distrecipe.plan.stages import Stage
from distrecipe.plan.traffic import reduce_bytes
from distrecipe.plan.units import GiB

FRAGMENTATION = 0.10
"""Reserved beyond allocated (+ stranded) for block rounding and splitting; calibrated."""
CONTEXT = 2 * GiB
"""Per-GPU memory outside PyTorch's allocator: CUDA context, cuBLAS workspaces, NCCL."""


@dataclass(frozen=True, slots=True)
class Memory:
    """Per-GPU bytes: allocated at each moment, reserved and needed."""

    backward: dict[str, float]
    """Live at the start of backward, by part."""
    step: dict[str, float]
    """Live inside the optimizer step, by part."""
    stranded: float
    """Freed, but cached in blocks too small for the activations (counted in reserved)."""
    segments: float = 0.0
    """New segments on top of what backward reserved (`memory`)."""
    beneath: float = 0.0
    """Allocated at the start of backward under the segments: the backward parts less the
    share of the segments' tensors they already count."""

    @property
    def moment(self) -> str:
        return "backward" if sum(self.backward.values()) >= sum(self.step.values()) else "step"

    @property
    def parts(self) -> dict[str, float]:
        return self.backward if self.moment == "backward" else self.step

    @property
    def allocated(self) -> float:
        return sum(self.parts.values())

    @property
    def retained(self) -> float:
        """Reserved at the binding moment: what the cache cannot give back, so what must fit."""
        stranded = self.stranded if self.moment == "backward" else 0.0
        return (self.allocated + stranded) * (1 + FRAGMENTATION)

    @property
    def reserved(self) -> float:
        """`max_memory_reserved` on a GPU with room: `retained`, or backward's reservation and
        the segments on top. A GPU without that room still runs: a failed cudaMalloc
        makes the allocator free its unsplit cached segments (backward's freed activations)
        and retry."""
        if not self.segments:
            return self.retained
        return max(self.retained, (self.beneath + self.stranded) * (1 + FRAGMENTATION) + self.segments)

    @property
    def shown(self) -> float:
        """What nvidia-smi shows on a GPU with room: reserved and the CUDA context."""
        return self.reserved + CONTEXT

    @property
    def needed(self) -> float:
        """What the GPU must hold: `retained` and the CUDA context."""
        return self.retained + CONTEXT


def buffers(plan: Plan) -> dict[str, float]:
    """Communication buffers alive at the start of backward (see the module's list)."""
    inventory = model_inventory(plan.recipe.model)
    sharded = runs_fsdp2(plan) or (plan.recipe.strategy == "zero" and plan.stage == 3)
    if inventory is None or not sharded or plan.recipe.strategy == "megatron" or holds_no_buffers(plan):
        return {}
    lp, t = plan.precision_bytes, plan.dims.tensor
    block = inventory.block_params / t
    head = inventory.head / t
    out = {"gathered blocks": 2 * lp * block, "gathered head": lp * head}
    if runs_fsdp2(plan):
        reduce_bytes = 4 if reduce_fp32(plan) else lp
        out["reduce-scatter"] = (lp + reduce_bytes) * block
    return out


def reduce_fp32(plan: Plan) -> bool:
    """FSDP2 reduces in fp32 under verl and torchtitan (`mixed_precision_reduce`), in
    the parameters' 16-bit dtype under Accelerate; `reduce_dtype` where stated
    (`traffic.reduce_bytes`)."""
    return reduce_bytes(plan) == 4


IN_PLACE_STEP = ("adamw_torch_fused", "paged_adamw_32bit")
"""The HF Trainer's `optim` values (`native.hf.optim`) whose AdamW keeps fp32 m and v, as
planned, but steps without a `foreach` temporary: torch's `fused` AdamW, and bitsandbytes'
32-bit AdamW (`Optimizer2State.update_step`: one `optimizer_update_32bit` kernel per
tensor, in place; `paged` puts m and v in CUDA managed memory, still counted on the GPU)."""


def foreach_temporaries(plan: Plan, engine: EngineView) -> float:
    """torch's `foreach` AdamW (Hugging Face's and Accelerate's default `adamw_torch`)
    makes one fp32 list the size of Adam's v (`_foreach_sqrt`): half the optimizer
    state on the GPU. DeepSpeed's FusedAdam, torchtitan's `fused` AdamW and the Trainer's
    `optim` values in `IN_PLACE_STEP` work in place."""
    in_place = plan.recipe.native.hf.get("optim") in IN_PLACE_STEP
    if uses_deepspeed(plan) or plan.backend == "torchrun" or in_place:
        return 0.0
    return engine.points["step"].get("optimizer", 0.0) / 2


def stranded(plan: Plan, psi: float, act: Activations | None) -> float:
    """FSDP2's gradient shards (4Ψ/N in fp32, 2Ψ/N under pure bf16), freed by `zero_grad`
    and kept in per-block segments smaller than one activation tensor (2·s·b·h bytes)."""
    inventory = model_inventory(plan.recipe.model)
    if not runs_fsdp2(plan) or plan.recipe.offload.enabled or inventory is None or act is None:
        return 0.0
    h, s = plan.recipe.model.hidden_size or 0, plan.recipe.batch.seq_len or 0
    shards = fsdp2_shard_ranks(plan)
    hp = 2.0 if pure_bf16(plan) else 4.0
    per_block = hp * inventory.block_params / plan.dims.tensor / shards
    return hp * psi / shards if per_block < 2.0 * s * plan.batch.micro * h else 0.0


def zero_optimizer(plan: Plan) -> bool:
    """DeepSpeed's optimizer steps the plan: its engine (`uses_deepspeed`), or Megatron-
    DeepSpeed's pipeline engine, whose ZeRO-1 is the same `stage_1_and_2.py`."""
    return uses_deepspeed(plan) or runs_pipeline_engine(plan)


def flatten_copy(plan: Plan, engine: EngineView) -> float:
    """ZeRO-1..3 make each fp32 gradient in `step()` as `flatten(16-bit grads).to(fp32)`:
    the flat 16-bit copy is alive beside the fp32 one, `lp` bytes per element of what is
    being stepped, until the expression ends (DeepSpeed 0.19.8).

    * ZeRO-3 (`stage3.py:2686`, `_prepare_fp32_grad_for_sub_group`): one sub-group at a time.
    * ZeRO-1/2 (`stage_1_and_2.py:3117-3119`): one optimizer param group's partition at a
      time, `del flat_grad_partition` right after the cast; the group's 16-bit gradients,
      the reduce buckets and the optimizer state are alive then too (`free_grad_in_param_list`
      comes at l.3128), which is the engine view's step point. The view holds one
      partition of fp32 gradients (one param group; a no-decay group of norms is small).
    * With the optimizer offloaded, stage 1/2 copy gradients to the host in backward
      (`cpu_offload` branch, l.3078) and stage 3 steps on the host: no GPU copy.

    In fp32, and under pure bf16 (`bf16_master_weights_and_grads`: the copy is bf16), the
    flattened tensor already has the master dtype and `.to` returns it: no second copy.
    """
    if not zero_optimizer(plan) or plan.stage == 0 or plan.precision_bytes == 4 or pure_bf16(plan):
        return 0.0
    return engine.points["step"].get("fp32 gradients", 0.0) * plan.precision_bytes / 4


def largest_gradient(plan: Plan, stage: Stage) -> float:
    """Elements of the stage's largest gradient per tensor-parallel rank: Megatron's fused
    tensors (`pipeline.largest_parameter`), else the largest tensor Hugging Face's model
    holds (`model_shapes.inventory`: the embedding, or the head, or one matrix)."""
    inventory = model_inventory(plan.recipe.model)
    if plan.recipe.strategy == "megatron" or inventory is None:
        return largest_parameter(plan, stage)
    return max(*inventory.tensors(), inventory.head) / plan.dims.tensor


def zero_step(plan: Plan, engine: EngineView, stage: Stage | None) -> tuple[float, float]:
    """(beyond the flattened gradients, new segments): the ZeRO-1/2 step's fp64 norm copy
    and the segments the step adds to backward's reservation (docs/plan.md, "The step's
    segments"). DeepSpeed 0.19.8 `stage_1_and_2.py`, as in 2022: `get_grad_norm_direct`
    takes each gradient's piece of the partition `.to(torch.double)` (`get_norm_dtype`) one
    at a time (8 bytes × e, e the largest piece: the largest gradient, at most the
    partition P), then `step` flattens the partition (`flatten_copy`) and casts it to the
    master dtype. The caching allocator splits the fp64 block for the two copies when they
    fit in it, so the step's new memory is the larger of 8e and the two copies; `memory`
    adds it on top where no block backward freed can hold it (activation tensors, one
    recomputed layer, the loss). Offloaded optimizers norm on the host; ZeRO-3's sub-group step and the
    `BF16_Optimizer` (fp32 gradients already) are not this path."""
    if stage is None or not zero_optimizer(plan) or plan.stage not in (1, 2) \
            or plan.recipe.offload.optimizer != "none":
        return 0.0, 0.0
    step = engine.points["step"]
    cast = step.get("fp32 gradients", step.get("bf16 gradient copy", 0.0))
    if not cast:
        return 0.0, 0.0
    hp = 2.0 if "bf16 gradient copy" in step else 4.0
    partition = cast / hp
    fp64 = 8.0 * min(largest_gradient(plan, stage), partition)
    copies = flatten_copy(plan, engine) + cast
    return max(0.0, fp64 - copies), max(fp64, copies)


def memory(plan: Plan, engine: EngineView, act: Activations | None, psi: float,
           stage: Stage | None = None) -> Memory:
    """Allocated at both moments, and what stays stranded in the cache; `stage` the pipeline
    stage judged, for what Megatron-DeepSpeed holds beyond the layers (`pipeline.py`)."""
    backward = dict(engine.points["forward"])
    if act is not None:
        backward["activations (saved)"] = act.total
        backward["loss / recompute (backward)"] = act.backward
    backward.update(buffers(plan))
    backward.update(stage_parts(plan, stage, act))
    step = dict(engine.points["step"])
    temporaries = foreach_temporaries(plan, engine)
    if temporaries:
        step["optimizer temporaries"] = temporaries
    if flatten_copy(plan, engine):
        step["flattened gradients (transient)"] = flatten_copy(plan, engine)
    norm, step_segments = zero_step(plan, engine, stage)
    if norm:
        step["fp64 gradient norm (transient)"] = norm
    backward = {k: v for k, v in backward.items() if v}
    freed = 0.0 if act is None else max(act.head, act.backward)  # backward's largest freed blocks, at most
    copy = 0.0 if stage is None else fp32_copy_segment(plan, stage)
    # the copy's share above the start of backward is a part of it; its segment replaces it
    beneath = sum(v for k, v in backward.items() if k != COPY)
    segments = max((s for s in (step_segments, copy) if s > freed), default=0.0)
    return Memory(backward, step, stranded(plan, psi, act), segments, beneath)
