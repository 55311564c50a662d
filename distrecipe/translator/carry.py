"""What each file distrecipe writes does with each recipe field: the equivalence table as data.

One row per recipe field (its dotted key), one cell per file kind: the ds_config, the
Accelerate YAML, verl's overrides, the TrainingArguments JSON, TRL's config (a subclass of
TrainingArguments: the Trainer's cell unless the row says otherwise, as for GRPO's `rl`
keys) and OpenRLHF's command line (the `--group.option` it writes). A cell says the field is
carried exactly (under the key it names), mapped (a translation the text describes),
not carried (the file has no place for it: the training script decides, and a finding
with the cell's code names the key whenever a recipe states it), or not applicable (the
setting means nothing to that file: the model's shape is the planner's, the launcher's
settings are `launch`'s). A cell that carries the field spells the native keys it is
written as (`keys`): a finding on a field one file cannot carry names them, since the
value came from a file that says it so (`gradient_clipping`, `main_process_port`), and
that key, not the recipe's, is what its author knows. The emitters report through
`findings` here; `import`, `diff` and `docs/equivalence.md` read the same rows, and a test
holds every `exact` cell to what the emitter writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from distrecipe.engines import Engine
from distrecipe.engines.hydra import verl_pairs
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.recipe import recipe_values
from distrecipe.translator.codes import finding

How = Literal["exact", "mapped", "not carried", "not applicable"]
Column = Literal[Engine, "trl", "openrlhf"]
"""The table's columns: the engines' files, and the RL trainers' (TRL's config, OpenRLHF's line)."""
COLUMN_ORDER: tuple[Column, ...] = get_args(Column)


@dataclass(frozen=True, slots=True)
class Cell:
    """How one file kind carries one recipe field."""

    how: How
    native: str = ""
    """The key it becomes (exact), the translation (mapped), or who decides it instead."""
    code: str | None = None
    """The finding a stated value gets where it is not carried."""
    keys: tuple[str, ...] = ()
    """The native keys the file writes the field as: an exact cell's `native`, a mapped
    cell's keys (each spelt in its text)."""


def exact(key: str) -> Cell:
    return Cell("exact", key, keys=(key,))


def mapped(text: str, *keys: str) -> Cell:
    """A translation; `keys` are the native keys it writes (each appears in `text`)."""
    return Cell("mapped", text, keys=keys)


def script(who: str) -> Cell:
    """Not carried: the file has no key for it, so the training script decides (DR222)."""
    return Cell("not carried", who, "DR222")


NA = Cell("not applicable")


def unused(why: str) -> Cell:
    """The engine has no such setting: a stated value is named (DR234, info), as it does nothing there."""
    return Cell("not carried", why, "DR234")


LAUNCHED = unused("`launch`'s argv and environment, not this file's")
PLAN = Cell("not applicable", "read by `plan` only")
LAUNCH = Cell("not applicable", "`launch`'s argv and environment")
CASES = Cell("mapped", "the strategy, stage, offload and parallelism rows above")
REFUSED = Cell("mapped", "none: the target refuses the recipe (DR208)")
ACTOR = "actor_rollout_ref.actor"
NO_BLOCKS = unused("DeepSpeed wraps no blocks")
KERNELS = unused("the script's kernels (`plan` prices them)")
NO_ROLLOUT = unused("no rollout: this file trains only")


def unwritten(option: str) -> Cell:
    """Not carried by OpenRLHF's command line: it has `option`, which compile does not write,
    so OpenRLHF's default runs (DR222)."""
    return Cell("not carried", f"{option} is not written: OpenRLHF's default runs", "DR222")


def no_option(what: str) -> Cell:
    """Not carried by OpenRLHF's command line: no option says it (DR222)."""
    return Cell("not carried", f"no option of train_ppo_ray: {what}", "DR222")


GROUPS = ("actor", "ref", "critic", "reward")
"""OpenRLHF's model groups, each placed by `--GROUP.num_nodes` and `--GROUP.num_gpus_per_node`."""


@dataclass(frozen=True, slots=True)
class Row:
    deepspeed: Cell
    accelerate: Cell
    verl: Cell
    hf: Cell
    openrlhf: Cell
    trl: Cell | None = None
    """TRL's config where it says otherwise than the Trainer's; None: the `hf` cell, since a
    TRL config is a `TrainingArguments` subclass holding the Trainer's kwargs."""

    def cell(self, column: Column) -> Cell:
        if column == "trl":
            return self.hf if self.trl is None else self.trl
        cell: Cell = getattr(self, column)  # the fields are named after the columns
        return cell


def _same(cell: Cell) -> Row:
    return Row(cell, cell, cell, cell, cell)


def _keys(prefix: str) -> list[str]:
    """Every field of a section that one cell serves whole: the model's shape (the planner's),
    `launch.*` (`launch`'s argv and the platforms' files, no engine config's)."""
    from distrecipe.recipe import Batch, Cluster, Model, Recipe

    blank = Recipe(name="", model=Model(), cluster=Cluster(), strategy="ddp", batch=Batch())
    return [key for key in recipe_values(blank) if key.startswith(prefix)]


ROWS_ABOVE = Cell("mapped", "the precision and parallelism rows above (DR227-DR231, DR239 where an "
                             "engine has no key)")
OPTIMIZER = script("the script's optimizer (Accelerate builds none)")
SCHEDULE = script("the script's scheduler (Accelerate builds none)")

FIELDS: dict[str, Row] = {
    "name": _same(Cell("not applicable", "the file's header comment")),
    **{key: _same(PLAN) for key in _keys("model.") if key not in ("model.hidden_size", "model.layer_cls")},
    "kernels.compile": Row(KERNELS, KERNELS, KERNELS,
                           mapped("torch_compile (written when true)", "torch_compile"), KERNELS),
    "kernels.loss": _same(PLAN),
    "kernels.mlp": _same(PLAN),
    "kernels.fused_ops": Row(KERNELS, KERNELS, KERNELS,
                             mapped("use_liger_kernel (written for liger)", "use_liger_kernel"), KERNELS),
    "model.hidden_size": Row(mapped("the ZeRO buckets: zero_optimization.reduce_bucket_size = hidden², "
                                    "zero_optimization.stage3_prefetch_bucket_size and "
                                    "zero_optimization.stage3_param_persistence_threshold",
                                    "zero_optimization.reduce_bucket_size",
                                    "zero_optimization.stage3_prefetch_bucket_size",
                                    "zero_optimization.stage3_param_persistence_threshold"),
                             PLAN, PLAN, PLAN, PLAN),
    "model.layer_cls": Row(NO_BLOCKS,
                           exact("fsdp_config.fsdp_transformer_layer_cls_to_wrap"),
                           unused("verl wraps its model's own blocks"),
                           exact("fsdp_config.transformer_layer_cls_to_wrap"), NO_BLOCKS),
    "cluster.nodes": Row(LAUNCH, exact("num_machines"), exact("trainer.nnodes"), LAUNCH,
                         mapped(", ".join(f"--{g}.num_nodes" for g in GROUPS) + ": every model group on all "
                                "the recipe's GPUs", *(f"--{g}.num_nodes" for g in GROUPS))),
    "cluster.gpus_per_node": Row(LAUNCH, mapped("num_processes = nodes × gpus_per_node", "num_processes"),
                                 exact("trainer.n_gpus_per_node"), LAUNCH,
                                 mapped(", ".join(f"--{g}.num_gpus_per_node" for g in GROUPS)
                                        + "; --vllm.num_engines = nodes × gpus_per_node (one colocated "
                                        "engine a GPU)",
                                        *(f"--{g}.num_gpus_per_node" for g in GROUPS), "--vllm.num_engines")),
    "cluster.device": Row(LAUNCH, mapped("`MULTI_GPU`/`FSDP` fall back to one process on CPU (DR209)"),
                          mapped("not runnable without GPUs"), exact("use_cpu"),
                          mapped("not runnable without GPUs")),
    **{f"cluster.{key}": _same(PLAN) for key in ("gpu_memory", "headroom", "cpu_memory", "gpu", "peak_tflops",
                                                  "intra_node_bandwidth", "inter_node_bandwidth",
                                                  "network_latency")},
    "strategy": Row(CASES, CASES, CASES, CASES,
                    mapped("zero: --ds.zero_stage; OpenRLHF runs DeepSpeed only, another strategy is refused "
                           "(DR208)", "--ds.zero_stage")),
    "stage": Row(CASES, CASES, CASES, CASES, exact("--ds.zero_stage")),
    **{key: Row(CASES, CASES, CASES, CASES, REFUSED)
       for key in ("parallel.pipeline", "parallel.virtual_stages")},
    # The version also chooses the key the stage is written as, so those keys are its too.
    "fsdp_version": Row(
        unused("DeepSpeed runs its own ZeRO, not torch FSDP"),
        mapped("fsdp_config.fsdp_version, and the stage then as fsdp_config.fsdp_sharding_strategy (1) or "
               "fsdp_config.fsdp_reshard_after_forward (2)", "fsdp_config.fsdp_version",
               "fsdp_config.fsdp_sharding_strategy", "fsdp_config.fsdp_reshard_after_forward"),
        mapped(f"{ACTOR}.strategy: fsdp (1) or fsdp2 (2)", f"{ACTOR}.strategy"),
        mapped("fsdp_config.version, and the stage then as fsdp_config.reshard_after_forward: a strategy "
               "name (1) or a boolean (2)", "fsdp_config.version", "fsdp_config.reshard_after_forward"),
        REFUSED),
    "parallel.tensor": Row(mapped("tensor_parallel.autotp_size (AutoTP)", "tensor_parallel.autotp_size"),
                           mapped("parallelism_config.parallelism_config_tp_size",
                                  "parallelism_config.parallelism_config_tp_size"),
                           mapped("Megatron tensor_model_parallel_size", "tensor_model_parallel_size"),
                           CASES, REFUSED),
    "parallel.sequence": Row(mapped("sequence_parallel_size (Ulysses)", "sequence_parallel_size"),
                             mapped("parallelism_config.parallelism_config_cp_size (FSDP), "
                                    "parallelism_config.parallelism_config_sp_size (DeepSpeed)",
                                    "parallelism_config.parallelism_config_cp_size",
                                    "parallelism_config.parallelism_config_sp_size"),
                             mapped("ulysses_sequence_parallel_size; Megatron context_parallel_size",
                                    "ulysses_sequence_parallel_size", "context_parallel_size"), CASES,
                             REFUSED),
    "parallel.shard_group": Row(mapped("zero_optimization.zero_hpz_partition_size (ZeRO++)",
                                       "zero_optimization.zero_hpz_partition_size"),
                                mapped("parallelism_config.parallelism_config_dp_shard_size, "
                                       "parallelism_config.parallelism_config_dp_replicate_size",
                                       "parallelism_config.parallelism_config_dp_shard_size",
                                       "parallelism_config.parallelism_config_dp_replicate_size"),
                                mapped(f"{ACTOR}.fsdp_config.fsdp_size", f"{ACTOR}.fsdp_config.fsdp_size"),
                                CASES, unwritten("--ds.zpg (ZeRO++'s hierarchical partition)")),
    "offload.optimizer": Row(exact("zero_optimization.offload_optimizer.device"), CASES, CASES, CASES,
                             unwritten("--ds.adam_offload")),
    "offload.params": Row(exact("zero_optimization.offload_param.device"), CASES, CASES, CASES,
                          no_option("the trained models' parameters stay on the GPUs (--ref.offload and "
                                    "--reward.offload are the frozen models')")),
    "offload.nvme_path": Row(mapped("zero_optimization.offload_optimizer.nvme_path, "
                                    "zero_optimization.offload_param.nvme_path",
                                    "zero_optimization.offload_optimizer.nvme_path",
                                    "zero_optimization.offload_param.nvme_path"), CASES, CASES, CASES,
                             no_option("no NVMe offload")),
    **{key: Row(ROWS_ABOVE, ROWS_ABOVE, ROWS_ABOVE, ROWS_ABOVE,
                no_option("OpenRLHF's DeepSpeed settings decide"))
       for key in ("optimizer.state_dtype", "optimizer.master_weights", "reduce_dtype",
                   "parallel.tensor_sequence", "parallel.tensor_overlap", "parallel.first_stage_layers",
                   "parallel.last_stage_layers", "offload.activations")},
    "offload.pin_memory": Row(exact("zero_optimization.offload_optimizer.pin_memory"),
                              unused("FSDP2's CPU offload pins its own buffers"),
                              unused("FSDP2's CPU offload pins its own buffers"), mapped("the ds_config's"),
                              no_option("OpenRLHF's DeepSpeed settings decide")),
    "batch.micro": Row(exact("train_micro_batch_size_per_gpu"),
                       mapped("the header comment: the DataLoader's batch_size"),
                       exact(f"{ACTOR}.ppo_micro_batch_size_per_gpu"), exact("per_device_train_batch_size"),
                       exact("--train.micro_batch_size")),
    "batch.accumulation": Row(exact("gradient_accumulation_steps"),
                              mapped("ACCELERATE_GRADIENT_ACCUMULATION_STEPS, named in the header"),
                              mapped("global / (DP × micro): verl derives it"),
                              exact("gradient_accumulation_steps"),
                              mapped("global / (the actor's GPUs × micro): DeepSpeed derives it")),
    "batch.global": Row(mapped("train_batch_size (× tensor under AutoTP)", "train_batch_size"),
                        mapped("the header comment"),
                        mapped(f"{ACTOR}.ppo_mini_batch_size × rollout.n", f"{ACTOR}.ppo_mini_batch_size"),
                        mapped("per_device_train_batch_size × gradient_accumulation_steps × world"),
                        exact("--train.batch_size")),
    "batch.seq_len": _same(PLAN),
    "batch.micro_policy": _same(Cell("not applicable", "how resolve picks batch.micro: auto")),
    "parallel.expert": Row(mapped("the script's deepspeed.moe.layer.MoE(ep_size=...) (DR232)"), REFUSED,
                           mapped("Megatron expert_model_parallel_size (FSDP: DR208)"), REFUSED,
                           no_option("the model's own MoE layers decide")),
    "batch.micro_tokens": Row(REFUSED, REFUSED, exact(f"{ACTOR}.ppo_max_token_len_per_gpu"), REFUSED,
                              unwritten("--train.dynamic_batch_enable with --train.max_tokens_per_gpu")),
    "precision": Row(mapped("bf16.enabled / fp16.enabled", "bf16.enabled", "fp16.enabled"),
                     exact("mixed_precision"),
                     mapped(f"{ACTOR}.fsdp_config.mixed_precision.param_dtype; Megatron dtype",
                            f"{ACTOR}.fsdp_config.mixed_precision.param_dtype"),
                     mapped("bf16 / fp16", "bf16", "fp16"), exact("--ds.param_dtype")),
    "optimizer.name": Row(mapped("optimizer.type (adam: Adam with optimizer.params.adam_w_mode false)",
                                 "optimizer.type", "optimizer.params.adam_w_mode"),
                          OPTIMIZER, exact(f"{ACTOR}.optim.optimizer"),
                          exact("optim"),
                          mapped("adamw: OpenRLHF's own (DeepSpeed's Adam, decoupled weight decay); another "
                                 "name is not carried (DR222)")),
    "optimizer.lr": Row(exact("optimizer.params.lr"), OPTIMIZER, exact(f"{ACTOR}.optim.lr"),
                        exact("learning_rate"), exact("--actor.adam.lr")),
    "optimizer.betas": Row(exact("optimizer.params.betas"), OPTIMIZER,
                           mapped(f"{ACTOR}.optim.betas; Megatron adam_beta1/adam_beta2",
                                  f"{ACTOR}.optim.betas"),
                           mapped("adam_beta1, adam_beta2", "adam_beta1", "adam_beta2"),
                           mapped("--actor.adam.betas B1 B2", "--actor.adam.betas")),
    "optimizer.eps": Row(exact("optimizer.params.eps"), OPTIMIZER,
                         mapped(f"{ACTOR}.optim.override_optimizer_config.eps (Megatron adam_eps)",
                                f"{ACTOR}.optim.override_optimizer_config.eps"),
                         exact("adam_epsilon"), exact("--actor.adam.eps")),
    "optimizer.weight_decay": Row(exact("optimizer.params.weight_decay"), OPTIMIZER,
                                  exact(f"{ACTOR}.optim.weight_decay"), exact("weight_decay"),
                                  exact("--actor.adam.weight_decay")),
    "schedule.decay": Row(mapped("scheduler.type: WarmupLR (constant), WarmupDecayLR (linear), "
                                 "WarmupCosineLR (cosine), warming up linearly "
                                 "(scheduler.params.warmup_type) from scheduler.params.warmup_min_lr 0 "
                                 "(warmup_min_ratio) to "
                                 "scheduler.params.warmup_max_lr = optimizer.lr",
                                 "scheduler.type", "scheduler.params.warmup_min_lr",
                                 "scheduler.params.warmup_max_lr"),
                          SCHEDULE,
                          mapped(f"{ACTOR}.optim.lr_scheduler_type (constant, cosine); Megatron "
                                 "lr_decay_style", f"{ACTOR}.optim.lr_scheduler_type"),
                          mapped("lr_scheduler_type: constant(_with_warmup), linear, cosine(_with_min_lr)",
                                 "lr_scheduler_type"),
                          mapped("--actor.lr_scheduler: constant_with_warmup, linear, cosine_with_min_lr "
                                 "(transformers' get_scheduler, as OpenRLHF calls it)",
                                 "--actor.lr_scheduler")),
    "schedule.warmup_steps": Row(exact("scheduler.params.warmup_num_steps"), SCHEDULE,
                                 exact(f"{ACTOR}.optim.lr_warmup_steps"), exact("warmup_steps"),
                                 no_option("a warmup is a ratio (--actor.lr_warmup_ratio)")),
    "schedule.warmup_ratio": Row(mapped("scheduler.params.warmup_num_steps = ⌈ratio × total_steps⌉, as the "
                                        "Trainer counts", "scheduler.params.warmup_num_steps"),
                                 SCHEDULE, exact(f"{ACTOR}.optim.lr_warmup_steps_ratio"),
                                 mapped("warmup_steps as a fraction below 1 (transformers 5; warmup_ratio "
                                        "before), lr_scheduler_type constant_with_warmup for a constant "
                                        "decay",
                                        "warmup_steps", "warmup_ratio", "lr_scheduler_type"),
                                 exact("--actor.lr_warmup_ratio")),
    "schedule.min_lr_ratio": Row(mapped("scheduler.params.cos_min_ratio (cosine)",
                                        "scheduler.params.cos_min_ratio"),
                                 SCHEDULE,
                                 mapped(f"{ACTOR}.optim.min_lr_ratio; Megatron min_lr = ratio × lr",
                                        f"{ACTOR}.optim.min_lr_ratio"),
                                 mapped("lr_scheduler_kwargs.min_lr_rate (cosine_with_min_lr)",
                                        "lr_scheduler_kwargs.min_lr_rate"),
                                 mapped("--actor.min_lr_ratio (cosine_with_min_lr's floor; another decay has "
                                        "none, DR225)", "--actor.min_lr_ratio")),
    "schedule.total_steps": Row(mapped("scheduler.params.total_num_steps (decaying schedules; otherwise the "
                                       "script's loop)", "scheduler.params.total_num_steps"), SCHEDULE,
                                exact("trainer.total_training_steps"), exact("max_steps"),
                                no_option("the run's length is --train.num_episodes passes over the "
                                          "prompts")),
    "grad_clip": Row(exact("gradient_clipping"),
                     script("the script's clipping (accelerator.clip_grad_norm_)"),
                     mapped(f"{ACTOR}.optim.clip_grad (no clipping: inf, DR212)", f"{ACTOR}.optim.clip_grad"),
                     exact("max_grad_norm"), exact("--actor.max_norm")),
    "activation_checkpointing": Row(
        script("the script's checkpointing (the ds_config's activation_checkpointing section only "
               "configures deepspeed.checkpointing for a script that calls it)"),
        mapped("fsdp_config.fsdp_activation_checkpointing (FSDP); the script's otherwise",
               "fsdp_config.fsdp_activation_checkpointing"),
        exact("actor_rollout_ref.model.enable_gradient_checkpointing"),
        mapped("gradient_checkpointing; fsdp_config.activation_checkpointing under FSDP",
               "gradient_checkpointing", "fsdp_config.activation_checkpointing"),
        unwritten("--actor.gradient_checkpointing_enable")),
    "activation_checkpointing.every": Row(script("the script's checkpointing"),
                                          script("whole blocks only (DR207)"),
                                          script("whole blocks only (DR207)"),
                                          script("whole blocks only (DR207)"),
                                          no_option("whole blocks only (DR207)")),
    "checkpoint.weights": Row(
        mapped("zero_optimization.stage3_gather_16bit_weights_on_model_save (ZeRO-3; below it the weights "
               "are whole on every rank)", "zero_optimization.stage3_gather_16bit_weights_on_model_save"),
        mapped("fsdp_config.fsdp_state_dict_type: FULL_STATE_DICT / SHARDED_STATE_DICT (FSDP); the ds_config "
               "on the DeepSpeed path", "fsdp_config.fsdp_state_dict_type"),
        script("verl's checkpoints (sharded; actor_rollout_ref.actor.checkpoint.save_contents "
               "adds hf_model)"),
        mapped("fsdp_config.state_dict_type (FSDP); the ds_config under DeepSpeed",
               "fsdp_config.state_dict_type"),
        unwritten("--ckpt.save_hf (whole Hugging Face weights beside DeepSpeed's shards)")),
    "checkpoint.every": Row(script("the script's save_checkpoint calls"),
                            script("the script's save_state calls"),
                            exact("trainer.save_freq"),
                            mapped("save_steps with save_strategy steps", "save_steps", "save_strategy"),
                            exact("--ckpt.save_steps")),
    "checkpoint.dir": Row(script("the script's save_checkpoint(save_dir) and load_checkpoint(load_dir); "
                                 "`launch` passes DISTRECIPE_CHECKPOINT_DIR"),
                          script("the script's save_state(output_dir) / ProjectConfiguration(project_dir); "
                                 "`launch` passes DISTRECIPE_CHECKPOINT_DIR"),
                          exact("trainer.default_local_dir"), exact("output_dir"),
                          exact("--ckpt.path")),
    "checkpoint.keep": Row(script("the script's own deletion of old tags; `launch` passes "
                                  "DISTRECIPE_CHECKPOINT_KEEP (api.prune_checkpoints)"),
                           script("the script's ProjectConfiguration(total_limit)"),
                           exact("trainer.max_actor_ckpt_to_keep"), exact("save_total_limit"),
                           exact("--ckpt.max_num")),
    "checkpoint.resume": Row(
        script("the script's load_checkpoint; `launch` checks the checkpoint and passes DISTRECIPE_RESUME "
               "(and checkpoint.load_universal after ds_to_universal)"),
        script("the script's load_state; `launch` checks the checkpoint and passes DISTRECIPE_RESUME"),
        mapped("trainer.resume_mode: auto, disable (none), or resume_path with trainer.resume_from_path",
               "trainer.resume_mode", "trainer.resume_from_path"),
        mapped("resume_from_checkpoint: the path, or for auto the latest complete checkpoint `launch` "
               "finds (none: unset)", "resume_from_checkpoint"),
        mapped("--ckpt.load_enable (auto, or a path that is checkpoint.dir, its _actor or a tag in it; "
               "another path is refused, DR208): OpenRLHF loads the tag `latest` names in "
               "--ckpt.path/_actor, which `launch` checks first, adding --ds.use_universal_ckpt for a "
               "universal one; none: unset", "--ckpt.load_enable")),
    "rl.rollout_n": Row(NO_ROLLOUT, NO_ROLLOUT, exact("actor_rollout_ref.rollout.n"), NO_ROLLOUT,
                        exact("--rollout.n_samples_per_prompt"), trl=exact("num_generations")),
    "rl.prompts_per_step": Row(NO_ROLLOUT, NO_ROLLOUT, exact("data.train_batch_size"), NO_ROLLOUT,
                               exact("--rollout.batch_size"),
                               trl=mapped("generation_batch_size = prompts × rl.rollout_n, written where it "
                                          "is not the global batch (GRPOConfig's default)",
                                          "generation_batch_size")),
    "rl.rollout_memory": Row(NO_ROLLOUT, NO_ROLLOUT,
                             exact("actor_rollout_ref.rollout.gpu_memory_utilization"), NO_ROLLOUT,
                             exact("--vllm.gpu_memory_utilization"),
                             trl=mapped("vllm_gpu_memory_utilization, with use_vllm true and vllm_mode "
                                        "colocate (a server's is `trl vllm-serve`'s, DR222)",
                                        "vllm_gpu_memory_utilization", "use_vllm", "vllm_mode")),
    "rl.free_rollout_memory": Row(NO_ROLLOUT, NO_ROLLOUT,
                                  exact("actor_rollout_ref.rollout.free_cache_engine"), NO_ROLLOUT,
                                  mapped("--vllm.enable_sleep (a switch, written when true)",
                                         "--vllm.enable_sleep"),
                                  trl=mapped("vllm_enable_sleep_mode (colocated: a server's is "
                                             "`trl vllm-serve`'s, DR222)", "vllm_enable_sleep_mode")),
    "rl.rollout_mode": Row(NO_ROLLOUT, NO_ROLLOUT,
                           unused("verl's hybrid engine is always colocated, on the engine its base config "
                                  "names (rollout.name); server: the target refuses the recipe (DR208)"),
                           NO_ROLLOUT,
                           mapped("colocate: --train.colocate_all, one vLLM engine a GPU "
                                  "(--vllm.num_engines); server: the target refuses the recipe (DR208)",
                                  "--train.colocate_all", "--vllm.num_engines"),
                           trl=mapped("vllm_mode, with use_vllm true (colocate also where "
                                      "rl.rollout_memory is stated)", "vllm_mode", "use_vllm")),
    **{key: _same(LAUNCHED) for key in _keys("launch.")},
    "launch.backend": Row(LAUNCHED, mapped("distributed_type DEEPSPEED for accelerate-deepspeed, with "
                                           "deepspeed_config.deepspeed_config_file and "
                                           "deepspeed_config.zero3_init_flag",
                                           "distributed_type", "deepspeed_config.deepspeed_config_file",
                                           "deepspeed_config.zero3_init_flag"), LAUNCHED, LAUNCHED, LAUNCHED),
    "launch.master_addr": Row(LAUNCHED, exact("main_process_ip"), LAUNCHED, LAUNCHED, LAUNCHED),
    "launch.master_port": Row(LAUNCHED, exact("main_process_port"), LAUNCHED, LAUNCHED, LAUNCHED),
}
"""Recipe field → how each file kind carries it."""


def stated(plan: Plan) -> Iterator[tuple[str, object]]:
    """The recipe's fields that say something: not left to their default."""
    defaults = _defaults()
    for key, value in recipe_values(plan.recipe).items():
        if key.startswith("native.") or key not in FIELDS:
            continue
        if value is not None and value != defaults.get(key):
            yield key, value


PRIVATE = frozenset({"launch.args", "launch.skypilot.setup"})
"""Fields a finding names by key only: a program's argv and a setup script carry tokens."""


def findings(plan: Plan, columns: tuple[Column, ...], target: str, *,
             launched: bool = False) -> list[Finding]:
    """A finding for every stated field none of `columns` carries (the files `target`
    writes: Accelerate's DeepSpeed path also writes a ds_config), one line per code.
    `launched`: `launch` writes the files and carries `launch.*` itself, so those are not lost."""
    lost: dict[str, list[str]] = {}
    for key, value in stated(plan):
        if launched and key.startswith("launch."):
            continue
        cells = [FIELDS[key].cell(column) for column in columns]
        removed = [_removed(plan, column, cell) for column, cell in zip(columns, cells, strict=True)]
        if all(cell.how == "not carried" or gone for cell, gone in zip(cells, removed, strict=True)):
            shown = "(values not shown: they may hold secrets)" if key in PRIVATE else _text(value)
            written = spelled(key, value)
            cell = next((c for c in cells if c.how == "not carried"), None)
            held = next(((c, g) for c, g in zip(columns, removed, strict=True) if g is not None), None)
            if held is not None:  # a file has the key, and the recipe's native section removes it
                column, gone = held
                section = _holder(plan, column, gone)
                here, code = f"native.{section}.{gone} is null: compile leaves it out", "DR222"
            else:
                assert cell is not None
                assert cell.code is not None
                here, code = cell.native, cell.code
            why = f"as {written}; here {here}" if written else here
            lost.setdefault(code, []).append(f"{key} {shown} ({why})")
    found = [finding(code, target, "; ".join(items)) for code, items in lost.items()]
    return found + native_findings(plan, columns, target)


def _holder(plan: Plan, column: Column, key: str) -> str:
    """The native section of `column` whose `key` (dotted) removes what a cell writes: the last
    one written with it that states its first part (TRL's: `native.trl` over `native.hf`)."""
    top = key.split(".")[0]
    return next((name for name in reversed(SECTIONS[column]) if top in getattr(plan.recipe.native, name)),
                SECTIONS[column][-1])


def _removed(plan: Plan, column: Column, cell: Cell) -> str | None:
    """The key of `native.<column>` whose null removes every key `cell` writes (an imported
    ds_config the Trainer fed states no optimizer, so its recipe says `optimizer: null`),
    or None: then the file carries what the cell says."""
    native = section(plan, column)
    if cell.how == "not carried" or not cell.keys or not isinstance(native, dict):
        return None
    nulls = set()
    for key in cell.keys:
        node: object = native
        parts = key.split(".")
        for depth, part in enumerate(parts, 1):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
            if node is None:
                nulls.add(".".join(parts[:depth]))
                break
        else:
            return None
    return min(nulls, key=len)


SECTIONS: dict[Column, tuple[str, ...]] = {
    "deepspeed": ("deepspeed",), "accelerate": ("accelerate",), "verl": ("verl",), "hf": ("hf",),
    "trl": ("hf", "trl"), "openrlhf": ()}
"""The `native` sections each column's file is written with: TRL's config holds the Trainer's
kwargs (`native.hf`) and its own (`native.trl`); OpenRLHF's command line has none."""
NATIVE_SECTIONS = ("deepspeed", "accelerate", "verl", "hf", "trl")
"""The recipe's `native` sections (`recipe.Native`'s fields)."""


def section(plan: Plan, column: Column) -> dict[str, Any] | None:
    """The native mapping merged into `column`'s file (TRL's: `native.hf` under `native.trl`);
    None for verl's override lines and OpenRLHF's command line."""
    if column in ("verl", "openrlhf"):
        return None
    out: dict[str, Any] = {}
    for name in SECTIONS[column]:
        out = {**out, **getattr(plan.recipe.native, name)}
    return out


FILES: dict[Column, str] = {"deepspeed": "a ds_config", "accelerate": "an Accelerate YAML", "verl": "verl",
                            "hf": "TrainingArguments", "trl": "a TRL config",
                            "openrlhf": "OpenRLHF's command line"}
"""Each column's file, as a finding says where a native key is written."""


BY_VALUE: dict[str, dict[object, dict[Column, tuple[str, ...]]]] = {
    "launch.backend": {
        "accelerate": {"accelerate": ("distributed_type",)},
        "accelerate-deepspeed": {"accelerate": ("distributed_type", "deepspeed_config.zero3_init_flag",
                                                "deepspeed_config.deepspeed_config_file")}},
    "strategy": {
        "zero": {"deepspeed": ("zero_optimization.stage",), "accelerate": ("distributed_type",),
                 "hf": ("deepspeed",)},
        "fsdp": {"accelerate": ("distributed_type", "fsdp_config"), "verl": (f"{ACTOR}.strategy",),
                 "hf": ("fsdp", "fsdp_config")}},
}
"""Fields whose native keys depend on the value: an Accelerate launch is `distributed_type`,
and its DeepSpeed plugin's keys go with it; `launch.backend deepspeed` came from no key."""


def native_keys(key: str) -> list[tuple[Column, tuple[str, ...]]]:
    """The native keys each file writes the recipe field `key` as, where it has some (TRL's
    config only where they are not the Trainer's)."""
    row = FIELDS[key]
    return [(column, cell.keys) for column in COLUMN_ORDER if (cell := row.cell(column)).keys
            and (column != "trl" or row.trl is not None)]


def spelled(key: str, value: object = None) -> str:
    """A recipe field as the files that carry it spell it (`gradient_clipping in a ds_config,
    max_grad_norm in TrainingArguments, ...`), for a finding on a value one file cannot carry:
    the value came from one of them, and its author knows it by that key, not the recipe's."""
    spellings = list(BY_VALUE[key].get(value, {}).items()) if key in BY_VALUE else native_keys(key)
    return ", ".join(f"{' / '.join(keys)} in {FILES[engine]}" for engine, keys in spellings)


def as_written(key: str, value: object = None) -> str:
    """` (as <native keys>)` after a recipe field a finding names, or nothing where no file
    has a key for it: every finding on a value that does not arrive whole says it so."""
    text = spelled(key, value)
    return f" (as {text})" if text else ""


def native_findings(plan: Plan, columns: tuple[Column, ...], target: str) -> list[Finding]:
    """DR233 for each `native.<engine>` section no file of `columns` is written with: those
    keys are that engine's spelling and reach no file of `target`, so each is named."""
    native = plan.recipe.native
    read = {name for column in columns for name in SECTIONS[column]}
    out = []
    for engine in NATIVE_SECTIONS:
        if engine in read:
            continue
        keys = ([key for _prefix, key, _value in verl_pairs(native.verl)] if engine == "verl"
                else _native_keys(getattr(native, engine)))
        if keys:
            out.append(finding("DR233", target, f"native.{engine}: " + ", ".join(keys)))
    return out


def _native_keys(section: dict[str, object], prefix: str = "") -> list[str]:
    """The dotted keys of a native mapping's leaves."""
    keys: list[str] = []
    for key, value in section.items():
        if isinstance(value, dict) and value:
            keys += _native_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _text(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _defaults() -> Mapping[str, object]:
    """Each field's default value, dotted: what a recipe that does not state it holds. A
    section that is absent by default (optimizer, schedule, checkpoint, rl) has no keys
    here, so every value in it counts as stated."""
    from distrecipe.recipe import Batch, Cluster, Model, Recipe

    values = recipe_values(Recipe(name="", model=Model(), cluster=Cluster(), strategy="ddp", batch=Batch()))
    for name in ("strategy", "name"):
        values.pop(name)  # required: always stated
    return values


COLUMNS: dict[Column, str] = {"deepspeed": "DeepSpeed", "accelerate": "Accelerate", "verl": "verl actor",
                               "hf": "HF Trainer", "trl": "TRL config", "openrlhf": "OpenRLHF"}
"""Each column's heading: the file the engine reads (verl's is its actor's overrides)."""


def markdown() -> list[str]:
    """The rows as Markdown lines, for `docs/equivalence.md`; TRL's cell says "as HF Trainer"
    where it is the Trainer's."""
    lines = ["| recipe field | " + " | ".join(COLUMNS[c] for c in COLUMN_ORDER) + " |",
             "|---" * (len(COLUMN_ORDER) + 1) + "|"]
    for key, entry in FIELDS.items():
        cells = [f"as {COLUMNS['hf']}" if c == "trl" and entry.trl is None else _cell_text(entry.cell(c))
                 for c in COLUMN_ORDER]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return lines


def cell_text(cell: Cell) -> str:
    """A cell as plain text, as `distrecipe explain FIELD` prints it: the key, the mapping,
    `not carried: WHO (CODE)`, or `— (why)`."""
    return _cell_text(cell, plain=True)


def _cell_text(cell: Cell, *, plain: bool = False) -> str:
    text = f"`{cell.native}`" if cell.how == "exact" and not plain else cell.native
    label = {"exact": "", "mapped": "", "not carried": "not carried: ", "not applicable": "—"}[cell.how]
    if cell.how == "not applicable":
        return "—" + (f" ({cell.native})" if cell.native else "")
    code = (f" ({cell.code})" if plain else f" **{cell.code}**") if cell.code else ""
    return label + text + code
