"""The HF Trainer (transformers) as facts: TrainingArguments' names and defaults.

`TrainingArguments` is where batch numbers live for Trainer users, and what fills a
ds_config's `"auto"` values; the Trainer refuses a ds_config whose concrete values
differ from these arguments (`HfTrainerDeepSpeedConfig`).
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.accelerate import distributed_type
from distrecipe.engines.tables import history, training_defaults
from distrecipe.job import Plan
from distrecipe.source import KeyPath

CONFIG_FILE = "training_args.json"
"""The file name `compile` writes the TrainingArguments kwargs under."""

MARKERS = frozenset({
    "per_device_train_batch_size", "output_dir", "learning_rate", "max_grad_norm", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "num_train_epochs", "max_steps", "deepspeed",
    "fsdp", "fsdp_config", "gradient_checkpointing", "warmup_steps", "lr_scheduler_type",
})
"""TrainingArguments names that no ds_config uses (`gradient_accumulation_steps` is shared)."""

SCRIPT_FIELDS = frozenset({
    # transformers' examples/pytorch: ModelArguments
    "model_name_or_path", "model_type", "config_overrides", "config_name", "tokenizer_name", "cache_dir",
    "use_fast_tokenizer", "model_revision", "token", "trust_remote_code", "torch_dtype", "dtype",
    "low_cpu_mem_usage", "ignore_mismatched_sizes",
    # ... and DataTrainingArguments (run_clm, run_mlm, run_glue, run_summarization, run_qa)
    "dataset_name", "dataset_config_name", "train_file", "validation_file", "test_file", "max_train_samples",
    "max_eval_samples", "max_predict_samples", "streaming", "block_size", "overwrite_cache",
    "validation_split_percentage", "preprocessing_num_workers", "keep_linebreaks", "task_name",
    "max_seq_length", "pad_to_max_length", "text_column", "summary_column", "source_prefix",
    "max_source_length", "max_target_length", "val_max_target_length", "num_beams",
    "ignore_pad_token_for_loss", "doc_stride", "version_2_with_negative", "n_best_size", "max_answer_length",
    # TRL's ScriptArguments and ModelConfig
    "dataset_train_split", "dataset_test_split", "dataset_config", "gradient_checkpointing_use_reentrant",
    "ignore_bias_buffers", "attn_implementation", "use_peft", "lora_r", "lora_alpha", "lora_dropout",
    "lora_target_modules", "lora_modules_to_save", "lora_task_type", "use_rslora", "use_dora",
    "load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant",
})
"""The fields of the dataclasses a Trainer script most often parses beside TrainingArguments:
transformers' example scripts' `ModelArguments` and `DataTrainingArguments`, TRL's
`ScriptArguments` and `ModelConfig`. A TrainingArguments file holding no other keys is
read by a known set of dataclasses, none of which takes a removed TrainingArguments field."""

OPTIM = {"adamw": "adamw_torch", "adam": "adamw_torch", "sgd": "sgd"}
"""TrainingArguments' optimizer names; it has no coupled-L2 Adam (DR215 when it matters)."""

MATCHED = ("per_device_train_batch_size", "gradient_accumulation_steps", "max_grad_norm", "learning_rate",
           "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "fp16", "bf16")
"""The TrainingArguments fields the Trainer matches against a ds_config (and `import` reads)."""


def defaults() -> dict[str, Any]:
    """TrainingArguments' defaults for `MATCHED`, from the generated table (`tables/hf.json`,
    read from transformers itself), so the numbers live in one place."""
    table = training_defaults()
    return {key: table[key] for key in MATCHED}


BATCH_FILL = ("the HF Trainer fills them: train_micro_batch_size_per_gpu from --per_device_train_batch_size, "
              "gradient_accumulation_steps from --gradient_accumulation_steps, train_batch_size as their "
              "product × world")
"""Who decides a ds_config's `"auto"` batch under the Trainer, for `import`'s note."""


def uses_fsdp(plan: Plan) -> bool:
    """Whether the Trainer runs FSDP: exactly when the Accelerate config is FSDP (one rank or
    one-rank shards are DDP), since its Accelerator reads that config."""
    return plan.recipe.strategy == "fsdp" and distributed_type(plan) == "FSDP"


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

TRAINER_FILLS: dict[KeyPath, str] = {
    ("train_micro_batch_size_per_gpu",): "TrainingArguments per_device_train_batch_size",
    ("gradient_accumulation_steps",): "TrainingArguments gradient_accumulation_steps",
    ("train_batch_size",):
        "world size × TrainingArguments per_device_train_batch_size × gradient_accumulation_steps",
    ("gradient_clipping",): "TrainingArguments max_grad_norm",
    ("optimizer", "params", "lr"): "TrainingArguments learning_rate",
    ("optimizer", "params", "betas"): "TrainingArguments [adam_beta1, adam_beta2]",
    ("optimizer", "params", "eps"): "TrainingArguments adam_epsilon",
    ("optimizer", "params", "weight_decay"): "TrainingArguments weight_decay",
    ("scheduler", "params", "warmup_min_lr"): "0 (a constant)",
    ("scheduler", "params", "warmup_max_lr"): "TrainingArguments learning_rate",
    ("scheduler", "params", "total_num_steps"): "the number of training steps",
    ("scheduler", "params", "warmup_num_steps"):
        "TrainingArguments warmup_steps (or warmup_ratio × training steps)",
    ("fp16", "enabled"): "TrainingArguments fp16 or fp16_full_eval",
    ("bf16", "enabled"): "TrainingArguments bf16 or bf16_full_eval",
    ("zero_optimization", "reduce_bucket_size"): "the model's hidden_size²",
    ("zero_optimization", "stage3_prefetch_bucket_size"): "0.9 × the model's hidden_size² (at ZeRO-3)",
    ("zero_optimization", "stage3_param_persistence_threshold"): "10 × the model's hidden_size (at ZeRO-3)",
}
"""Every `"auto"` `HfTrainerDeepSpeedConfig` fills (`trainer_config_process` and
`trainer_config_finalize`, transformers 5.10), with the TrainingArguments field it
comes from. Exact key paths only: `bfloat16.enabled` and the unprefixed aliases
(`prefetch_bucket_size`) are not filled. The Trainer runs inside Accelerate, which
fills a few more (`engines.accelerate.DEEPSPEED_FILLS`); `tests/test_auto_fill.py`
runs both on an all-`"auto"` template and compares."""

FLAG_TYPES: dict[str, type] = {
    "per_device_train_batch_size": int, "gradient_accumulation_steps": int, "max_grad_norm": float,
    "learning_rate": float, "adam_beta1": float, "adam_beta2": float, "adam_epsilon": float,
    "weight_decay": float, "fp16": bool, "bf16": bool, "deepspeed": str, "output_dir": str,
}
"""TrainingArguments fields lint reads from a launch command's argv, with the type
HfArgumentParser converts each to (booleans by `engines.argv.TRUE_WORDS`)."""

REMOVED: dict[str, str | None] = {
    "evaluation_strategy": "eval_strategy", "no_cuda": "use_cpu",
    "per_gpu_train_batch_size": "per_device_train_batch_size",
    "per_gpu_eval_batch_size": "per_device_eval_batch_size",
    "push_to_hub_model_id": "hub_model_id", "push_to_hub_organization": "hub_model_id",
    "push_to_hub_token": "hub_token", "include_inputs_for_metrics": "include_for_metrics",
    "xpu_backend": "ddp_backend", "torchdynamo": "torch_compile_backend", "sharded_ddp": "fsdp",
    "fsdp_min_num_params": "fsdp_config's min_num_params",
    "fsdp_transformer_layer_cls_to_wrap": "fsdp_config's transformer_layer_cls_to_wrap",
    "adafactor": "optim: adafactor",
    "fp16_backend": None, "half_precision_backend": None, "fp16_opt_level": None, "use_mps_device": None,
    "tpu_num_cores": None, "tpu_metrics_debug": None, "overwrite_output_dir": None, "save_safetensors": None,
    "use_ipex": None, "jit_mode_eval": None, "mp_parameters": None, "past_index": None, "ray_scope": None,
    "use_legacy_prediction_loop": None, "group_by_length": None,
}
"""Fields transformers 4's `TrainingArguments` had (as its `to_dict()` wrote them in the
corpus's ms-swift `training_args.json`, transformers 4.33) → the field that replaces
each, None where none does. lint names one only while the judging transformers release
lacks it (`engines.tables.training_arguments`), so the table cannot outlive the fact;
which release removed it is read from the tables (`field_release`)."""

def field_release(field: str) -> str | None:
    """Where the TrainingArguments `field`, which the judging transformers release lacks,
    exists in another release's table: `removed in transformers 5.0.0 (last in 4.57.6); …`
    or `a field of transformers ≥ 5.23.0; …`; None when no release here has it."""
    return history("hf", lambda found: field in found["training_arguments"], noun="field")
