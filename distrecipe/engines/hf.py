"""The HF Trainer (transformers) as facts: TrainingArguments' names and defaults.

`TrainingArguments` is where batch numbers live for Trainer users, and what fills a
ds_config's `"auto"` values; the Trainer refuses a ds_config whose concrete values
differ from these arguments (`HfTrainerDeepSpeedConfig`).
"""

from __future__ import annotations

from typing import Any

CONFIG_FILE = "training_args.json"
"""The file name `compile` writes the TrainingArguments kwargs under."""

MARKERS = frozenset({
    "per_device_train_batch_size", "output_dir", "learning_rate", "max_grad_norm", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "num_train_epochs", "max_steps", "deepspeed",
    "fsdp", "fsdp_config", "gradient_checkpointing", "warmup_steps", "lr_scheduler_type",
})
"""TrainingArguments names that no ds_config uses (`gradient_accumulation_steps` is shared)."""

OPTIM = {"adamw": "adamw_torch", "adam": "adamw_torch", "sgd": "sgd"}
"""TrainingArguments' optimizer names; it has no coupled-L2 Adam (DR215 when it matters)."""

DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_grad_norm": 1.0,
    "learning_rate": 5e-5, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8,
    "weight_decay": 0.0, "fp16": False, "bf16": False,
}
"""TrainingArguments' defaults (transformers), for the keys the Trainer matches (and `import` reads)."""

BATCH_FILL = ("the HF Trainer fills them: train_micro_batch_size_per_gpu from --per_device_train_batch_size, "
              "gradient_accumulation_steps from --gradient_accumulation_steps, train_batch_size as their "
              "product × world")
"""Who decides a ds_config's `"auto"` batch under the Trainer, for `import`'s note."""

TRAINER_FSDP_KEYS = {
    "fsdp_version": "version",
    "fsdp_reshard_after_forward": "reshard_after_forward",
    "fsdp_offload_params": "cpu_offload",
    "fsdp_auto_wrap_policy": "auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap": "transformer_layer_cls_to_wrap",
    "fsdp_state_dict_type": "state_dict_type",
    "fsdp_cpu_ram_efficient_loading": "cpu_ram_efficient_loading",
    "fsdp_activation_checkpointing": "activation_checkpointing",
}
"""Accelerate's FSDP2 key → the Trainer's `fsdp_config` key (it reads no
`sync_module_states` under FSDP2, and wants the layer classes as a list)."""
