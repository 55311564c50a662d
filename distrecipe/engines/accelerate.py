"""Accelerate (1.15) as facts: its config YAML's keys, names and what `accelerate launch` refuses.

Which keys each section accepts, and whether Accelerate refuses or ignores others,
are in the generated key tables (`engines/tables`, read from the installed Accelerate).
"""

from __future__ import annotations

from typing import Literal

CONFIG_FILE = "accelerate_config.yaml"
"""The file name `compile` writes the Accelerate config under."""

MARKERS = frozenset({"distributed_type", "compute_environment"})
"""Keys that make a file an Accelerate config (`distrecipe.engines.native.detect`)."""

DistributedType = Literal["NO", "MULTI_GPU", "FSDP", "DEEPSPEED"]
"""The `distributed_type` values distrecipe writes."""

MIXED_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}
"""A recipe precision → Accelerate's `mixed_precision`."""

FSDP1_ONLY = ("fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch")
"""FSDP1 keys whose request FSDP2 silently drops (`use_orig_params` and `sync_module_states`
are dropped too, but FSDP2 behaves as if they were on, so nothing is lost)."""
RESHARD_OF = {"FULL_SHARD": True, "SHARD_GRAD_OP": False, "NO_SHARD": False}
"""`accelerate to-fsdp2`'s mapping from a sharding strategy to `reshard_after_forward`."""
DS_FILE_CONFLICTS = (
    "gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
    "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
)
"""`deepspeed_config` keys Accelerate refuses beside `deepspeed_config_file` (and `mixed_precision`)."""
