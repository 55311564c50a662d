"""Plan → verl actor overrides (Hydra `key=value` lines and the same as YAML).

verl counts data in prompts and an optimizer step in sequences: `data.train_batch_size`
is P prompts per RL step, each rolled out `rollout.n` times, and one optimizer step
consumes `ppo_mini_batch_size × n` sequences, so the recipe's global batch G gives
`ppo_mini_batch_size = G / n` and accumulation stays `G / (DP × micro)` (verl has no
key for it: it is always derived). Several of verl's batch rules are checked only
inside its GPU workers, after a cluster has started; `findings` checks them all here.

Keys are those the installed verl (0.9.1) reads: its engine clips with
`actor.optim.clip_grad` (the actor-level `grad_clip` is read by nothing), and
`fsdp_config.offload_policy` is the real FSDP2 CPU offload, whereas `param_offload` /
`optimizer_offload` only move state to CPU between phases and are left off.
"""

from __future__ import annotations

from typing import Any

import yaml

from distrecipe.engines.verl import (
    ACTOR_FILE,
    FREE_CACHE,
    FSDP_DTYPE,
    FSDP_OPTIMIZER,
    MEGATRON_DTYPE,
    MEGATRON_OPTIMIZER,
    OVERRIDES_FILE,
    ROLLOUT_MEMORY,
    VerlBatch,
    Violation,
    actor_engine,
    batch_violations,
    fsdp_size,
)
from distrecipe.engines.verl_rollout import rollout_layout
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.keys import dotted
from distrecipe.overrides import split_key
from distrecipe.recipe import RL, Checkpoint, Schedule
from distrecipe.translator import carry
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import (
    expert_findings,
    offload_findings,
    precision_findings,
    refuse_errors,
    virtual_stages,
)
from distrecipe.translator.native import merge_overrides, override_line
from distrecipe.translator.targets import EmitOptions, Output

TARGET = "verl"
ACTOR = "actor_rollout_ref.actor"

Override = tuple[str, Any]


def mini_batch(plan: Plan) -> int:
    """`ppo_mini_batch_size`: prompts per optimizer step (exact: `resolve` checks that
    rollout_n divides the global batch and that prompts_per_step holds a mini-batch)."""
    assert plan.recipe.rl is not None, "verl targets need rl (findings report DR208 without it)"
    return plan.batch.global_ // plan.recipe.rl.rollout_n


def findings(plan: Plan, *, launched: bool = False) -> list[Finding]:
    """Inexact mappings, and every batch rule verl would refuse, before any GPU."""
    found = _structure_findings(plan, launched)
    if plan.recipe.rl is None:
        found.append(finding("DR208", TARGET, "verl needs rl.rollout_n and rl.prompts_per_step"))
        return found
    if plan.recipe.rl.rollout_mode == "server":
        found.append(finding("DR208", TARGET, "rl.rollout_mode server: verl's hybrid engine generates on the "
                                              "actor's GPUs (colocate)"))
    if plan.script_batch:
        found.append(finding("DR208", TARGET, "verl needs the batch in numbers: state batch.micro and "
                             "batch.global"))
        return found
    found.extend(_batch_findings(plan))
    refused = rollout_layout(plan)
    if refused is not None:
        found.append(finding("DR221", TARGET, f"{refused[0]}; see {dotted(refused[1])}"))
    return found


def _structure_findings(plan: Plan, launched: bool) -> list[Finding]:
    megatron = plan.recipe.strategy == "megatron"
    found: list[Finding] = expert_findings(plan, TARGET, carried=megatron)
    if not megatron:
        if plan.dims.tensor > 1 or plan.dims.pipeline > 1:
            found.append(
                finding(
                    "DR208",
                    TARGET,
                    f"tensor {plan.dims.tensor} / pipeline {plan.dims.pipeline}{virtual_stages(plan)} "
                    "need strategy megatron",
                )
            )
        if plan.stage == 0:
            found.append(finding("DR205", TARGET, "fsdp_config.fsdp_size=1"))
        elif plan.stage == 1:
            found.append(finding("DR201", TARGET, "fsdp_config.reshard_after_forward=false"))
        if plan.fsdp_version == 1 and plan.recipe.offload.enabled:
            # workers/engine/fsdp/transformer_impl.py builds the FSDP1 actor with cpu_offload=None.
            found.append(finding("DR208", TARGET, "fsdp_version 1 with offload: verl builds its FSDP1 actor "
                                 "without CPU offload (offload_policy is FSDP2's)"))
        else:
            found.extend(offload_findings(plan.recipe.offload, TARGET, "fsdp_config.offload_policy=true"))
    else:
        if plan.dims.hybrid:
            found.append(
                finding("DR208", TARGET,
                        f"shard_group {plan.dims.shard_group} < DP {plan.dims.dp} in Megatron")
            )
        if plan.dims.sequence > 1:
            found.append(finding("DR206", TARGET, f"context_parallel_size={plan.dims.sequence}"))
        opt = plan.recipe.optimizer
        if opt is not None and opt.name == "adam" and opt.weight_decay:
            found.append(finding("DR215", TARGET, f"optimizer.name adam{carry.as_written('optimizer.name')}, "
                                 f"weight_decay {opt.weight_decay}: "
                                 "Megatron's adam decouples weight decay"))
        if plan.precision == "fp32":
            found.append(finding("DR208", TARGET, "verl's Megatron engine trains in bf16 or fp16 only"))
        if plan.recipe.offload.params != "none":
            found.append(finding("DR210", TARGET, "megatron.param_offload=true"))
    if plan.recipe.activation_checkpointing == "selective" and (not megatron or plan.recipe.recompute_every):
        key = ("override_transformer_config.recompute_granularity=full" if megatron
               else "model.enable_gradient_checkpointing=true")
        found.append(finding("DR207", TARGET, key))
    found.extend(precision_findings(plan, TARGET, overlap=megatron, state=megatron, reduce=True, master=True))
    if plan.recipe.grad_clip == 0:
        found.append(finding("DR212", TARGET))
    if plan.recipe.precision == "auto":
        found.append(finding("DR235", TARGET, "verl's own dtypes apply (FSDP: bf16 parameters; Megatron: "
                             f"bf16); precision auto{carry.as_written('precision')}"))
    schedule = plan.recipe.schedule
    if schedule is not None and schedule.decay == "linear" and not megatron:
        found.append(finding("DR208", TARGET, "schedule.decay linear: verl's FSDP optimizer schedules are "
                             "constant and cosine (optim.lr_scheduler_type); Megatron's has linear"))
    lr = plan.recipe.optimizer.lr if plan.recipe.optimizer else None
    if schedule is not None and megatron and schedule.min_lr_ratio and lr is None:
        found.append(finding("DR208", TARGET, "schedule.min_lr_ratio: Megatron's floor is an absolute "
                             "min_lr, so optimizer.lr must be stated"))
    return found + carry.findings(plan, ("verl",), TARGET, launched=launched)


def _batch_findings(plan: Plan) -> list[Finding]:
    """verl's batch rules that a resolved Plan can still break (config check, then workers).

    The others hold for every Plan: `resolve` already refuses a rollout_n that does not
    divide the global batch and prompts_per_step < ppo_mini_batch_size, and the
    workers' split of a mini-batch over DP ranks and then micro-batches is exact
    because a mini-batch is micro × accumulation × DP sequences.
    """
    assert plan.recipe.rl is not None
    n, prompts = plan.recipe.rl.rollout_n, plan.recipe.rl.prompts_per_step
    batch = VerlBatch(world=plan.dims.world, model_parallel=plan.dims.model_parallel,
                      megatron=plan.recipe.strategy == "megatron", prompts=prompts, n=n,
                      mini=mini_batch(plan),
                      micro=None if plan.recipe.batch.micro_tokens is not None else plan.batch.micro)
    return [finding("DR220", TARGET, _message(v, batch)) for v in batch_violations(batch)]


def _message(v: Violation, b: VerlBatch) -> str:
    """The violation in the recipe's words (`resolve` has ruled out the others)."""
    if v.rule == "rollout-split":
        return (f"prompts_per_step × rollout_n = {b.prompts} × {b.n} = {(b.prompts or 0) * b.n} "
                f"is not divisible by {v.divisor}")
    if v.rule == "whole-mini-batches":
        return f"prompts_per_step {b.prompts} is not a whole number of mini-batches of {b.mini} prompts"
    if v.rule == "model-parallel":  # `plan`'s advice prices variants resolve never saw
        return f"{b.world} GPUs are not divisible by the model-parallel size {b.model_parallel}"
    raise AssertionError(f"resolve admitted a plan that breaks verl's {v.rule} rule")


def overrides(plan: Plan) -> list[Override]:
    """The Hydra overrides, in a stable order, the recipe's `native.verl` merged in last;
    assumes `findings(plan)` holds no error."""
    assert plan.recipe.rl is not None
    out: list[Override] = []
    if actor_engine(plan) == "megatron":
        out.append(("model_engine", "megatron"))
        out.extend(_megatron(plan))
    else:
        out.extend(_fsdp(plan))
    out.append((f"{ACTOR}.ppo_mini_batch_size", mini_batch(plan)))
    if plan.recipe.batch.micro_tokens is not None:
        # Rollout and ref log-prob passes follow the actor's switch and token budget
        # (`oc.select` in verl's config), so two keys say it for all three.
        out += [(f"{ACTOR}.use_dynamic_bsz", True),
                (f"{ACTOR}.ppo_max_token_len_per_gpu", plan.recipe.batch.micro_tokens)]
    else:
        out += [
            (f"{ACTOR}.ppo_micro_batch_size_per_gpu", plan.batch.micro),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", plan.batch.micro),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", plan.batch.micro),
        ]
    out += [
        ("actor_rollout_ref.rollout.n", plan.recipe.rl.rollout_n),
        *_rollout_memory(plan.recipe.rl),
        ("data.train_batch_size", plan.recipe.rl.prompts_per_step),
        ("actor_rollout_ref.model.enable_gradient_checkpointing",
         plan.recipe.activation_checkpointing != "none"),
        *_stated(plan),
        ("trainer.nnodes", plan.dims.nodes),
        ("trainer.n_gpus_per_node", plan.dims.gpus_per_node),
    ]
    return merge_overrides(out, plan.recipe.native.verl)


def _stated(plan: Plan) -> list[Override]:
    """The optimizer's values, clipping, schedule and saving the recipe states: verl's own
    defaults stand for the rest."""
    recipe, optim = plan.recipe, f"{ACTOR}.optim"
    out: list[Override] = []
    opt = recipe.optimizer
    if opt is not None:
        stated = (("lr", opt.lr), ("weight_decay", opt.weight_decay))
        out += [(f"{optim}.{key}", value) for key, value in stated if value is not None]
    if recipe.grad_clip is not None:
        out.append((f"{optim}.clip_grad", recipe.grad_clip or float("inf")))
    if recipe.schedule is not None:
        out += _schedule(plan, recipe.schedule)
    if recipe.checkpoint is not None:
        out += _saving(recipe.checkpoint)
    return out


def _saving(checkpoint: Checkpoint) -> list[Override]:
    """verl's saving keys (ppo_trainer.yaml's `trainer` section): `resume` auto/none are its
    `resume_mode` auto/disable, a path is `resume_path` with `resume_from_path`."""
    out: list[Override] = []
    if checkpoint.every is not None:
        out.append(("trainer.save_freq", checkpoint.every))
    if checkpoint.dir is not None:
        out.append(("trainer.default_local_dir", checkpoint.dir))
    if checkpoint.keep is not None:
        out.append(("trainer.max_actor_ckpt_to_keep", checkpoint.keep))
    if checkpoint.resume in ("auto", "none"):
        out.append(("trainer.resume_mode", "auto" if checkpoint.resume == "auto" else "disable"))
    elif checkpoint.resume is not None:
        out += [("trainer.resume_mode", "resume_path"), ("trainer.resume_from_path", checkpoint.resume)]
    return out


def _schedule(plan: Plan, schedule: Schedule) -> list[Override]:
    """verl's warmup keys are the same for both engines; the decay is FSDP's
    `lr_scheduler_type` (constant, cosine) with `min_lr_ratio`, or Megatron's
    `lr_decay_style` with an absolute `min_lr`."""
    optim = f"{ACTOR}.optim"
    out: list[Override] = []
    if actor_engine(plan) == "megatron":
        out.append((f"{optim}.lr_decay_style", schedule.decay))
        lr = plan.recipe.optimizer.lr if plan.recipe.optimizer else None
        if schedule.min_lr_ratio is not None and lr is not None:
            out.append((f"{optim}.min_lr", schedule.min_lr_ratio * lr))
    else:
        out.append((f"{optim}.lr_scheduler_type", schedule.decay))
        if schedule.min_lr_ratio is not None:
            out.append((f"{optim}.min_lr_ratio", schedule.min_lr_ratio))
    if schedule.warmup_steps is not None:
        out.append((f"{optim}.lr_warmup_steps", schedule.warmup_steps))
    if schedule.warmup_ratio is not None:
        out.append((f"{optim}.lr_warmup_steps_ratio", schedule.warmup_ratio))
    if schedule.total_steps is not None:
        out.append(("trainer.total_training_steps", schedule.total_steps))
    return out


def _rollout_memory(rl: RL) -> list[Override]:
    """The rollout engine's share of the GPU and whether it is freed for training, only
    where the recipe states them: otherwise verl's own defaults apply, as `plan` counts."""
    out: list[Override] = []
    if rl.rollout_memory is not None:
        out.append((dotted(ROLLOUT_MEMORY), rl.rollout_memory))
    if rl.free_rollout_memory is not None:
        out.append((dotted(FREE_CACHE), rl.free_rollout_memory))
    return out


def _fsdp(plan: Plan) -> list[Override]:
    fsdp = f"{ACTOR}.fsdp_config"
    out: list[Override] = [
        (f"{ACTOR}.strategy", actor_engine(plan)),
        (f"{fsdp}.reshard_after_forward", plan.reshard_after_forward),
        (f"{fsdp}.fsdp_size", fsdp_size(plan)),
        (f"{fsdp}.offload_policy", plan.recipe.offload.enabled),
        (f"{fsdp}.param_offload", False),
        (f"{fsdp}.optimizer_offload", False),
        *([(f"++{fsdp}.mixed_precision.param_dtype", FSDP_DTYPE[plan.precision])]
          if plan.recipe.precision != "auto" else []),
        *([(f"++{fsdp}.mixed_precision.reduce_dtype", FSDP_DTYPE[plan.recipe.reduce_dtype])]
          if plan.recipe.reduce_dtype is not None else []),
        *([(f"{fsdp}.model_dtype", "bf16")]  # pure bf16: the model is loaded, and trained, in bf16
          if plan.recipe.optimizer is not None and plan.recipe.optimizer.master_weights == "bf16" else []),
        (f"{ACTOR}.ulysses_sequence_parallel_size", plan.dims.sequence),
    ]
    if plan.dims.sequence > 1:
        # verl's Ulysses path requires unpadded (packed) sequences.
        out.append(("actor_rollout_ref.model.use_remove_padding", True))
    opt = plan.recipe.optimizer
    if opt is not None:
        out.append((f"{ACTOR}.optim.optimizer", FSDP_OPTIMIZER[opt.name]))
        if opt.name != "sgd" and opt.betas is not None:
            out.append((f"{ACTOR}.optim.betas", list(opt.betas)))
        if opt.name != "sgd" and opt.eps is not None:
            out.append((f"++{ACTOR}.optim.override_optimizer_config", {"eps": opt.eps}))
    return out


def _megatron(plan: Plan) -> list[Override]:
    megatron = f"{ACTOR}.megatron"
    override: dict[str, Any] = {}
    opt = plan.recipe.optimizer
    if opt is not None and opt.name != "sgd":
        # verl passes its `betas` only to Muon; Adam reads Megatron's own names.
        if opt.betas is not None:
            override["adam_beta1"], override["adam_beta2"] = opt.betas
        if opt.eps is not None:
            override["adam_eps"] = opt.eps
    if plan.recipe.offload.optimizer != "none":
        override["optimizer_cpu_offload"] = True
    if opt is not None and opt.state_dtype == "bf16":  # the precision-aware optimizer: bf16 moments
        override.update({"use_precision_aware_optimizer": True, "exp_avg_dtype": "bf16",
                         "exp_avg_sq_dtype": "bf16"})
    out: list[Override] = [
        (f"{ACTOR}.strategy", "megatron"),
        (f"{megatron}.tensor_model_parallel_size", plan.dims.tensor),
        (f"{megatron}.pipeline_model_parallel_size", plan.dims.pipeline),
        (f"{megatron}.context_parallel_size", plan.dims.sequence),
        *([(f"{megatron}.virtual_pipeline_model_parallel_size", plan.dims.virtual_stages)]
          if plan.dims.virtual_stages > 1 else []),
        *([(f"{megatron}.expert_model_parallel_size", plan.recipe.parallel.expert)]
          if plan.recipe.parallel.expert > 1 else []),
        (f"{megatron}.use_distributed_optimizer", plan.stage >= 1),
        (f"{megatron}.param_offload", plan.recipe.offload.params != "none"),
        (f"{megatron}.optimizer_offload", False),
        *([(f"{megatron}.dtype", MEGATRON_DTYPE[plan.precision])]
          if plan.recipe.precision != "auto" else []),
        *([(f"{ACTOR}.optim.optimizer", MEGATRON_OPTIMIZER[opt.name])] if opt is not None else []),
    ]
    if override:
        out.append((f"++{ACTOR}.optim.override_optimizer_config", override))
    out += [(f"++{megatron}.override_transformer_config.{key}", value) for key, value in _transformer(plan)]
    if plan.recipe.reduce_dtype is not None:
        out.append((f"++{megatron}.override_ddp_config.grad_reduce_in_fp32",
                    plan.recipe.reduce_dtype == "fp32"))
    return out


def _transformer(plan: Plan) -> list[Override]:
    """Megatron-Core `TransformerConfig` fields the recipe decides: recompute (verl's Megatron
    engine reads these, not `enable_gradient_checkpointing`), and only where stated,
    sequence parallelism, tensor-parallel overlap and uneven end stages."""
    r = plan.recipe
    out: list[Override] = []
    if r.activation_checkpointing == "full" or r.recompute_every:
        out += [("recompute_granularity", "full"), ("recompute_method", "uniform"),
                ("recompute_num_layers", 1)]
    elif r.activation_checkpointing == "selective":
        out += [("recompute_granularity", "selective"), ("recompute_modules", ["core_attn"])]
    if r.parallel.tensor_sequence is not None:
        out.append(("sequence_parallel", r.parallel.tensor_sequence))
    if r.parallel.tensor_overlap:
        out.append(("tp_comm_overlap", True))
    if r.parallel.first_stage_layers is not None:
        out.append(("num_layers_in_first_pipeline_stage", r.parallel.first_stage_layers))
    if r.parallel.last_stage_layers is not None:
        out.append(("num_layers_in_last_pipeline_stage", r.parallel.last_stage_layers))
    return out


def overrides_text(plan: Plan) -> str:
    """`verl_overrides.txt`: one override per line."""
    return "".join(override_line(key, value) + "\n" for key, value in overrides(plan))


def nested(plan: Plan) -> dict[str, Any]:
    """The values the same overrides set, as one nested mapping (`verl_actor.yaml`); a
    `~key` deletion sets none."""
    tree: dict[str, Any] = {}
    for written, value in overrides(plan):
        prefix, key = split_key(written)
        if prefix == "~":
            continue
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def render(plan: Plan, options: EmitOptions) -> Output:
    """`verl_overrides.txt` and `verl_actor.yaml`, or a `RecipeError` verl would raise later."""
    found = findings(plan, launched=options.launched)
    refuse_errors(found)
    return Output(
        files={
            OVERRIDES_FILE: overrides_text(plan),
            ACTOR_FILE: yaml.safe_dump(nested(plan), sort_keys=False, default_flow_style=False),
        },
        findings=tuple(found),
    )
