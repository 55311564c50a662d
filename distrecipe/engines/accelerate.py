"""Accelerate (1.15) as facts: its config YAML's keys, names and what `accelerate launch` refuses.

Which keys each section accepts, and whether Accelerate refuses or ignores others,
are in the generated key tables (`engines/tables`, read from the installed Accelerate).
"""

from __future__ import annotations

from typing import Any, Literal

from distrecipe.job import Plan
from distrecipe.source import KeyPath

CONFIG_FILE = "accelerate_config.yaml"
"""The file name `compile` writes the Accelerate config under."""

MARKERS = frozenset({"distributed_type", "compute_environment"})
"""Keys that make a file an Accelerate config (`distrecipe.engines.native.detect`)."""

DistributedType = Literal["NO", "MULTI_GPU", "FSDP", "DEEPSPEED"]
"""The `distributed_type` values distrecipe writes."""


def distributed_type(plan: Plan) -> DistributedType:
    """Which of Accelerate's backends carries the plan.

    Sharding over one rank is replication, so it is DDP (`MULTI_GPU`) whatever the
    stage; FSDP2 in Accelerate refuses a mesh with no dimension to shard over.
    """
    if plan.backend == "accelerate-deepspeed":
        return "DEEPSPEED"
    if plan.stage == 0 or (plan.dims.shard_group == 1 and plan.dims.sequence == 1):
        return "MULTI_GPU" if plan.dims.world > 1 else "NO"
    return "FSDP"


DATA_PARALLEL_TYPES = frozenset({"NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                                 "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU", "MULTI_NEURON"})
"""`DistributedType` values that run plain data parallelism (one per device kind; `NO` is one
process): each restates a DDP plan. `XLA` and `MEGATRON_LM` are engines a recipe does not model."""


def restates(plan: Plan, written: object) -> bool:
    """A config's `distributed_type` says the same as the plan's: the same backend, or for a
    DDP plan any data-parallel device kind (`MULTI_GPU` over one process is still one process)."""
    ours = distributed_type(plan)
    return written == ours or (ours in ("NO", "MULTI_GPU") and written in DATA_PARALLEL_TYPES)


MIXED_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}
"""A recipe precision → Accelerate's `mixed_precision`."""

STATE_DICT_TYPE = {"full": "FULL_STATE_DICT", "sharded": "SHARDED_STATE_DICT"}
"""`checkpoint.weights` → `fsdp_state_dict_type` (FSDP2's default, unset, is
`SHARDED_STATE_DICT`: `FullyShardedDataParallelPlugin.set_state_dict_type`)."""

BATCH_FILL = ("the training script decides them: the DataLoader's batch_size is the micro-batch per GPU, "
              "ACCELERATE_GRADIENT_ACCUMULATION_STEPS (or Accelerator(gradient_accumulation_steps=N)) the "
              "accumulation")
"""Where a job launched with an Accelerate config (which has no batch keys) takes its batch."""

FSDP1_ONLY = ("fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch")
"""FSDP1 keys whose request FSDP2 drops (`use_orig_params` and `sync_module_states` are
dropped too, but FSDP2 behaves as if they were on, so nothing is lost)."""
FSDP2_DROPPED: dict[str, str | None] = {
    "fsdp_sharding_strategy": None,
    "fsdp_backward_prefetch": ("backward_prefetch is not supported in FSDP2. "
                               "Setting backward prefetch to None."),
    "fsdp_forward_prefetch": None,
}
"""What Accelerate does with each of `FSDP1_ONLY` under `fsdp_version: 2`: it accepts all
three, logging the warning written here, or nothing (None). `accelerate launch` exports
each as `FSDP_*`; `FullyShardedDataParallelPlugin.__post_init__` (1.16.0,
`utils/dataclasses.py`) reads `FSDP_SHARDING_STRATEGY` and `FSDP_FORWARD_PREFETCH` only
under version 1, and reads `FSDP_BACKWARD_PREFETCH` under both, then drops it with the
warning (:1778). The oracle test builds the installed plugin and holds this to it."""
RESHARD_OF = {"FULL_SHARD": True, "SHARD_GRAD_OP": False, "NO_SHARD": False}
"""`accelerate to-fsdp2`'s mapping from a sharding strategy to `reshard_after_forward`."""
DS_FILE_CONFLICTS = (
    "gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
    "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
)
"""`deepspeed_config` keys Accelerate refuses beside `deepspeed_config_file` (and `mixed_precision`)."""

FSDP1_SHARDING = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
"""Accelerate's `FSDP_SHARDING_STRATEGY` list: a name, or its position + 1 (torch's
`ShardingStrategy` values 1..5, `_HYBRID_SHARD_ZERO2` being the fifth)."""
FSDP1_STAGE = {"FULL_SHARD": (3, False), "SHARD_GRAD_OP": (2, False), "NO_SHARD": (0, False),
               "HYBRID_SHARD": (3, True), "HYBRID_SHARD_ZERO2": (2, True)}
"""An FSDP1 sharding strategy → (recipe stage, hybrid: shards span one node and replicate across)."""


def fsdp1_strategy(value: object) -> str | None:
    """The strategy name an FSDP1 `fsdp_sharding_strategy` / `fsdp_reshard_after_forward`
    value means, the way `FullyShardedDataParallelPlugin.__post_init__` reads it; None if
    it names none (a bool is FSDP2's spelling, which FSDP1 refuses)."""
    if isinstance(value, bool):
        return None
    text = str(value).strip().upper().lstrip("_")
    if text.isdigit():
        return FSDP1_SHARDING[int(text) - 1] if 1 <= int(text) <= len(FSDP1_SHARDING) else None
    return text if text in FSDP1_STAGE else None


FSDP_VERSION_DEFAULT = 1
"""`fsdp_version` when a config does not say: FSDP1 (the plugin's `FSDP_VERSION` default)."""


def version_number(value: Any) -> int | None:
    """The FSDP version an Accelerate `fsdp_version` or a Trainer `fsdp_config.version` value
    means (both read it with `int(...)`), None for a value that names neither 1 nor 2."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    return int(text) if text in ("1", "2") else None


EMITTED_DEFAULTS: dict[tuple[str | int, ...], object] = {
    ("compute_environment",): "LOCAL_MACHINE",  # ClusterConfig.from_yaml_file fills these three
    ("use_cpu",): False,
    ("debug",): False,
    ("machine_rank",): 0,
    ("num_machines",): 1,
    ("main_process_port",): 29500,
    ("rdzv_backend",): "static",
    ("same_network",): True,
    ("fsdp_config", "fsdp_version"): FSDP_VERSION_DEFAULT,
    ("fsdp_config", "fsdp_reshard_after_forward"): True,
    ("fsdp_config", "fsdp_offload_params"): False,
    ("fsdp_config", "fsdp_activation_checkpointing"): False,
    ("deepspeed_config", "zero3_init_flag"): False,
}
"""Accelerate's default for a key the emitter writes (what `ClusterConfig.from_yaml_file`
fills in, `accelerate launch`'s argument defaults); `import` does not carry an added key
whose emitted value is this, and `diff` compares a key one side leaves out with it."""

DEEPSPEED_FILLS: dict[KeyPath, str] = {
    ("train_micro_batch_size_per_gpu",): "the prepared DataLoader's batch_size",
    ("train_batch_size",): "micro × gradient_accumulation_steps × num_processes",
    ("gradient_accumulation_steps",): "the Accelerator's gradient_accumulation_steps (else 1)",
    ("gradient_clipping",): "deepspeed_config.gradient_clipping, else 1.0",
    ("fp16", "enabled"): "mixed_precision",
    ("bf16", "enabled"): "mixed_precision",
    ("zero_optimization", "stage"): "deepspeed_config.zero_stage, else 2",
    ("zero_optimization", "offload_optimizer", "device"):
        "deepspeed_config.offload_optimizer_device, else none",
    ("zero_optimization", "offload_param", "device"): "deepspeed_config.offload_param_device, else none",
    ("zero_optimization", "offload_optimizer", "nvme_path"): "deepspeed_config.offload_optimizer_nvme_path",
    ("zero_optimization", "offload_param", "nvme_path"): "deepspeed_config.offload_param_nvme_path",
    ("zero_optimization", "stage3_gather_16bit_weights_on_model_save"):
        "deepspeed_config.zero3_save_16bit_model, else false",
    ("zero_optimization", "reduce_bucket_size"): "the model's hidden_size²",
    ("zero_optimization", "stage3_prefetch_bucket_size"): "0.9 × the model's hidden_size²",
    ("zero_optimization", "stage3_param_persistence_threshold"): "10 × the model's hidden_size",
    ("optimizer", "params", "lr"): "DummyOptim's lr",
    ("optimizer", "params", "weight_decay"): "DummyOptim's weight_decay",
    ("scheduler", "params", "warmup_min_lr"): "0 (a constant)",
    ("scheduler", "params", "warmup_max_lr"): "the optimizer's lr",
    ("scheduler", "params", "warmup_num_steps"): "DummyScheduler's warmup_num_steps",
    ("scheduler", "params", "total_num_steps"):
        "DummyScheduler's total_num_steps (it raises if none is given)",
    ("steps_per_print",): "infinity, always (Accelerate turns DeepSpeed's step logging off)",
}
"""Every `"auto"` Accelerate (1.15) fills in a ds_config, and from what: `DeepSpeedPlugin`
from the config YAML's `deepspeed_config` (environment `ACCELERATE_DEEPSPEED_*`),
`set_mixed_precision`, and `Accelerator._prepare_deepspeed` from the DataLoader, the
model's hidden size, DummyOptim and DummyScheduler. Any other `"auto"` leaf makes
`deepspeed_config_process` raise "not found in kwargs" at start-up.
`tests/test_auto_fill.py` runs Accelerate on an all-`"auto"` template and compares."""
