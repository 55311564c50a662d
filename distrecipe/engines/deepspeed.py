"""DeepSpeed (0.19) as facts: the ds_config's keys, names, defaults and refusals.

Which keys each section accepts, their defaults and their aliases are in the generated
key tables (`engines/tables`, read from the installed DeepSpeed); `config_default` and
`zero_setting` are how the emitter's import and the planner read them, so no default is
written here twice. `zero_optimization` is the one Plan → ZeRO block mapping: the
emitter writes it and the planner reads the knobs it sets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from distrecipe.engines import TORCH_OPTIMIZERS
from distrecipe.engines.tables import section
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


NO_DEFAULT = object()
"""`config_default`'s answer for a key DeepSpeed has no default of (it reads it without one,
or derives it from other keys: the batch sizes)."""

ZERO = "zero_optimization"
"""The ds_config section of the ZeRO knobs (`zero_setting`)."""

OVERLAP_COMM_STAGE = 3
"""The one ZeRO stage at which DeepSpeed turns `overlap_comm` on when a config leaves it
out (or null). The key table cannot say so, its default there is null: the validator
`DeepSpeedZeroConfig.overlap_comm_valid` derives it (DeepSpeed 0.19.8,
deepspeed/runtime/zero/config.py:386, `self.overlap_comm = self.stage ==
ZeroStageEnum.weights`)."""

ADAM_W_MODE = True
"""DeepSpeed's `optimizer.params.adam_w_mode` when a config leaves it out: its Adam runs as
AdamW. The key table has no entry, `optimizer.params` being free-form: the engine pops it
with this default (DeepSpeed 0.19.8, deepspeed/runtime/config.py:73 `ADAM_W_MODE_DEFAULT`,
read at runtime/engine.py:2487)."""


def config_default(path: KeyPath, stage: int) -> object:
    """DeepSpeed's own value for the key at `path` when a ds_config at ZeRO `stage` leaves it
    out, or `NO_DEFAULT`: the key table's default, else what DeepSpeed derives
    (`OVERLAP_COMM_STAGE`, `ADAM_W_MODE`).

    `import` leaves out of a recipe's `native` section a key the emitter adds that the
    input did not state when the emitted value is this one; any other added key is
    removed at compile (`null`).
    """
    if tuple(path) == ("optimizer", "params", "adam_w_mode"):
        return ADAM_W_MODE
    derived = stage_default(path, stage)
    return _table_default(path) if derived is NO_DEFAULT else derived


def stage_default(path: KeyPath, stage: int) -> object:
    """What `DeepSpeedConfig` itself derives from the ZeRO stage for a key a ds_config leaves
    out (or null): `overlap_comm`, on at `OVERLAP_COMM_STAGE` only; else `NO_DEFAULT`. (The
    optimizer's `adam_w_mode` is read later, by the engine, so the config keeps no value.)"""
    if tuple(path) == (ZERO, "overlap_comm"):
        return stage == OVERLAP_COMM_STAGE
    return NO_DEFAULT


def stage_of(config: object) -> int | None:
    """The ZeRO stage DeepSpeed runs a ds_config at: its `zero_optimization.stage`, the key
    table's default where it says none; None where the file's value is no stage (`"auto"`)."""
    zero = config.get(ZERO) if isinstance(config, Mapping) else None
    stage = zero.get("stage") if isinstance(zero, Mapping) else None
    stage = _table_default((ZERO, "stage")) if stage is None else stage
    return stage if type(stage) is int else None


def _table_default(path: KeyPath) -> Any:
    """The key table's default at `path` (a JSON value), or `NO_DEFAULT` where it has none
    or a null one (DeepSpeed derives the value)."""
    found = section("deepspeed", tuple(map(str, path[:-1])))
    has, value = found.default(str(path[-1])) if found is not None else (False, None)
    return value if has and value is not None else NO_DEFAULT


def _spellings(path: tuple[str, ...], key: str) -> tuple[str, ...]:
    """`key` and the aliases DeepSpeed also reads it under in the section at `path` (the key
    table's `alias_of`: ZeRO-3's `stage3_` prefixes), the plain name first."""
    found = section("deepspeed", path)
    keys = found.keys if found is not None else {}
    return (key, *(name for name, entry in keys.items() if entry.get("alias_of") == key))


def zero_setting(zero: Mapping[str, Any], *key: str) -> Any:
    """What DeepSpeed reads for `key` (a name in `zero_optimization`, or a path below it:
    `"offload_param", "device"`) from the block `zero`: the value stated under its name or
    an alias (`_spellings`), else `config_default` at the block's stage. A null reads as
    unstated, as DeepSpeed reads `overlap_comm: null`; a null sub-block as an empty one."""
    *within, name = key
    block: Mapping[str, Any] = zero
    for part in within:
        block = block.get(part) or {}
    for spelled in _spellings((ZERO, *within), name):
        if block.get(spelled) is not None:
            return block[spelled]
    stage = zero.get("stage")
    stage = stage if stage is not None else _table_default((ZERO, "stage"))
    found = config_default((ZERO, *key), int(stage))
    if found is NO_DEFAULT:
        raise KeyError(f"DeepSpeed has no default for {'.'.join((ZERO, *key))}")
    return found
