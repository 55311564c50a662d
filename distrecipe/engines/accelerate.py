"""Accelerate (1.15) as facts: its config YAML's keys, names and what `accelerate launch` refuses.

Key sets read from the installed Accelerate: the fields of `ClusterConfig` (top-level
keys, checked), the `fsdp_*` launch arguments (inside `fsdp_config`, not checked) and
the `parallelism_config_*` names (inside `parallelism_config`, not checked).
`tests/test_lint_oracle.py` derives them again from Accelerate and compares.
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

TOP_LEVEL = frozenset({
    "command_file", "commands", "compute_environment", "debug", "deepspeed_config",
    "distributed_type", "downcast_bf16", "dynamo_config", "enable_cpu_affinity", "fp8_config",
    "fsdp_config", "gpu_ids", "machine_rank", "main_process_ip", "main_process_port",
    "main_training_function", "megatron_lm_config", "mixed_precision", "mpirun_config",
    "num_machines", "num_processes", "parallelism_config", "rdzv_backend", "same_network",
    "tpu_env", "tpu_name", "tpu_use_cluster", "tpu_use_sudo", "tpu_vm", "tpu_zone", "use_cpu",
})
LEGACY_TOP_LEVEL = frozenset({"fp16", "dynamo_backend"})
"""Old keys `ClusterConfig.process_config` still converts (to `mixed_precision`, `dynamo_config`)."""
FSDP_KEYS = frozenset({
    "fsdp_activation_checkpointing", "fsdp_activation_checkpointing_offload", "fsdp_auto_wrap_policy",
    "fsdp_backward_prefetch", "fsdp_cpu_ram_efficient_loading", "fsdp_forward_prefetch",
    "fsdp_ignored_modules", "fsdp_min_num_params", "fsdp_offload_params", "fsdp_reshard_after_forward",
    "fsdp_sharding_strategy", "fsdp_state_dict_type", "fsdp_sync_module_states",
    "fsdp_transformer_layer_cls_to_wrap", "fsdp_use_orig_params", "fsdp_version",
})
PARALLELISM_KEYS = frozenset({
    "parallelism_config_cp_backend", "parallelism_config_cp_comm_strategy", "parallelism_config_cp_size",
    "parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
    "parallelism_config_sp_attn_implementation", "parallelism_config_sp_backend",
    "parallelism_config_sp_seq_length", "parallelism_config_sp_seq_length_is_variable",
    "parallelism_config_sp_size", "parallelism_config_tp_size",
})
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
