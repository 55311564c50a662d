"""Plan → Hugging Face `TrainingArguments` keyword arguments (`training_args.json`).

The Trainer is where batch numbers live for Accelerate users (its YAML has none),
and where the DeepSpeed config's `"auto"` values come from, so these kwargs must
agree with the ds_config and the accelerate config written from the same Plan:
the Trainer itself refuses a ds_config whose concrete values differ
(`HfTrainerDeepSpeedConfig`), which the tests use as the judge.

Engine choice follows the recipe's strategy: `zero` runs DeepSpeed (`deepspeed`
names the ds_config file), `fsdp` runs FSDP2 (`fsdp` + `fsdp_config`) wherever the
Accelerate config is FSDP too, and everything else is plain DDP.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines import Engine
from distrecipe.engines.deepspeed import CONFIG_FILE as DS_CONFIG_FILE
from distrecipe.engines.hf import CONFIG_FILE, OPTIM, TRAINER_FSDP_KEYS, uses_fsdp
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import to_json
from distrecipe.recipe import Checkpoint, Optimizer, Schedule
from distrecipe.translator import accelerate, carry, deepspeed
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import (
    expert_findings,
    offload_findings,
    precision_findings,
    refuse_errors,
    token_batch_findings,
    virtual_stages,
)
from distrecipe.translator.native import merge
from distrecipe.translator.targets import EmitOptions, Output

TARGET = "hf"


def findings(plan: Plan, *, launched: bool = False, carried: bool = True) -> list[Finding]:
    """Where TrainingArguments cannot say what the recipe says. `carried` false leaves out
    the carry table's findings, for TRL, whose config and Accelerate file carry fields together."""
    found = token_batch_findings(plan, TARGET) + expert_findings(plan, TARGET)
    if plan.recipe.strategy == "megatron" or plan.dims.pipeline > 1:
        found.append(finding("DR208", TARGET,
                             f"the Trainer has no Megatron or pipeline engine{virtual_stages(plan)}"))
    if plan.recipe.strategy == "ddp" and (plan.dims.tensor > 1 or plan.dims.sequence > 1):
        found.append(finding("DR208", TARGET, "DDP with tensor or sequence parallel"))
    if plan.recipe.strategy == "zero" and plan.dims.sequence > 1:
        # HfTrainerDeepSpeedConfig fills train_batch_size as world × micro × accumulation,
        # but DeepSpeed's Ulysses world for the batch is world / sequence.
        found.append(
            finding(
                "DR208",
                TARGET,
                f"the Trainer counts train_batch_size over all {plan.dims.world} processes; "
                f"with sequence parallel {plan.dims.sequence} DeepSpeed counts DP {plan.dims.dp}",
            )
        )
    if uses_fsdp(plan):
        if plan.dims.hybrid or plan.dims.tensor > 1 or plan.dims.sequence > 1:
            found.append(
                finding(
                    "DR214",
                    TARGET,
                    f"replicate {plan.dims.replicas} × parallel.shard_group {plan.dims.shard_group}, "
                    f"parallel.tensor {plan.dims.tensor}, parallel.sequence {plan.dims.sequence}; "
                    + "; ".join(f"{key}{carry.as_written(key)}" for key, size in (
                        ("parallel.shard_group", plan.dims.hybrid), ("parallel.tensor", plan.dims.tensor > 1),
                        ("parallel.sequence", plan.dims.sequence > 1)) if size),
                )
            )
        found.extend(offload_findings(plan.recipe.offload, TARGET, "fsdp_config.cpu_offload"))
    if plan.recipe.activation_checkpointing == "selective":
        found.append(finding("DR207", TARGET, "whole-block gradient checkpointing"))
    # The ds_config carries the reduction dtype; the Trainer's checkpointing is torch's.
    found.extend(precision_findings(plan, TARGET, reduce=plan.recipe.strategy == "zero",
                                    master=plan.recipe.strategy == "zero"))
    opt = plan.recipe.optimizer
    if plan.recipe.strategy != "zero" and opt is not None and opt.name == "adam":
        said = f"optimizer.name adam{carry.as_written('optimizer.name')}"
        found.append(finding("DR215", TARGET, f"{said}, weight_decay {opt.weight_decay}")
                     if opt.weight_decay else
                     finding("DR237", TARGET, f"{said}: optim adamw_torch"))
    if plan.recipe.strategy == "fsdp" and plan.stage > 0 and not uses_fsdp(plan):
        found.append(finding("DR236", TARGET, f"strategy fsdp{carry.as_written('strategy', 'fsdp')} stage "
                             f"{plan.stage} over one shard "
                             f"(parallel.shard_group {plan.dims.shard_group}) is DDP: no fsdp"))
    schedule = plan.recipe.schedule
    if schedule is not None and schedule.decay == "linear" and schedule.min_lr_ratio:
        found.append(finding("DR225", TARGET, f"schedule.min_lr_ratio {schedule.min_lr_ratio}: the Trainer's "
                             "linear schedule decays to 0"))
    if plan.recipe.precision == "auto":
        found.append(finding("DR235", TARGET, "bf16 and fp16 are left to the script's flags (the Trainer's "
                             f"default is fp32); precision auto{carry.as_written('precision')}"))
    if plan.script_batch:
        left = "per_device_train_batch_size is" if plan.script_accumulation is not None else \
            "per_device_train_batch_size and gradient_accumulation_steps are"
        found.append(finding("DR223", TARGET, f"{left} left to the script's flags (the Trainer's defaults "
                             "are 8 and 1)"))
    columns: tuple[Engine, ...] = ("hf", "deepspeed") if plan.recipe.strategy == "zero" else ("hf",)
    return found + carry.findings(plan, columns, TARGET, launched=launched) if carried else found


def emit(plan: Plan) -> dict[str, Any]:
    """The TrainingArguments kwargs for `plan` (minus `output_dir`, which is the user's),
    with the recipe's `native.hf` merged in last. A value the recipe leaves out is left
    out: the Trainer's default (or the script's flag) applies, as it would without us."""
    recipe = plan.recipe
    args: dict[str, Any] = {} if plan.script_batch else {
        "per_device_train_batch_size": plan.batch.micro,
        "gradient_accumulation_steps": plan.batch.accumulation}
    if plan.script_accumulation is not None:
        args["gradient_accumulation_steps"] = plan.script_accumulation
    if recipe.precision != "auto":  # else the script's --bf16 / --fp16
        args |= {"bf16": plan.precision == "bf16", "fp16": plan.precision == "fp16"}
    if recipe.optimizer is not None:
        args.update(_optimizer(recipe.optimizer))
    if recipe.schedule is not None:
        args.update(schedule(recipe.schedule))
    if recipe.grad_clip is not None:  # the Trainer clips only when max_grad_norm > 0; its default is 1.0
        args["max_grad_norm"] = recipe.grad_clip
    if recipe.checkpoint is not None:
        args |= _saving(recipe.checkpoint)
    if recipe.cluster.device == "cpu":
        args["use_cpu"] = True
    if uses_fsdp(plan):
        args["fsdp"] = True
        args["fsdp_config"] = _fsdp_config(plan)
    else:
        # FSDP has its own recompute; the Trainer warns that both would gather twice.
        args["gradient_checkpointing"] = recipe.activation_checkpointing != "none"
    if recipe.strategy == "zero":
        args["deepspeed"] = DS_CONFIG_FILE
    if recipe.kernels.compile is True:  # the Trainer's own switches; off is its default
        args["torch_compile"] = True
    if recipe.kernels.fused_ops == "liger":
        args["use_liger_kernel"] = True
    return merge(args, recipe.native.hf)


def _optimizer(opt: Optimizer) -> dict[str, Any]:
    """The stated hyper-parameters in the Trainer's names."""
    args: dict[str, Any] = {"optim": OPTIM[opt.name]}
    if opt.lr is not None:
        args["learning_rate"] = opt.lr
    if opt.weight_decay is not None:
        args["weight_decay"] = opt.weight_decay
    if opt.betas is not None:
        args["adam_beta1"], args["adam_beta2"] = opt.betas
    if opt.eps is not None:
        args["adam_epsilon"] = opt.eps
    return args


def schedule(schedule: Schedule) -> dict[str, Any]:
    """The schedule in the Trainer's terms: `lr_scheduler_type` (a cosine with a floor is
    `cosine_with_min_lr`), warmup in steps or, below 1, as a fraction (transformers 5's
    `warmup_steps`), and `max_steps` for the run's length."""
    floor = schedule.min_lr_ratio or 0
    warmup = schedule.warmup_steps if schedule.warmup_ratio is None else schedule.warmup_ratio
    if schedule.decay == "constant":
        kind = "constant_with_warmup" if warmup else "constant"
    else:
        kind = "cosine_with_min_lr" if schedule.decay == "cosine" and floor else schedule.decay
    args: dict[str, Any] = {"lr_scheduler_type": kind}
    if kind == "cosine_with_min_lr":
        args["lr_scheduler_kwargs"] = {"min_lr_rate": floor}
    if warmup is not None:
        args["warmup_steps"] = warmup
    if schedule.total_steps is not None:
        args["max_steps"] = schedule.total_steps
    return args


def _fsdp_config(plan: Plan) -> dict[str, Any]:
    """The Accelerate emitter's FSDP choices, in the Trainer's spelling. Under FSDP1 its
    `reshard_after_forward` takes the sharding strategy, lower-cased as its `--fsdp` options,
    and it reads `sync_module_states` (default true, training_args.py): written as Accelerate's."""
    chosen = accelerate.fsdp_config(plan)
    config = {TRAINER_FSDP_KEYS[key]: value for key, value in chosen.items() if key in TRAINER_FSDP_KEYS}
    if "fsdp_sharding_strategy" in chosen:
        config["reshard_after_forward"] = chosen["fsdp_sharding_strategy"].lower()
        config["sync_module_states"] = chosen["fsdp_sync_module_states"]
    if "transformer_layer_cls_to_wrap" in config:
        config["transformer_layer_cls_to_wrap"] = [config["transformer_layer_cls_to_wrap"]]
    return config


def render(plan: Plan, options: EmitOptions) -> Output:
    """`training_args.json`, plus the ds_config its `deepspeed` key names."""
    found = findings(plan, launched=options.launched)
    files: dict[str, str] = {}
    if plan.recipe.strategy == "zero":
        found += deepspeed.findings(plan, hf_auto=options.hf_auto, alone=False)
        files[DS_CONFIG_FILE] = to_json(deepspeed.emit(plan, hf_auto=options.hf_auto))
    refuse_errors(found)
    files[CONFIG_FILE] = to_json(emit(plan))
    return Output(files=files, findings=tuple(found))


def _saving(checkpoint: Checkpoint) -> dict[str, Any]:
    """The Trainer's saving keys for what the recipe states. `resume: auto` has no
    TrainingArguments spelling (the Trainer takes a path, or `True` only as `train()`'s
    argument), so it is left out here: `launch` resolves it to the latest complete
    checkpoint and passes `--resume_from_checkpoint PATH`; `none` is the Trainer's default."""
    args: dict[str, Any] = {}
    if checkpoint.every is not None:
        args |= {"save_strategy": "steps", "save_steps": checkpoint.every}
    if checkpoint.dir is not None:
        args["output_dir"] = checkpoint.dir
    if checkpoint.keep is not None:
        args["save_total_limit"] = checkpoint.keep
    if checkpoint.resume not in (None, "auto", "none"):
        args["resume_from_checkpoint"] = checkpoint.resume
    return args
