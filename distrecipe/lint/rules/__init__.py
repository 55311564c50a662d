"""The registry: every lint rule, by code. The one place a rule is switched on.

Codes are stable forever (suppressions and CI configs name them). DR1xx is the batch
arithmetic shared with recipes (DR105: heads and sequence over the tensor and sequence
degrees, which `compile` refuses too), DR220 is the verl batch fact `compile --target verl`
also reports, DR3xx are lint's own (DR39x the platforms' job files: Kubernetes manifests and
SkyPilot tasks), DR40x TRL's config files and DR41x OpenRLHF's command lines, DR9xx the
engines' own verdicts (`lint --engines`).
The severity here is the default; the engine applies `[tool.distrecipe] severity` over it.
"""

from __future__ import annotations

from typing import get_args

from distrecipe.engines import KINDS, Kind
from distrecipe.lint.rule import Rule
from distrecipe.lint.rules import (
    accelerate,
    accelerate_values,
    axolotl,
    batch,
    checkpoint,
    deepspeed,
    duplicates,
    engines,
    hf,
    llamafactory,
    openrlhf,
    plan,
    platforms,
    recipe,
    script,
    trainer,
    trl,
    unknown_keys,
    value_types,
    verl,
    world,
)


def _only(kind: Kind) -> frozenset[Kind]:
    return frozenset({kind})


RECIPE, DEEPSPEED, ACCELERATE, VERL, HF, AXOLOTL, LLAMAFACTORY = map(_only, get_args(Kind)[:7])
TRAINJOB, RAYJOB, PYTORCHJOB, SKYPILOT, TRL, OPENRLHF = map(_only, get_args(Kind)[7:])
MANIFESTS: frozenset[Kind] = TRAINJOB | RAYJOB | PYTORCHJOB
TRAINER: frozenset[Kind] = HF | AXOLOTL | LLAMAFACTORY
"""The kinds that run the HF Trainer with the file's TrainingArguments (and the ds_config it names)."""
RECIPE_DS: frozenset[Kind] = RECIPE | DEEPSPEED
NATIVE: frozenset[Kind] = DEEPSPEED | ACCELERATE | VERL | HF

RULES: dict[str, Rule] = {rule.code: rule for rule in (
    Rule("DR100", "recipe-invalid", "error", RECIPE, recipe.recipe_invalid),
    Rule("DR101", "batch-mismatch", "error", RECIPE_DS, batch.batch_mismatch, pair=True),
    Rule("DR102", "batch-not-exact", "error", RECIPE_DS, batch.batch_not_exact, pair=True),
    Rule("DR103", "dp-exceeds-global", "error", RECIPE_DS, batch.dp_exceeds_global, pair=True),
    Rule("DR104", "no-batch-size", "error", RECIPE_DS, batch.no_batch_size),
    Rule("DR105", "heads-do-not-split", "error", RECIPE, recipe.heads_do_not_split),
    Rule("DR106", "checkpoint-cannot-resume", "error", RECIPE, checkpoint.checkpoint_cannot_resume),
    Rule("DR220", "verl-batch", "error", VERL, verl.batch_rules),
    Rule("DR300", "world-unknown", "info", DEEPSPEED, batch.world_unknown),
    Rule("DR301", "world-contradicts-option", "error", RECIPE | ACCELERATE | VERL | HF,
         world.world_contradicts_option),
    Rule("DR302", "world-sources-disagree", "error", ACCELERATE | DEEPSPEED, world.world_sources_disagree,
         pair=True),
    Rule("DR303", "duplicate-key", "warning", frozenset(KINDS), duplicates.duplicate_key),
    Rule("DR304", "duplicate-key-refused", "error", frozenset(KINDS), duplicates.duplicate_key_refused),
    Rule("DR310", "auto-in-raw-deepspeed", "error", DEEPSPEED, deepspeed.auto_in_raw_deepspeed,
         pair=True),
    Rule("DR311", "deepspeed-unknown-key", "warning", DEEPSPEED,
         unknown_keys.deepspeed_ignored_key, section=True),
    Rule("DR312", "deepspeed-removed-key", "error", DEEPSPEED, deepspeed.removed_key, section=True),
    Rule("DR313", "deepspeed-refused-key", "error", DEEPSPEED,
         unknown_keys.deepspeed_refused_key, section=True),
    Rule("DR314", "comment-key", "info", DEEPSPEED | ACCELERATE, unknown_keys.comment_key, section=True),
    Rule("DR315", "auto-filled", "info", DEEPSPEED, deepspeed.auto_filled),
    Rule("DR316", "deepspeed-wrong-type", "error", DEEPSPEED, value_types.deepspeed_wrong_type),
    Rule("DR317", "deepspeed-misspelt-key", "error", DEEPSPEED,
         unknown_keys.deepspeed_misspelt_key, section=True),
    Rule("DR318", "deepspeed-accumulation-left-to-accelerate", "warning", DEEPSPEED,
         deepspeed.accumulation_left_to_accelerate),
    Rule("DR319", "auto-filled-under-trainer-only", "warning", DEEPSPEED,
         deepspeed.auto_filled_under_trainer_only, pair=True),
    Rule("DR320", "offload-param-below-stage3", "warning", DEEPSPEED, deepspeed.offload_param_below_stage3),
    Rule("DR321", "fp16-and-bf16", "error", DEEPSPEED | HF | LLAMAFACTORY, deepspeed.fp16_and_bf16),
    Rule("DR322", "zero-setting-refused-at-stage", "error", DEEPSPEED,
         deepspeed.zero_setting_refused_at_stage),
    Rule("DR323", "offload-without-optimizer", "warning", DEEPSPEED, deepspeed.offload_without_optimizer,
         pair=True),
    Rule("DR324", "bf16-master-weights-refused", "error", DEEPSPEED, deepspeed.bf16_master_weights_refused),
    Rule("DR330", "accelerate-value-refused", "error", ACCELERATE, accelerate_values.value_refused,
         section=True),
    Rule("DR331", "ds-config-outside-repository", "warning", ACCELERATE | TRAINER,
         accelerate.ds_config_outside_repository),
    Rule("DR332", "fsdp1-key-dropped-silently", "error", ACCELERATE,
         accelerate.fsdp1_key_dropped_silently, section=True),
    Rule("DR340", "accelerate-ignored-key", "warning", ACCELERATE,
         unknown_keys.accelerate_ignored_key, section=True),
    Rule("DR341", "accelerate-unknown-key", "error", ACCELERATE,
         unknown_keys.accelerate_unknown_top_level_key, section=True),
    Rule("DR342", "fsdp1-key-under-fsdp2", "warning", ACCELERATE,
         accelerate.fsdp1_key_under_fsdp2, section=True),
    Rule("DR343", "deepspeed-file-conflict", "error", ACCELERATE, accelerate.deepspeed_file_conflict,
         pair=True),
    Rule("DR344", "deepspeed-file-without-accumulation", "warning", ACCELERATE,
         accelerate.deepspeed_file_without_accumulation, pair=True),
    Rule("DR345", "deepspeed-file-without-zero", "error", ACCELERATE, accelerate.deepspeed_file_without_zero,
         pair=True),
    Rule("DR346", "accelerate-parallelism-size", "error", ACCELERATE, accelerate.parallelism_size),
    Rule("DR347", "accelerate-processes-per-machine", "error", ACCELERATE, accelerate.processes_per_machine),
    Rule("DR348", "accelerate-no-num-processes", "error", ACCELERATE, accelerate.no_num_processes, pair=True),
    Rule("DR349", "accelerate-misspelt-key", "error", ACCELERATE,
         unknown_keys.accelerate_misspelt_key, section=True),
    Rule("DR350", "verl-deprecated-micro-batch", "error", VERL, verl.deprecated_micro_batch, section=True),
    Rule("DR351", "verl-unknown-actor-strategy", "error", VERL, verl.unknown_actor_strategy, section=True),
    Rule("DR352", "verl-unknown-key", "error", VERL, unknown_keys.verl_unknown_key, section=True),
    Rule("DR353", "verl-rollout-memory", "error", VERL, verl.rollout_memory),
    Rule("DR354", "verl-rollout-layout", "error", VERL | RECIPE, verl.rollout_layout),
    Rule("DR355", "verl-hydra-prefix-refused", "error", VERL, unknown_keys.verl_prefix_refused, section=True),
    Rule("DR356", "verl-entry-removed", "error", VERL, verl.removed_entry_module),
    Rule("DR357", "verl-micro-batch-unset", "error", VERL, verl.micro_batch_unset),
    Rule("DR360", "trainer-deepspeed-mismatch", "error", TRAINER, hf.deepspeed_mismatch, pair=True),
    Rule("DR361", "trainer-best-model-strategies", "error", HF | LLAMAFACTORY, hf.best_model_strategies),
    Rule("DR362", "trainer-removed-field", "warning", HF, hf.removed_field, pair=True),
    Rule("DR363", "trainer-flag-removed", "error", HF, trainer.removed_flag),
    Rule("DR364", "trainer-value-refused", "error", HF, trainer.value_refused),
    Rule("DR365", "comment-ends-command", "error", HF | VERL, script.comment_ends_command),
    Rule("DR368", "script-nothing-judged", "info", HF, script.nothing_judged),
    Rule("DR369", "trainer-fsdp-reshard-version", "error", HF, hf.fsdp_reshard_version),
    Rule("DR366", "trainer-removed-field-refused", "error", HF, hf.removed_field_refused, pair=True),
    Rule("DR367", "trainer-scheduler-overridden", "warning", HF | LLAMAFACTORY, hf.scheduler_overridden,
         pair=True),
    Rule("DR370", "memory-does-not-fit", "error", RECIPE, plan.memory_does_not_fit),
    Rule("DR371", "zero3-where-zero2-fits", "info", RECIPE, plan.zero3_where_zero2_fits),
    Rule("DR372", "memory-tight", "warning", RECIPE, plan.memory_tight),
    Rule("DR380", "axolotl-unknown-key", "warning", AXOLOTL, axolotl.unknown_key),
    Rule("DR381", "axolotl-misspelt-key", "error", AXOLOTL, axolotl.misspelt_key),
    Rule("DR382", "axolotl-wrong-type", "error", AXOLOTL, axolotl.wrong_type),
    Rule("DR383", "axolotl-parallelism-size", "error", AXOLOTL, axolotl.parallelism_size),
    Rule("DR385", "llamafactory-unknown-key", "error", LLAMAFACTORY, llamafactory.unknown_key),
    Rule("DR386", "llamafactory-megatron-not-judged", "info", LLAMAFACTORY, llamafactory.megatron_not_judged),
    Rule("DR390", "job-name", "error", MANIFESTS, platforms.name),
    Rule("DR391", "trainjob-reserved-env", "error", TRAINJOB, platforms.reserved_env),
    Rule("DR392", "trainjob-processes-per-node", "error", TRAINJOB, platforms.processes_per_node),
    Rule("DR393", "pytorchjob-replicas", "error", PYTORCHJOB, platforms.pytorchjob_replicas),
    Rule("DR394", "rayjob-worker-replicas", "error", RAYJOB, platforms.rayjob_worker_replicas),
    Rule("DR395", "rayjob-refused", "error", RAYJOB, platforms.rayjob_refused),
    Rule("DR396", "rayjob-cluster-kept", "warning", RAYJOB, platforms.rayjob_cluster_kept),
    Rule("DR397", "job-world-mismatch", "error", MANIFESTS | SKYPILOT, platforms.job_world_mismatch),
    Rule("DR398", "pytorchjob-without-gpus", "error", PYTORCHJOB, platforms.pytorchjob_without_gpus),
    Rule("DR399", "skypilot-task-refused", "error", SKYPILOT, platforms.skypilot_task_refused),
    Rule("DR400", "trl-removed-key", "error", TRL, trl.removed_key),
    Rule("DR401", "trl-wrong-type", "error", TRL, trl.wrong_type),
    Rule("DR402", "trl-grpo-batch", "error", TRL, trl.grpo_batch, pair=True),
    Rule("DR403", "trl-unknown-key", "warning", TRL, trl.unknown_key),
    Rule("DR404", "trl-unknown-argument", "error", TRL, trl.unknown_argument),
    Rule("DR410", "openrlhf-unknown-option", "error", OPENRLHF, openrlhf.unknown_option),
    Rule("DR411", "openrlhf-value-refused", "error", OPENRLHF, openrlhf.value_refused),
    Rule("DR412", "openrlhf-batch", "error", OPENRLHF, openrlhf.batch),
    Rule("DR413", "openrlhf-refused-combination", "error", OPENRLHF, openrlhf.refused_combination),
    Rule("DR900", "engine-refuses", "error", NATIVE, engines.engine_refuses),
    Rule("DR901", "engine-differs", "error", NATIVE, engines.engine_differs),
    Rule("DR902", "engine-not-run", "warning", NATIVE, engines.engine_not_run),
)}
"""Every rule, in code order (the order `explain --list` prints)."""
