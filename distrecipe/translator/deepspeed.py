"""Plan → DeepSpeed `ds_config.json`.

Raw DeepSpeed must get concrete numbers: it derives a missing batch value by
flooring, silently drops a nested `"auto"` (`"stage": "auto"` becomes stage 0) and
refuses a top-level one. So every batch key is written out, all three agreeing with
the Plan (`train_batch_size` in DeepSpeed's count of ranks: `batch_ranks`).
`hf_auto=True` instead writes `"auto"` exactly where Hugging Face's
`HfTrainerDeepSpeedConfig` fills a value from TrainingArguments, for Trainer users.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from distrecipe.engines.deepspeed import (
    BATCH_KEYS,
    FP16_LOSS_SCALING,
    OPTIMIZER_TYPE,
    SCHEDULERS,
    autotp_refusal,
    autotp_size,
    batch_ranks,
    zero_optimization,
)
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.recipe import Optimizer, Schedule
from distrecipe.translator.native import merge


def emit(plan: Plan, *, hf_auto: bool = False) -> dict[str, Any]:
    """The ds_config for `plan`; `hf_auto` leaves HF-Trainer-filled values as "auto". A value
    the recipe does not state is left out: DeepSpeed's own default then applies, whichever
    program (a raw script, Accelerate, the Trainer) hands it the file.

    The recipe's `native.deepspeed` is merged in last (`translator/native.py`).
    """

    def auto(value: Any) -> Any:
        return "auto" if hf_auto else value

    if plan.script_batch:  # the Trainer (or Accelerate) fills them from the script's arguments
        config: dict[str, Any] = dict.fromkeys(BATCH_KEYS.values(), "auto")
        if plan.script_accumulation is not None:
            config[BATCH_KEYS["accumulation"]] = auto(plan.script_accumulation)
    else:
        micro, accumulation = plan.batch.micro, plan.batch.accumulation
        batch = {"global": micro * accumulation * batch_ranks(plan), "micro": micro,
                 "accumulation": accumulation}
        config = {key: auto(batch[name]) for name, key in BATCH_KEYS.items()}
    clip = auto(plan.recipe.grad_clip)
    if clip is not None:  # unstated: DeepSpeed's own 1.0, as every engine's
        config["gradient_clipping"] = clip
    if plan.recipe.precision == "auto":  # the Trainer turns one on from its --bf16 / --fp16
        config |= {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}
    elif plan.precision == "bf16":
        config["bf16"] = {"enabled": auto(True)}
        opt = plan.recipe.optimizer
        if opt is not None and opt.master_weights == "bf16":  # pure bf16: no fp32 master partition
            config["bf16"]["bf16_master_weights_and_grads"] = True
            if opt.state_dtype == "bf16":
                config["bf16"]["bf16_optimizer_states"] = True
    elif plan.precision == "fp16":
        config["fp16"] = {"enabled": auto(True), **FP16_LOSS_SCALING}
    if plan.recipe.optimizer is not None:  # else the script passes its own to deepspeed.initialize
        config["optimizer"] = _optimizer(plan, plan.recipe.optimizer, auto)
    if plan.recipe.schedule is not None:
        config["scheduler"] = scheduler(plan, plan.recipe.schedule, auto)
    config["zero_optimization"] = zero_optimization(plan, hf_auto=hf_auto)
    if plan.dims.sequence > 1:
        config["sequence_parallel_size"] = plan.dims.sequence
    if autotp_size(plan):
        config["tensor_parallel"] = {"autotp_size": autotp_size(plan)}
    recompute, cpu = plan.recipe.activation_checkpointing != "none", plan.recipe.offload.activations == "cpu"
    if recompute and (plan.dims.tensor > 1 or cpu):
        # Read only by deepspeed.checkpointing, for a script that checkpoints through it.
        config["activation_checkpointing"] = {key: True for key, on in (
            ("partition_activations", plan.dims.tensor > 1), ("cpu_checkpointing", cpu)) if on}
    if plan.recipe.reduce_dtype is not None:
        config["communication_data_type"] = plan.recipe.reduce_dtype
    config["steps_per_print"] = 10
    config["wall_clock_breakdown"] = False
    return merge(config, plan.recipe.native.deepspeed)


def _optimizer(plan: Plan, opt: Optimizer, auto: Any) -> dict[str, Any]:
    """The stated hyper-parameters (the Trainer's to fill, under `hf_auto`); DeepSpeed's own
    defaults stand for the rest."""
    stated: dict[str, object] = {"lr": opt.lr, "weight_decay": opt.weight_decay}
    if opt.name != "sgd":
        stated |= {"betas": None if opt.betas is None else list(opt.betas), "eps": opt.eps}
    params: dict[str, Any] = {key: auto(value) for key, value in stated.items() if auto(value) is not None}
    if opt.name == "adam":
        # DeepSpeed's "Adam" silently runs AdamW (decoupled decay) unless told otherwise.
        params["adam_w_mode"] = False
    if opt.name != "sgd" and plan.recipe.cluster.device == "cpu":
        # On CPU, DeepSpeed's fused and CPU Adam are C++ ops it JIT-compiles (minutes, in
        # every script that reads this file); `torch_adam` is its switch to torch's own.
        params["torch_adam"] = True
    return {"type": OPTIMIZER_TYPE[opt.name], "params": params}


def scheduler(plan: Plan, schedule: Schedule, auto: Callable[[Any], Any]) -> dict[str, Any]:
    """DeepSpeed's scheduler for the recipe's schedule (`engines.deepspeed.SCHEDULERS`); what it
    cannot take is `schedule_findings`'. `auto` turns a value into the Trainer's "auto"
    where the Trainer fills it (the peak, the warmup and the run's length)."""
    kind = SCHEDULERS[schedule.decay]
    lr = plan.recipe.optimizer.lr if plan.recipe.optimizer else None
    values: dict[str, Any] = {}
    if kind != "WarmupCosineLR":  # its floor and peak are ratios of the optimizer's lr
        values |= {"warmup_min_lr": 0, "warmup_max_lr": auto(lr)}
    values |= {"warmup_num_steps": auto(warmup_steps(schedule)), "warmup_type": "linear"}
    if kind != "WarmupLR":
        values["total_num_steps"] = auto(schedule.total_steps)
    if kind == "WarmupCosineLR":
        values |= {"warmup_min_ratio": 0, "cos_min_ratio": schedule.min_lr_ratio or 0}
    if values["warmup_num_steps"] is None and schedule.warmup_ratio is None:
        values["warmup_num_steps"] = 0  # the recipe's "no warmup"; DeepSpeed's default is 1000
    return {"type": kind, "params": {key: value for key, value in values.items() if value is not None}}


def schedule_findings(plan: Plan, hf_auto: bool) -> list[Finding]:
    """What DeepSpeed's schedulers cannot take from the recipe: a decay or a warmup ratio
    without the run's length (WarmupDecayLR and WarmupCosineLR need `total_num_steps`, which
    the script or the Trainer must then give), a linear decay to a floor above 0
    (WarmupDecayLR's floor is also where its warmup starts)."""
    from distrecipe.translator import carry
    from distrecipe.translator.codes import finding

    schedule = plan.recipe.schedule
    if schedule is None or hf_auto:
        return []
    found = []
    native = plan.recipe.native.deepspeed.get("scheduler")
    length_stated = isinstance(native, dict) and "total_num_steps" in (native.get("params") or {})
    if schedule.total_steps is None and schedule.decay != "constant" and not length_stated:
        found.append(finding("DR226", "deepspeed", f"schedule.decay {schedule.decay}: "
                             f"{SCHEDULERS[schedule.decay]} needs total_num_steps; "
                             "state schedule.total_steps"))
    if schedule.warmup_ratio is not None and schedule.total_steps is None:
        found.append(finding("DR226", "deepspeed", f"schedule.warmup_ratio {schedule.warmup_ratio}"
                             f"{carry.as_written('schedule.warmup_ratio')}: DeepSpeed counts warmup in "
                             "steps; state schedule.total_steps or schedule.warmup_steps"))
    if schedule.decay == "constant" and schedule.total_steps is not None:
        found.append(finding("DR222", "deepspeed", f"schedule.total_steps {schedule.total_steps}"
                             f"{carry.as_written('schedule.total_steps')}: WarmupLR has no run length; the "
                             "script's loop ends the run"))
    if schedule.decay == "linear" and schedule.min_lr_ratio:
        found.append(finding("DR225", "deepspeed", f"schedule.min_lr_ratio {schedule.min_lr_ratio}: "
                             "WarmupDecayLR's floor warmup_min_lr is also where its warmup starts, so the "
                             "warmup begins at the floor, not at 0"))
    return found


def warmup_steps(schedule: Schedule) -> int | None:
    """Warmup in optimizer steps: stated, or the ratio of the stated length rounded up as the
    Trainer rounds it (`get_warmup_steps`); None when a ratio has no length to apply to."""
    if schedule.warmup_ratio is None:
        return schedule.warmup_steps
    if schedule.total_steps is None:
        return None
    return math.ceil(schedule.warmup_ratio * schedule.total_steps)


def findings(plan: Plan, *, hf_auto: bool = False, alone: bool = True,
             launched: bool = False) -> list[Finding]:
    """Where DeepSpeed cannot say exactly what the recipe says (codes in the equivalence table);
    under `hf_auto` the Trainer fills the schedule's steps. `alone`: the ds_config is the
    target's only file, so what it does not carry is named here (`carry`); the Accelerate
    and Trainer targets name it with their own files beside it."""
    from distrecipe.translator import carry
    from distrecipe.translator.codes import finding
    from distrecipe.translator.equivalence import (  # only a few recipes need it
        expert_findings,
        precision_findings,
        token_batch_findings,
    )

    found = token_batch_findings(plan, "deepspeed") + expert_findings(plan, "deepspeed")
    if alone:
        found += carry.findings(plan, ("deepspeed",), "deepspeed", launched=launched)
    if plan.recipe.strategy == "fsdp":
        written = carry.as_written("strategy", "fsdp")
        found.append(finding("DR238", "deepspeed", f"strategy fsdp{written} stage {plan.stage} runs as "
                             f"DeepSpeed's ZeRO-{plan.stage}"))
    if plan.recipe.precision == "auto":
        found.append(finding("DR235", "deepspeed", "bf16.enabled and fp16.enabled are \"auto\": the HF "
                             "Trainer fills them; raw DeepSpeed reads neither as on and trains in fp32; "
                             f"precision auto{carry.as_written('precision')}"))
    if plan.script_batch:
        keys = "train_batch_size and train_micro_batch_size_per_gpu are" \
            if plan.script_accumulation is not None and not hf_auto else \
            "train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps are"
        found.append(finding("DR223", "deepspeed", f"{keys} \"auto\": raw DeepSpeed refuses them; the HF "
                             "Trainer or Accelerate fills them"))
    found += schedule_findings(plan, hf_auto)
    found += precision_findings(plan, "deepspeed", activations=True, reduce=True, master=True)
    if plan.recipe.offload.activations != "none":
        found.append(finding("DR229", "deepspeed", "activation_checkpointing.cpu_checkpointing: true"))
    weights = plan.recipe.checkpoint.weights if plan.recipe.checkpoint else None
    said = f"checkpoint.weights {weights}{carry.as_written('checkpoint.weights')}"
    if weights == "sharded" and plan.stage < 3:
        found.append(finding("DR222", "deepspeed", f"{said}: at ZeRO stage {plan.stage} every rank holds the "
                             "whole weights, and a checkpoint saves them whole"))
    elif weights == "full" and plan.stage < 3:
        found.append(finding("DR234", "deepspeed", f"{said}: at ZeRO stage {plan.stage} the weights are "
                             "whole on every rank, so no ds_config key says it"))
    detail = (f"parallel.shard_group {plan.dims.shard_group}{carry.as_written('parallel.shard_group')} of "
              f"DP {plan.dims.dp}")
    if plan.dims.hybrid and plan.stage < 3:
        found.append(finding("DR216", "deepspeed", detail))
    if plan.dims.hybrid and plan.stage == 3:
        found.append(finding("DR217", "deepspeed", detail))
    if plan.recipe.strategy == "megatron":
        detail = f"tensor {plan.dims.tensor}, pipeline {plan.dims.pipeline}"
        if plan.dims.virtual_stages > 1:
            detail += f", virtual_stages {plan.dims.virtual_stages} (the Megatron script's own flag)"
        found.append(finding("DR218", "deepspeed", detail))
    elif plan.dims.virtual_stages > 1:
        found.append(finding("DR208", "deepspeed", f"virtual_stages {plan.dims.virtual_stages}: DeepSpeed's "
                             "PipelineEngine runs plain 1F1B (`TrainSchedule`), without interleaving"))
    refusal = autotp_refusal(plan)
    if refusal is not None:
        found.append(finding("DR208", "deepspeed", refusal.message))
    elif autotp_size(plan) and not plan.script_batch:
        found.append(finding("DR219", "deepspeed", (
            f"train_batch_size {batch_ranks(plan) * plan.batch.micro * plan.batch.accumulation} = "
            f"global {plan.batch.global_} × tensor {plan.dims.tensor}")))
    return found
