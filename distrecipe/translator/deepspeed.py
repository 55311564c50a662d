"""Plan → DeepSpeed `ds_config.json`.

Raw DeepSpeed must get concrete numbers: it derives a missing batch value by
flooring, silently drops a nested `"auto"` (`"stage": "auto"` becomes stage 0) and
refuses a top-level one. So every batch key is written out, all three agreeing with
the Plan (`train_batch_size` in DeepSpeed's count of ranks: `batch_ranks`).
`hf_auto=True` instead writes `"auto"` exactly where Hugging Face's
`HfTrainerDeepSpeedConfig` fills a value from TrainingArguments, for Trainer users.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.deepspeed import (
    BATCH_KEYS,
    FP16_LOSS_SCALING,
    OPTIMIZER_TYPE,
    autotp_refusal,
    autotp_size,
    batch_ranks,
    zero_optimization,
)
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.translator.native import merge


def emit(plan: Plan, *, hf_auto: bool = False) -> dict[str, Any]:
    """The ds_config for `plan`; `hf_auto` leaves HF-Trainer-filled values as "auto".

    The recipe's `native.deepspeed` is merged in last (`translator/native.py`).
    """

    def auto(value: Any) -> Any:
        return "auto" if hf_auto else value

    micro, accumulation = plan.batch.micro, plan.batch.accumulation
    batch = {"global": micro * accumulation * batch_ranks(plan), "micro": micro, "accumulation": accumulation}
    config: dict[str, Any] = {key: auto(batch[name]) for name, key in BATCH_KEYS.items()}
    # Always written: DeepSpeed's own default clips at 1.0, so "no clipping" must say 0.
    config["gradient_clipping"] = auto(plan.recipe.grad_clip or 0.0)
    if plan.precision == "bf16":
        config["bf16"] = {"enabled": auto(True)}
    elif plan.precision == "fp16":
        config["fp16"] = {"enabled": auto(True), **FP16_LOSS_SCALING}
    config["optimizer"] = _optimizer(plan, auto)
    config["zero_optimization"] = zero_optimization(plan, hf_auto=hf_auto)
    if plan.dims.sequence > 1:
        config["sequence_parallel_size"] = plan.dims.sequence
    if autotp_size(plan):
        config["tensor_parallel"] = {"autotp_size": autotp_size(plan)}
    if plan.recipe.activation_checkpointing != "none":
        config["activation_checkpointing"] = {
            "partition_activations": plan.dims.tensor > 1,
            "contiguous_memory_optimization": False,
            "cpu_checkpointing": False,
        }
    config["steps_per_print"] = 10
    config["wall_clock_breakdown"] = False
    return merge(config, plan.recipe.native.deepspeed)


def _optimizer(plan: Plan, auto: Any) -> dict[str, Any]:
    opt = plan.recipe.optimizer
    params: dict[str, Any] = {"lr": auto(opt.lr), "weight_decay": auto(opt.weight_decay)}
    if opt.name != "sgd":
        params["betas"] = auto(list(opt.betas))
        params["eps"] = auto(opt.eps)
    if opt.name == "adam":
        # DeepSpeed's "Adam" silently runs AdamW (decoupled decay) unless told otherwise.
        params["adam_w_mode"] = False
    if opt.name != "sgd" and plan.recipe.cluster.device == "cpu":
        # On CPU, DeepSpeed's fused and CPU Adam are C++ ops it JIT-compiles (minutes, in
        # every script that reads this file); `torch_adam` is its switch to torch's own.
        params["torch_adam"] = True
    return {"type": OPTIMIZER_TYPE[opt.name], "params": params}


def findings(plan: Plan) -> list[Finding]:
    """Where DeepSpeed cannot say exactly what the recipe says (codes in the equivalence table)."""
    from distrecipe.translator.equivalence import (  # only a few recipes need it
        expert_findings,
        finding,
        token_batch_findings,
    )

    found = token_batch_findings(plan, "deepspeed") + expert_findings(plan, "deepspeed")
    detail = f"shard_group {plan.dims.shard_group} of DP {plan.dims.dp}"
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
    if refusal:
        found.append(finding("DR208", "deepspeed", refusal))
    elif autotp_size(plan):
        found.append(finding("DR219", "deepspeed", (
            f"train_batch_size {batch_ranks(plan) * plan.batch.micro * plan.batch.accumulation} = "
            f"global {plan.batch.global_} × tensor {plan.dims.tensor}")))
    return found
