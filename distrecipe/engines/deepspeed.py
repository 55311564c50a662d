"""DeepSpeed (0.19) as facts: the ds_config's keys, names, defaults and refusals.

Which keys each section accepts, and their defaults, are in the generated key tables
(`engines/tables`, read from the installed DeepSpeed). `zero_optimization` is the one
Plan → ZeRO block mapping: the emitter writes it and
the planner reads the knobs it sets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.engines import TORCH_OPTIMIZERS
from distrecipe.errors import Refusal
from distrecipe.job import Plan
from distrecipe.source import KeyPath

CONFIG_FILE = "ds_config.json"
"""The file name every target writes the ds_config under and points at."""

OPTIMIZER_TYPE = TORCH_OPTIMIZERS
"""DeepSpeed's `optimizer.type` names: torch's class names."""

FP16_LOSS_SCALING = {
    "loss_scale": 0,
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "min_loss_scale": 1,
}
"""Dynamic loss scaling as DeepSpeed's docs recommend (`loss_scale: 0` = dynamic)."""


GATHER_ON_SAVE = "stage3_gather_16bit_weights_on_model_save"
"""The ZeRO-3 key that gathers the whole 16-bit model on save (`checkpoint.weights: full`);
DeepSpeed also reads it as `stage3_gather_fp16_weights_on_model_save`."""

SCHEDULERS = {"constant": "WarmupLR", "linear": "WarmupDecayLR", "cosine": "WarmupCosineLR"}
"""`schedule.decay` → DeepSpeed's scheduler (deepspeed/runtime/lr_schedules.py): each warms up
from its floor to the optimizer's lr, then stays, decays linearly to the floor at
`total_num_steps`, or follows a cosine to `cos_min_ratio` × lr. Their defaults differ from
the recipe's meaning (1000 warmup steps, a log-shaped warmup, a cosine floor of 0.0001), so
the emitter writes those three out."""

BATCH_KEYS = {"global": "train_batch_size", "micro": "train_micro_batch_size_per_gpu",
              "accumulation": "gradient_accumulation_steps"}
"""A recipe's `batch.*` name → the ds_config key for the same number (lint and import read it)."""


MARKERS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization", "gradient_clipping",
    "fp16", "bf16", "optimizer", "scheduler", "steps_per_print", "wall_clock_breakdown",
    "gradient_accumulation_steps", "zero_allow_untested_optimizer", "activation_checkpointing",
})
"""Keys that make a file a ds_config (`distrecipe.engines.native.detect`)."""

IGNORE_KEY = "//distrecipe-ignore"
"""The JSON suppression list (`"//distrecipe-ignore": ["DR311"]`); DeepSpeed ignores it too."""


AUTOTP_STAGES = frozenset({0, 1, 2, 3})
"""ZeRO stages DeepSpeed 0.19 trains under AutoTP (`tensor_parallel.autotp_size`): all of
them (`DeepSpeedEngine._configure_tensor_parallel_states`: "AutoTP + ZeRO stage 3 is
supported for both inference and training"; the 0.16 tutorial named stages 0-2)."""


def autotp_size(plan: Plan) -> int:
    """The `tensor_parallel.autotp_size` for `plan`: its tensor degree, or 0 (AutoTP off).

    A Megatron strategy brings its own mpu to `deepspeed.initialize` (DR218), so only
    the other strategies split layers with AutoTP.
    """
    return plan.dims.tensor if plan.dims.tensor > 1 and plan.recipe.strategy != "megatron" else 0


def autotp_refusal(plan: Plan) -> Refusal | None:
    """Why DeepSpeed cannot run `plan` under AutoTP (a refusal naming the recipe keys it
    is about), or None when it can.

    AutoTP builds a two-dimensional (data, tensor) device mesh with data = world //
    autotp_size (`groups._init_tp_mesh_device`): no pipeline stages and no Ulysses
    sequence group have a place in it.
    """
    if not autotp_size(plan):
        return None
    if plan.stage not in AUTOTP_STAGES:
        return Refusal(f"AutoTP does not train with ZeRO stage {plan.stage}",
                       keys=("stage", "parallel.tensor"))
    if plan.dims.pipeline > 1 or plan.dims.sequence > 1:
        dims = plan.dims
        return Refusal(f"AutoTP's (data, tensor) mesh has no pipeline or sequence dimension "
                       f"(tensor {dims.tensor}, pipeline {dims.pipeline}, sequence {dims.sequence})",
                       keys=("parallel.pipeline", "parallel.sequence", "parallel.tensor"))
    return None


def batch_ranks(plan: Plan) -> int:
    """The ranks `DeepSpeedConfig` multiplies micro × accumulation by for `train_batch_size`.

    `deepspeed.initialize` builds the config before AutoTP makes its groups and passes
    it no mpu, so the config counts every rank (world / `sequence_parallel_size`), a
    tensor-parallel group's ranks each once, although they share one batch: the
    samples per step are still `plan.batch.global_`. A Megatron mpu, and the plain data
    parallel case, count the data-parallel ranks.
    """
    return plan.dims.dp * (autotp_size(plan) or 1)


def autos(node: Any, path: KeyPath = ()) -> Iterator[KeyPath]:
    """The key path of every `"auto"` value in `node`, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from autos(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from autos(value, (*path, index))
    elif node == "auto":
        yield path


def enabled(block: Any) -> bool:
    """A ds_config block (`fp16`, `bf16`) whose `enabled` is true."""
    return isinstance(block, dict) and block.get("enabled") is True


def zero_optimization(plan: Plan, *, hf_auto: bool = False) -> dict[str, Any]:
    """The `zero_optimization` block for `plan`; `hf_auto` leaves the HF-filled buckets "auto"."""
    stage = plan.stage
    zero: dict[str, Any] = {"stage": stage}
    if stage == 0:
        return zero
    b = plan.buckets
    zero["overlap_comm"] = True
    zero["contiguous_gradients"] = True
    if b.reduce_bucket_size is not None:
        zero["reduce_bucket_size"] = "auto" if hf_auto else b.reduce_bucket_size
    off = plan.recipe.offload
    if off.optimizer != "none":
        zero["offload_optimizer"] = _offload(off.optimizer, plan)
    if off.params != "none":
        zero["offload_param"] = _offload(off.params, plan)
    if stage == 3:
        if b.stage3_prefetch_bucket_size is not None:
            zero["stage3_prefetch_bucket_size"] = "auto" if hf_auto else b.stage3_prefetch_bucket_size
        if b.stage3_param_persistence_threshold is not None:
            zero["stage3_param_persistence_threshold"] = (
                "auto" if hf_auto else b.stage3_param_persistence_threshold
            )
        weights = plan.recipe.checkpoint.weights if plan.recipe.checkpoint else None
        if weights is not None:
            zero[GATHER_ON_SAVE] = weights == "full"
        if plan.dims.hybrid:
            zero["zero_hpz_partition_size"] = plan.dims.shard_group
    return zero


def _offload(device: str, plan: Plan) -> dict[str, Any]:
    block: dict[str, Any] = {"device": device, "pin_memory": plan.recipe.offload.pin_memory}
    if device == "nvme":
        block["nvme_path"] = plan.recipe.offload.nvme_path
    return block


def emitted_default(path: KeyPath, stage: int) -> object:
    """DeepSpeed's own default for a key the emitter writes, or `NO_DEFAULT`.

    `import` leaves out of a recipe's `native` section a key the emitter adds that
    the input did not state, when the emitted value is what DeepSpeed would have used
    anyway; any other added key is removed at compile (`null`). Read from DeepSpeed
    0.19's pydantic models and constants; only the keys `translator/deepspeed.py` writes.
    """
    if path == ("zero_optimization", "overlap_comm"):
        return stage == 3  # DeepSpeedZeroConfig's validator: on at stage 3 only
    return _EMITTED_DEFAULTS.get(path, NO_DEFAULT)


NO_DEFAULT = object()
"""`emitted_default`'s answer for a key it knows no engine default of."""
_EMITTED_DEFAULTS: dict[KeyPath, object] = {
    ("gradient_clipping",): 1.0,
    ("wall_clock_breakdown",): False,
    ("zero_optimization", "stage"): 0,
    ("zero_optimization", "contiguous_gradients"): True,
    ("zero_optimization", "reduce_bucket_size"): 500_000_000,
    ("zero_optimization", "stage3_prefetch_bucket_size"): 50_000_000,
    ("zero_optimization", "stage3_param_persistence_threshold"): 100_000,
    ("zero_optimization", "stage3_gather_16bit_weights_on_model_save"): False,
    ("zero_optimization", "zero_hpz_partition_size"): 1,
    ("zero_optimization", "offload_optimizer", "pin_memory"): True,
    ("zero_optimization", "offload_param", "pin_memory"): True,
    **{("fp16", key): value for key, value in FP16_LOSS_SCALING.items()},
    ("activation_checkpointing", "partition_activations"): False,
    ("activation_checkpointing", "contiguous_memory_optimization"): False,
    ("activation_checkpointing", "cpu_checkpointing"): False,
    ("optimizer", "params", "adam_w_mode"): True,
}
