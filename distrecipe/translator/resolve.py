"""Recipe → Plan: fill every `auto`, prove every invariant, record provenance.

The one equation everything rests on (the seed's "2 × 4 × 32 = 256"):

    micro × accumulation × DP = global,   DP = nodes × gpus_per_node / (tensor × pipeline × sequence)

DeepSpeed derives the missing batch number by flooring and only then asserts, so a
wrong recipe fails on the cluster with a puzzling message. Here nothing is ever
floored: a non-integer is an error that prints every factor and the nearest valid
choices, before any GPU is booked.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from distrecipe.engines.gpus import gpu_spec
from distrecipe.engines.runner import uses_deepspeed
from distrecipe.errors import RecipeError
from distrecipe.job import Buckets, ParallelDims, Plan, ResolvedBatch, plan_values
from distrecipe.recipe import AUTO, Backend, Offload, Precision, Recipe, Strategy, name_from_file
from distrecipe.translator.native import conflicts, native_fsdp_version

NATURAL_STAGE = {"ddp": 0, "zero": 2, "fsdp": 3, "megatron": 1}
"""The stage a strategy means when `stage` is omitted (megatron 1 = distributed optimizer)."""
ALLOWED_STAGES = {"ddp": (0,), "zero": (1, 2, 3), "fsdp": (2, 3), "megatron": (0, 1)}
DEFAULT_BACKEND: dict[str, Backend] = {
    "ddp": "torchrun", "zero": "deepspeed", "fsdp": "torchrun", "megatron": "torchrun",
}


def default_backend(recipe: Recipe) -> Backend:
    """The launcher `launch.backend: auto` means: verl for `rl`; for an Accelerate program
    (`launch.program_kind: accelerate`, which learns its engine only from `accelerate
    launch`) Accelerate's, on its DeepSpeed path for ZeRO; else the strategy's natural one."""
    if recipe.rl:
        return "verl"
    if recipe.launch.program_kind == "accelerate" and recipe.strategy != "megatron":
        return "accelerate-deepspeed" if recipe.strategy == "zero" else "accelerate"
    return DEFAULT_BACKEND[recipe.strategy]


def resolve(recipe: Recipe, *, detected_gpus: int | None = None, world: int | None = None,
            micro: int | None = None) -> Plan:
    """Resolve a declared recipe into a Plan, or raise a `RecipeError` pointing at the cause.

    `cluster.gpus_per_node: auto` is answered by `detected_gpus` (the caller probes the
    machine, as launch does, so resolution itself stays pure and testable) or by a
    total `world` known from outside (lint's and diff's `--world`), divided exactly
    by the nodes. `micro` answers `batch.micro: auto` where memory chose it
    (`plan.fit`, above this layer); the recipe keeps saying `auto`.
    """
    prov: dict[str, str] = dict(recipe.derived)
    stage = _stage(recipe, prov)
    _check_offload(recipe, stage)
    _check_uneven_stages(recipe)
    _check_model(recipe)
    gpu_memory = _gpu_memory(recipe, prov)
    _check_headroom(recipe, gpu_memory)
    dims = _dims(recipe, stage, _gpus_per_node(recipe, detected_gpus, world, prov), prov)
    _check_expert(recipe, dims)
    batch = None if script_batch(recipe) else _batch(recipe, dims.dp, prov, micro, gpu_memory)
    if batch is None:
        prov.update(dict.fromkeys(("batch.micro", "batch.global"), SCRIPT_BATCH))
        prov["batch.accumulation"] = SCRIPT_BATCH if recipe.batch.accumulation == AUTO else "recipe"
    else:
        if recipe.batch.micro_tokens is not None:
            prov["batch.micro"] = (f"at most global / DP = {batch.global_} / {dims.dp}: micro-batches are "
                                   f"packed by tokens, ≤ {recipe.batch.micro_tokens} per GPU")
        _check_rl(recipe, batch.global_, dims.dp)
        _check_virtual_stages(recipe, batch.accumulation)
    backend = recipe.launch.backend
    if backend == AUTO:
        backend = default_backend(recipe)
        by_kind = backend != DEFAULT_BACKEND[recipe.strategy] and not recipe.rl
        kind = f" and launch.program_kind {recipe.launch.program_kind}" if by_kind else ""
        prov["launch.backend"] = f"default for strategy {recipe.strategy}" + (
            " with rl" if recipe.rl else kind)
    if recipe.grad_clip == 0:
        prov["grad_clip"] = "disabled (0 or null)"
    elif recipe.grad_clip is None:
        prov["grad_clip"] = "not stated: each engine's own (DeepSpeed, the Trainer and verl clip at 1.0)"
    if recipe.optimizer is None:
        prov["optimizer"] = "not stated: the training script's own (plan counts AdamW's state)"
    plan = Plan(recipe=recipe, dims=dims, resolved_batch=batch, stage=stage,
                fsdp_version=_fsdp_version(recipe, prov), backend=backend,
                precision=_precision(recipe, prov), gpu_memory=gpu_memory,
                buckets=_buckets(recipe, stage, prov), provenance=prov)
    _check_native(plan, recipe)
    _check_master_weights(plan)
    if "name" not in recipe.where:
        prov["name"] = name_from_file(recipe.source)[1] or "the recipe file's name"
    for key, value in plan_values(plan).items():
        if key not in prov:
            prov[key] = "recipe" if key in recipe.where else "not set" if value is None else "default"
    return plan


def _fsdp_version(recipe: Recipe, prov: dict[str, str]) -> int | None:
    """Which FSDP `strategy: fsdp` runs: the recipe's `fsdp_version`, else the first native
    key that says (`translator.native.FSDP_VERSION_KEYS`; one that disagrees with it is
    refused by `_check_native`), else 2, what every target writes. Another strategy has none."""
    if recipe.strategy != "fsdp":
        if recipe.fsdp_version is not None:
            raise RecipeError(f"fsdp_version {recipe.fsdp_version} says which FSDP strategy fsdp runs; this "
                              f"recipe has strategy {recipe.strategy}: drop fsdp_version or write "
                              "strategy: fsdp",
                              recipe.at("fsdp_version", "strategy"))
        return None
    if recipe.fsdp_version is not None:
        return recipe.fsdp_version
    stated = native_fsdp_version(recipe.native)
    if stated is not None:
        prov["fsdp_version"] = stated[1]
        return stated[0]
    prov["fsdp_version"] = "default: FSDP2 (fully_shard), what every target writes"
    return 2


def _precision(recipe: Recipe, prov: dict[str, str]) -> Precision:
    """The dtype a plan is priced in: the recipe's, or bf16 where the Trainer decides (`auto`)."""
    if recipe.precision != AUTO:
        return recipe.precision
    prov["precision"] = ("auto: the HF Trainer's --bf16 / --fp16 decide (the files say \"auto\"); plan "
                         "assumes bf16")
    return "bf16"


def variant(plan: Plan, why: str | None = None, **changes: Any) -> Plan:
    """`plan`'s recipe with `changes` made, resolved again on the same ranks per node: the
    one way a variant of a job is made (advice, `--compare`, `--search`, launch's
    `--target`), so every variant passes every check a recipe does.

    A change names a recipe field; a section's change may be a mapping of its fields
    (`batch={"micro": 2, "accumulation": "auto"}`), the rest of the section kept. The
    launcher stays the plan's unless a change names another: a variant is the same job
    run differently, judged by the engine that runs it. `why`, when given, is the
    provenance of every key changed.
    """
    recipe = plan.recipe
    edits: dict[str, Any] = {"launch": replace(recipe.launch, backend=plan.backend)}  # the job's launcher
    changed: list[str] = []
    for name, change in changes.items():
        if isinstance(change, dict):
            edits[name] = replace(edits.get(name, getattr(recipe, name)), **change)
            changed += [f"{name}.{key}" for key in change]
        else:
            edits[name], changed = change, [*changed, name]
    if recipe.fsdp_version is not None and "fsdp_version" not in changes and \
            edits.get("strategy", recipe.strategy) != "fsdp":
        edits["fsdp_version"] = None  # which FSDP goes with the FSDP strategy the change leaves
    revised_recipe = replace(recipe, **edits)
    # A micro-batch memory chose stays the variant's, unless the change is to the batch or
    # the layout (then the caller gives the batch: advice's and search's variants do).
    keeps = needs_fit(revised_recipe) and not {"batch", "parallel"} & changes.keys()
    kept = plan.batch.micro if keeps else None
    revised = resolve(revised_recipe, detected_gpus=plan.dims.gpus_per_node, micro=kept)
    if kept is not None:
        revised.provenance["batch.micro"] = plan.provenance.get("batch.micro",
                                                                "the plan's, chosen for memory")
    if why is not None:
        revised.provenance.update(dict.fromkeys(changed, why))
    return revised


def _check_native(plan: Plan, recipe: Recipe) -> None:
    """A native key restating a decided value in the engine's spelling passes; one that
    contradicts it would make the engine do something other than the recipe says."""
    if not plan.recipe.native:
        return
    for written, key, value, ours in conflicts(plan):
        raise RecipeError(
            f"{written}: {key} = {value!r} contradicts the recipe's {ours} "
            f"({_decided(plan, ours)}); the recipe decides it: drop the native key or change {ours}",
            recipe.at(written, "native"),
        )


def _decided(plan: Plan, ours: str) -> str:
    values = plan_values(plan)
    if ours in values:
        return f"{ours} = {values[ours]}"
    return ", ".join(f"{k} = {v}" for k, v in values.items() if k.startswith(ours + "."))


def _stage(recipe: Recipe, prov: dict[str, str]) -> int:
    strategy = recipe.strategy
    if recipe.stage is None:
        prov["stage"] = f"natural stage of strategy {strategy}"
        return NATURAL_STAGE[strategy]
    allowed = ALLOWED_STAGES[strategy]
    if recipe.stage not in allowed:
        hint = {
            ("zero", 0): "stage 0 is plain data parallelism: write strategy: ddp",
            ("ddp", 1): "sharding needs strategy: zero (or fsdp for stages 2 and 3)",
            ("fsdp", 1): "FSDP has no stage-1 form; use strategy: zero with stage 1, or stage 2",
            ("fsdp", 0): "unsharded training is strategy: ddp",
        }.get((strategy, recipe.stage), f"strategy {strategy} allows stage {_or(allowed)}")
        raise RecipeError(
            f"stage {recipe.stage} does not go with strategy {strategy}: {hint}",
            recipe.at("stage", "strategy"),
        )
    return recipe.stage


def _check_headroom(recipe: Recipe, gpu_memory: int | None) -> None:
    """A `cluster.headroom` size that leaves nothing of the GPU is refused, not judged."""
    kept = recipe.cluster.headroom
    if isinstance(kept, int) and gpu_memory is not None and kept >= gpu_memory:
        raise RecipeError(f"cluster.headroom {kept / 1e9:.4g} GB leaves nothing of the GPU's "
                          f"{gpu_memory / 1e9:.4g} GB: keep less free",
                          recipe.at("cluster.headroom", "cluster"))


def _gpu_memory(recipe: Recipe, prov: dict[str, str]) -> int | None:
    """Bytes per GPU: `cluster.gpu_memory`, else what `cluster.gpu` implies; a stated size
    that is none of the GPU's is refused naming both (`engines.gpus`: the marketed GB up to
    the GiB the HBM is built in, where what the driver reports lies). A GPU without bf16
    refuses a bf16 recipe, which it could not run."""
    cluster = recipe.cluster
    spec = gpu_spec(cluster.gpu)
    if spec is None:
        return cluster.gpu_memory
    if not spec.bf16 and recipe.precision == "bf16":
        raise RecipeError(f"cluster.gpu {cluster.gpu} ({spec.name}) has no bf16 tensor cores, and precision "
                          "is bf16: write precision: fp16 (or fp32)",
                          recipe.at("precision", "cluster.gpu", "cluster"))
    if cluster.gpu_memory is None:
        prov["cluster.gpu_memory"] = (f"{spec.memory[0]} GB, as cluster.gpu {cluster.gpu} implies "
                                      "(engines/gpus.py)")
        return spec.memory_bytes
    if not spec.agrees(cluster.gpu_memory):
        raise RecipeError(
            f"cluster.gpu_memory {cluster.gpu_memory / 1e9:.4g} GB contradicts cluster.gpu {cluster.gpu} "
            f"({spec.name}, {spec.sizes()}): write the GPU's size (from {spec.memory[0]} GB to "
            f"{spec.memory[0]} GiB), or leave cluster.gpu_memory out",
            recipe.at("cluster.gpu_memory", "cluster"))
    return cluster.gpu_memory


def _check_model(recipe: Recipe) -> None:
    """A mixture of experts and multi-latent attention say enough to be counted."""
    m = recipe.model
    where = recipe.at("model.experts", "model.hf_config", "model")
    if m.experts is None:
        stray = [key for key in ("experts_per_token", "expert_intermediate_size", "shared_expert_size")
                 if getattr(m, key) is not None] + [key for key in ("shared_experts", "dense_layers")
                                                    if getattr(m, key)]
        if stray:
            raise RecipeError(f"model.{', model.'.join(stray)} describe{'s' if len(stray) == 1 else ''} a "
                              "mixture of experts, but model.experts is not set", where)
        return
    if m.experts_per_token is None or m.experts_per_token > m.experts:
        raise RecipeError(f"model.experts {m.experts} needs model.experts_per_token, the routed experts a "
                          f"token visits (1 to {m.experts})" + (
                              f"; it is {m.experts_per_token}" if m.experts_per_token else ""), where)
    if m.layers is not None and m.dense_layers > m.layers:
        raise RecipeError(f"model.dense_layers {m.dense_layers} is more than model.layers {m.layers}", where)
    if m.kv_lora_rank is not None and (m.rope_head_dim is None or (m.head_dim or 0) <= m.rope_head_dim):
        raise RecipeError("model.kv_lora_rank (multi-latent attention) needs model.rope_head_dim and a "
                          "model.head_dim larger than it", recipe.at("model.kv_lora_rank", "model"))


def _check_expert(recipe: Recipe, dims: ParallelDims) -> None:
    """Expert parallelism divides the experts over ranks taken from the data (× sequence)
    parallel group, as Megatron forms its expert groups (`expert_model_parallel_size` must
    divide DP × CP when the experts' tensor parallelism is the model's) and DeepSpeed MoE
    its `ep_size` groups; DDP replicates every expert."""
    ep = recipe.parallel.expert
    if ep == 1:
        return
    where = recipe.at("parallel.expert", "parallel")
    experts = recipe.model.experts
    if experts is None:
        raise RecipeError(f"parallel.expert {ep} divides a mixture of experts, but model.experts is not set",
                          where)
    if experts % ep:
        raise RecipeError(f"parallel.expert {ep} must divide model.experts {experts}; valid: "
                          f"{', '.join(map(str, divisors(experts)))}", where)
    group = dims.dp * dims.sequence
    if group % ep:
        raise RecipeError(f"parallel.expert {ep} must divide the data-parallel × sequence ranks DP × "
                          f"sequence = {dims.dp} × {dims.sequence} = {group}, which the experts are spread "
                          "over; valid: "
                          f"{', '.join(str(d) for d in divisors(group) if experts % d == 0)}", where)
    if recipe.strategy == "ddp":
        raise RecipeError("parallel.expert needs sharded experts: DDP keeps a whole copy of every expert on "
                          "every rank; use strategy zero (DeepSpeed MoE) or megatron", where)


def _check_master_weights(plan: Plan) -> None:
    """Pure bf16 (`optimizer.master_weights: bf16`) where the engine can run it: bf16
    training; not Megatron-Core, whose main parameters are fp32 (its precision-aware
    optimizer's `main_params_dtype` is fp32 or fp16); under DeepSpeed stage ≥ 1 and bf16
    moments, or fp32 moments on the host (`runtime/config.py` asserts the stage,
    `base_optimizer._configure_master_weights` demands ZeRO-Offload with DeepSpeedCPUAdam
    unless `bf16_optimizer_states`); torch's optimizers keep the moments in the
    parameters' dtype, so a stated fp32 `state_dtype` cannot be had there."""
    recipe = plan.recipe
    opt = recipe.optimizer
    if opt is None or opt.master_weights == "fp32":
        return
    where = recipe.at("optimizer.master_weights", "optimizer")
    if recipe.precision != "bf16":
        raise RecipeError(f"optimizer.master_weights: bf16 (pure bf16) needs precision: bf16; this recipe "
                          f"has {recipe.precision}",
                          recipe.at("optimizer.master_weights", "precision", "optimizer"))
    if recipe.strategy == "megatron":
        raise RecipeError("optimizer.master_weights: bf16: Megatron-Core keeps fp32 main parameters (its "
                          "precision-aware optimizer's main_params_dtype is fp32 or fp16); write fp32",
                          where)
    if uses_deepspeed(plan):
        if plan.stage < 1:
            raise RecipeError("optimizer.master_weights: bf16 is DeepSpeed's bf16_master_weights_and_grads, "
                              "which needs ZeRO stage 1, 2 or 3; this recipe has stage 0", where)
        if opt.state_dtype == "fp32" and recipe.offload.optimizer == "none":
            raise RecipeError("optimizer.master_weights: bf16 with fp32 optimizer state needs "
                              "offload.optimizer (DeepSpeed keeps fp32 moments only in DeepSpeedCPUAdam on "
                              "the host); write "
                              "optimizer.state_dtype: bf16 (bf16_optimizer_states) or offload.optimizer: cpu",
                              recipe.at("optimizer.master_weights", "optimizer.state_dtype", "optimizer"))
    elif opt.state_dtype == "fp32" and "optimizer.state_dtype" in recipe.where:
        raise RecipeError("optimizer.state_dtype: fp32 with master_weights: bf16: torch's optimizers keep "
                          "Adam's moments in the parameters' dtype (bf16 here); write bf16 or leave it out",
                          recipe.at("optimizer.state_dtype", "optimizer"))


def _check_offload(recipe: Recipe, stage: int) -> None:
    refusal = offload_refusal(recipe.offload, stage, recipe.strategy)
    if refusal is not None:
        raise RecipeError(refusal.message, recipe.at(*refusal.keys), keys=refusal.keys)
    if recipe.offload.activations != "none" and recipe.activation_checkpointing != "full":
        raise RecipeError(
            f"offload.activations: {recipe.offload.activations} holds the checkpointed layer inputs in host "
            "memory (DeepSpeed's cpu_checkpointing), so it needs activation_checkpointing: full; this recipe "
            f"has {recipe.activation_checkpointing}",
            recipe.at("offload.activations", "activation_checkpointing"))


def offload_refusal(off: Offload, stage: int, strategy: Strategy) -> RecipeError | None:
    """Why an offload cannot go with a stage and strategy (a refusal naming the keys it is
    about, not yet placed in a file), or None; `plan`'s advice asks before it offers one."""
    if off.params != "none" and stage < 3:
        return RecipeError(f"offload.params: {off.params} needs stage 3 (parameters are only partitioned, "
                           f"and so only offloadable, at stage 3); this recipe has stage {stage}",
                           keys=("offload.params",))
    if off.optimizer != "none" and stage < 1:
        return RecipeError("offload.optimizer needs stage ≥ 1 (ZeRO-Offload moves the partitioned optimizer "
                           "state); stage 0 keeps it unpartitioned on every GPU", keys=("offload.optimizer",))
    if "nvme" in (off.optimizer, off.params):
        if strategy != "zero":
            return RecipeError(f"NVMe offload is DeepSpeed's (ZeRO-Infinity); strategy {strategy} "
                               "can only offload to cpu", keys=("offload.params", "offload.optimizer"))
        if not off.nvme_path:
            return RecipeError("offload to nvme needs offload.nvme_path (a local NVMe mount on every node)",
                               keys=("offload.optimizer", "offload.params", "offload"))
    return None


def _gpus_per_node(recipe: Recipe, detected: int | None, world: int | None, prov: dict[str, str]) -> int:
    declared = recipe.cluster.gpus_per_node
    if declared != AUTO:
        return declared
    if world is not None:
        nodes = recipe.cluster.nodes
        if world % nodes:
            raise RecipeError(
                f"cluster.gpus_per_node is auto and the world is {world}, which "
                f"cluster.nodes = {nodes} does not divide (distrecipe never rounds); "
                f"nearest valid worlds: {_or(nearest_multiples(world, nodes))}",
                recipe.at("cluster.gpus_per_node", "cluster"),
            )
        prov["cluster.gpus_per_node"] = f"world / nodes = {world} / {nodes}"
        return world // nodes
    if detected is None or detected < 1:
        raise RecipeError(
            "cluster.gpus_per_node is auto but no GPUs were detected here; "
            "write the number of GPUs per node, or --set cluster.gpus_per_node=8",
            recipe.at("cluster.gpus_per_node", "cluster"),
        )
    prov["cluster.gpus_per_node"] = f"detected on this machine: {detected}"
    return detected


def _dims(recipe: Recipe, stage: int, gpus: int, prov: dict[str, str]) -> ParallelDims:
    nodes, par = recipe.cluster.nodes, recipe.parallel
    dims = ParallelDims.from_recipe(recipe, gpus)
    prov["parallel.dp"] = (
        f"nodes × gpus_per_node / (tensor × pipeline × sequence) = "
        f"{nodes} × {gpus} / ({par.tensor} × {par.pipeline} × {par.sequence})"
    )
    prov["cluster.world"] = f"nodes × gpus_per_node = {nodes} × {gpus}"
    shard = _shard_group(recipe, stage, dims.dp, prov)
    return dims if shard == dims.dp else ParallelDims.from_recipe(recipe, gpus, shard)


def _check_virtual_stages(recipe: Recipe, accumulation: int) -> None:
    """Interleaved 1F1B's preconditions, refused here rather than in the first step.

    Megatron-LM builds v model chunks of layers / (pipeline × v) layers on each pipeline
    rank (`get_num_layers_to_build` needs the split exact), and its interleaved schedule
    (`forward_backward_pipelining_with_interleaving`, megatron/core/pipeline_parallel/
    schedules.py) runs micro-batches in groups of `microbatch_group_size_per_vp_stage`,
    which `ModelParallelConfig` sets to the pipeline size: verl 0.9.1's Megatron engine
    asserts "micro_batches ... must be divisible by num_batches_divided_by" with exactly
    that group (workers/engine/megatron/transformer_impl.py, `forward_backward_batch`),
    as older Megatron raised "number of microbatches is not divisible by pipeline-model-
    parallel-size when using interleaved schedule". Token-packed micro-batches
    (`batch.micro_tokens`) are exempt: verl pads their count up to a multiple of it.
    """
    par = recipe.parallel
    v, p = par.virtual_stages, par.pipeline
    if v == 1:
        return
    where = recipe.at("parallel.virtual_stages", "parallel")
    if p == 1:
        raise RecipeError(f"parallel.virtual_stages {v} interleaves pipeline stages, but parallel.pipeline "
                          "is 1: set pipeline > 1 or virtual_stages 1", where)
    layers = recipe.model.layers
    uneven = par.first_stage_layers is not None or par.last_stage_layers is not None
    if layers is not None and uneven:
        counts = stage_layers(recipe)
        if any(count % v for count in counts):
            raise RecipeError(
                f"with virtual_stages {v}, every pipeline stage's layers must split into {v} model chunks "
                f"(Megatron's get_num_layers_to_build), but the stages hold "
                f"{', '.join(map(str, counts))} layers",
                where)
    elif layers is not None and layers % (p * v):
        fits = (f"virtual_stages that do: {_or(tuple(divisors(layers // p)))}" if layers % p == 0
                else f"no virtual_stages does, as pipeline {p} does not divide {layers}")
        raise RecipeError(
            f"model.layers {layers} does not split into pipeline × virtual_stages = {p} × {v} = {p * v} "
            f"equal model chunks; {fits}; or give parallel.first_stage_layers / last_stage_layers", where)
    if recipe.batch.micro_tokens is None and accumulation % p:
        raise RecipeError(
            f"interleaved 1F1B (virtual_stages {v}) runs micro-batches in groups of pipeline = {p}, "
            f"but batch.accumulation is {accumulation}: Megatron (and verl's Megatron engine) needs "
            f"micro-batches per step to be a multiple of {p}; use accumulation "
            f"{_or(nearest_multiples(accumulation, p))}",
            recipe.at("batch.accumulation", "batch.micro", "parallel.virtual_stages", "batch"))


def stage_layers(recipe: Recipe) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage, first to last: the stated first and last
    stages' counts and the rest split evenly over the others (Megatron-Core's
    `get_num_layers_to_build` with `num_layers_in_first/last_pipeline_stage`), or an even
    split rounded up (⌈L/p⌉: what the fullest stage holds) when neither is stated. Needs
    `model.layers`; `_check_uneven_stages` has proved the split exact."""
    par, layers = recipe.parallel, recipe.model.layers
    assert layers is not None
    p = par.pipeline
    first, last = par.first_stage_layers, par.last_stage_layers
    if first is None and last is None:
        return (-(-layers // p),) * p
    given = [count for count in (first, last) if count is not None]
    rest = p - len(given)
    middle = (layers - sum(given)) // rest if rest else 0
    counts = [middle] * p
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return tuple(counts)


def _check_uneven_stages(recipe: Recipe) -> None:
    """`parallel.first_stage_layers` / `last_stage_layers` are Megatron-Core's
    `num_layers_in_first/last_pipeline_stage`: they need a pipeline, and the layers left
    must split evenly over the other stages (its assertion "With uneven pipelineing the
    left over layers must be divisible by left over stages")."""
    par = recipe.parallel
    if par.tensor_sequence is not None and recipe.strategy != "megatron":
        raise RecipeError(f"parallel.tensor_sequence is Megatron's sequence_parallel; strategy "
                          f"{recipe.strategy}'s tensor parallelism has no such switch: use strategy megatron "
                          "or drop it",
                          recipe.at("parallel.tensor_sequence", "parallel"))
    first, last = par.first_stage_layers, par.last_stage_layers
    if first is None and last is None:
        return
    where = recipe.at("parallel.first_stage_layers", "parallel.last_stage_layers", "parallel")
    if recipe.strategy != "megatron":
        raise RecipeError("parallel.first_stage_layers / last_stage_layers are Megatron's uneven pipeline "
                          f"stages (num_layers_in_first/last_pipeline_stage); strategy {recipe.strategy} "
                          "splits the layers evenly: use strategy megatron or drop them", where)
    p, layers = par.pipeline, recipe.model.layers
    if p == 1:
        raise RecipeError("parallel.first_stage_layers / last_stage_layers need parallel.pipeline > 1", where)
    given = [count for count in (first, last) if count is not None]
    if first is not None and last is not None and p == 2 and layers is not None and first + last != layers:
        raise RecipeError(f"with pipeline 2, first_stage_layers + last_stage_layers = {first} + {last} "
                          f"must be model.layers {layers}", where)
    if layers is None:
        return
    rest, left = p - len(given), layers - sum(given)
    if left < 0 or (rest and (left % rest or left // rest == 0)):
        raise RecipeError(
            f"model.layers {layers} less the stated stages' {' + '.join(map(str, given))} leaves {left} "
            f"layers, which do not split evenly over the other {rest} pipeline stages (at least one layer "
            "each)", where)


def _shard_group(recipe: Recipe, stage: int, dp: int, prov: dict[str, str]) -> int:
    declared = recipe.parallel.shard_group
    if declared == "all" or declared == dp:
        prov["parallel.shard_group"] = f"all data-parallel ranks (DP = {dp})"
        return dp
    where = recipe.at("parallel.shard_group")
    if stage == 0:
        raise RecipeError("parallel.shard_group needs a sharded stage (≥ 1); stage 0 shards nothing", where)
    if declared > dp or dp % declared:
        valid = divisors(dp)
        raise RecipeError(
            f"parallel.shard_group {declared} must divide the data-parallel world DP = {dp}; "
            f"valid: {', '.join(map(str, valid))} (or all)",
            where,
        )
    return declared


SCRIPT_BATCH = ("the training script decides (batch.micro and batch.global are auto): the HF Trainer's "
                "--per_device_train_batch_size and --gradient_accumulation_steps, or the DataLoader's "
                "batch_size")
"""The provenance of a batch the recipe leaves to the program (an HF template, an Accelerate YAML)."""


def script_batch(recipe: Recipe) -> bool:
    """Nothing in the recipe fixes the batch's size (micro and global `auto`, no token budget):
    the training script does, as an HF Trainer template or an Accelerate config leaves it.
    An accumulation the recipe states is kept (`Plan.script_accumulation`)."""
    b = recipe.batch
    return (b.micro == AUTO and b.global_ == AUTO and b.micro_tokens is None
            and b.micro_policy != "accumulation-1")


def _batch(recipe: Recipe, dp: int, prov: dict[str, str], chosen: int | None,
           gpu_memory: int | None) -> ResolvedBatch:
    """Solve micro × accumulation × DP = global for what is `auto`; never floor.

    With micro and accumulation both `auto`, what micro means is `batch.micro_policy`'s:
    the largest that fits (memory chooses it, above this layer, and passes it as `chosen`;
    without what memory needs, an error naming it) or accumulation 1."""
    b = recipe.batch
    rl_n = recipe.rl.rollout_n if recipe.rl else 1
    micro = chosen if b.micro == AUTO else b.micro
    acc = None if b.accumulation == AUTO else b.accumulation
    glob = None if b.global_ == AUTO else b.global_
    if b.micro_tokens is not None and (micro is not None or acc is not None or glob is None):
        raise RecipeError(
            f"batch.micro_tokens {b.micro_tokens} packs micro-batches by tokens, so their sample count "
            "varies: leave batch.micro and batch.accumulation auto and give batch.global",
            recipe.at("batch.micro", "batch.accumulation", "batch.micro_tokens", "batch"),
        )
    if glob is None and micro is None:  # only under micro_policy accumulation-1 (else the script's)
        raise RecipeError(
            "batch.micro and batch.global are both auto, and batch.micro_policy accumulation-1 divides "
            "the global batch: set batch.global (or batch.micro, per GPU), e.g. --set batch.global=64, "
            "or drop the policy for the training script to decide the batch",
            recipe.at("batch.micro", "batch.global", "batch"),
        )
    if glob is not None and dp > glob:
        raise RecipeError(
            f"the data-parallel world DP = {dp} is larger than batch.global = {glob}: every rank "
            f"needs at least one sample per step; use ≤ {glob} data-parallel ranks or global ≥ {dp}",
            recipe.at("batch.global", "batch"),
        )
    if glob is None:
        assert micro is not None  # excluded above; narrows the type
        acc = _default_accumulation(acc, prov)
        glob = micro * acc * dp
        prov["batch.global"] = f"micro × accumulation × DP = {micro} × {acc} × {dp}"
    elif micro is None:
        if acc is None and b.micro_policy == "largest-that-fits" and b.micro_tokens is None \
                and glob % dp == 0 and glob != dp:
            _refuse_unfitted(recipe, glob, dp, gpu_memory)
        if acc is None and b.micro_policy == "accumulation-1":
            acc = 1
            prov["batch.accumulation"] = "1, as batch.micro_policy accumulation-1 says"
        acc = _default_accumulation(acc, prov)
        micro = _exact(recipe, glob, acc * dp, "micro",
                       f"global / (accumulation × DP) = {glob} / ({acc} × {dp})", prov)
    elif acc is None:
        acc = _exact(recipe, glob, micro * dp, "accumulation",
                     f"global / (micro × DP) = {glob} / ({micro} × {dp})", prov)
    elif micro * acc * dp != glob:
        raise RecipeError(
            f"micro × accumulation × DP = {micro} × {acc} × {dp} = {micro * acc * dp}, "
            f"but batch.global is {glob}; {_suggest(glob, micro, acc, dp, rl_n)}",
            recipe.at("batch.global", "batch"),
        )
    return ResolvedBatch(micro=micro, accumulation=acc, global_=glob)


def memory_inputs_missing(recipe: Recipe, gpu_memory: int | None) -> list[str]:
    """What the memory model needs to choose `micro: auto` and the recipe does not give."""
    m = recipe.model
    missing = ["model.params (or model.hf_config)"] if m.params is None else []
    missing += [f"model.{key}" for key in ("hidden_size", "layers", "heads", "vocab")
                if getattr(m, key) is None]
    if recipe.batch.seq_len is None:
        missing.append("batch.seq_len")
    if recipe.cluster.device == "cpu":
        missing.append("GPUs (cluster.device is cpu)")
    elif gpu_memory is None:
        missing.append("cluster.gpu_memory (or cluster.gpu)")
    return missing


def needs_fit(recipe: Recipe) -> bool:
    """Whether `batch.micro: auto` is to be chosen by memory: micro and accumulation `auto`,
    the global batch fixed, micro-batches counted in samples, `largest-that-fits`."""
    b = recipe.batch
    return (b.micro == AUTO and b.accumulation == AUTO and b.global_ != AUTO and b.micro_tokens is None
            and b.micro_policy == "largest-that-fits")


def _refuse_unfitted(recipe: Recipe, glob: int, dp: int, gpu_memory: int | None) -> None:
    """`micro: auto` meant "the largest that fits" and memory did not choose it: say what it
    needs, rather than silently taking accumulation 1 (micro = global / DP)."""
    missing = memory_inputs_missing(recipe, gpu_memory)
    where = recipe.at("batch.micro", "batch.accumulation", "batch")
    per_rank = f"global / DP = {glob} / {dp}" + (f" = {glob // dp}" if glob % dp == 0 else "")
    if missing:
        raise RecipeError(
            "batch.micro and batch.accumulation are auto, so the micro-batch is the largest that fits "
            f"the GPU (batch.micro_policy largest-that-fits), which needs {', '.join(missing)}: give "
            f"{'it' if len(missing) == 1 else 'them'}, set batch.micro (and accumulation follows), or "
            f"set batch.micro_policy: accumulation-1 for micro = {per_rank}", where)
    raise RecipeError("batch.micro: auto is the largest micro-batch that fits, which the memory model "
                      "chooses: resolve the recipe through distrecipe.api (load_plan), which does", where)


def _default_accumulation(acc: int | None, prov: dict[str, str]) -> int:
    """With two batch values auto, accumulation is 1 (the rule DeepSpeed also applies)."""
    if acc is None:
        prov["batch.accumulation"] = "default 1 (two batch values were auto)"
        return 1
    return acc


def _exact(recipe: Recipe, glob: int, divisor: int, name: str, formula: str, prov: dict[str, str]) -> int:
    """`glob / divisor` when it is a positive integer, else an error with the nearest choices."""
    if glob % divisor == 0 and glob >= divisor:
        prov[f"batch.{name}"] = formula
        return glob // divisor
    # With rl the global batch must also split into rollout groups: offer only globals
    # that pass that check too, so following a suggestion never meets the next error.
    step = math.lcm(divisor, recipe.rl.rollout_n) if recipe.rl else divisor
    raise RecipeError(
        f"batch.{name} = {formula} = {glob / divisor:g} is not a positive integer "
        f"(distrecipe never rounds); nearest valid batch.global: {_or(nearest_multiples(glob, step))}",
        recipe.at("batch.global", "batch"),
    )


def divisors(n: int) -> list[int]:
    """The divisors of `n` in order, found up to √n: an error message about a huge
    world must not do work proportional to the world."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


def nearest_multiples(total: int, divisor: int) -> tuple[int, ...]:
    """The positive multiples of `divisor` just below and above `total`: the global
    batches that would make a derived batch number whole. Resolve and lint offer these."""
    lower, upper = (total // divisor) * divisor, -(-total // divisor) * divisor
    return tuple(v for v in dict.fromkeys((lower, upper)) if v > 0)


def _suggest(glob: int, micro: int, acc: int, dp: int, rollout_n: int = 1) -> str:
    """Nearest valid choices for a mismatched triple, changing one number at a time; with
    rl, only choices whose global batch also splits into `rollout_n` groups."""
    tips = []
    if (micro * acc * dp) % rollout_n == 0:
        tips.append(f"global {micro * acc * dp}")
    if glob % rollout_n == 0 and glob % (micro * dp) == 0 and glob >= micro * dp:
        tips.append(f"accumulation {glob // (micro * dp)}")
    if glob % rollout_n == 0 and glob % (acc * dp) == 0 and glob >= acc * dp:
        tips.append(f"micro {glob // (acc * dp)}")
    if not tips:  # two numbers must change: the least accumulation that splits into groups
        k = next(k for k in range(acc, acc + rollout_n + 1) if (micro * k * dp) % rollout_n == 0)
        tips.append(f"accumulation {k} with global {micro * k * dp}")
    return "set " + _or(tips)


def _check_rl(recipe: Recipe, global_batch: int, dp: int) -> None:
    rl = recipe.rl
    if rl is None:
        return
    if global_batch % rl.rollout_n:
        raise RecipeError(
            f"with rl, a step's global batch counts sequences = ppo_mini_batch_size (prompts) × "
            f"rollout_n; batch.global {global_batch} is not divisible by rl.rollout_n {rl.rollout_n}; "
            f"{_rl_suggestion(recipe, global_batch, dp)}",
            recipe.at("rl.rollout_n", "rl"),
        )
    mini = global_batch // rl.rollout_n
    if rl.prompts_per_step < mini:
        raise RecipeError(
            f"rl.prompts_per_step {rl.prompts_per_step} is smaller than one optimizer step's "
            f"prompts (batch.global / rollout_n = {global_batch} / {rl.rollout_n} = {mini}); "
            "verl requires train_batch_size ≥ ppo_mini_batch_size",
            recipe.at("rl.prompts_per_step", "rl"),
        )


def _rl_suggestion(recipe: Recipe, global_batch: int, dp: int) -> str:
    """Choices that satisfy the batch equation and rollout_n at once: the nearest globals
    that the fixed batch numbers divide, or (global derived) an accumulation that works."""
    assert recipe.rl is not None
    n, b = recipe.rl.rollout_n, recipe.batch
    fixed = dp * (b.micro if b.micro != AUTO else 1) * (b.accumulation if b.accumulation != AUTO else 1)
    if b.global_ != AUTO:
        return f"nearest valid batch.global: {_or(nearest_multiples(global_batch, math.lcm(fixed, n)))}"
    per_acc = global_batch // (b.accumulation if b.accumulation != AUTO else 1)
    k = next(k for k in range(1, n + 1) if (per_acc * k) % n == 0)
    return f"set batch.accumulation {k} (global {per_acc * k})"


def _buckets(recipe: Recipe, stage: int, prov: dict[str, str]) -> Buckets:
    """HF Trainer's hidden-size rules, so raw DeepSpeed gets what the Trainer would pick."""
    h = recipe.model.hidden_size
    if h is None:
        note = "DeepSpeed default (model.hidden_size unknown)"
        prov["zero.reduce_bucket_size"] = note
        return Buckets(reduce_bucket_size=None, stage3_prefetch_bucket_size=None,
                       stage3_param_persistence_threshold=None)
    prov["zero.reduce_bucket_size"] = f"hidden² = {h}²"
    if stage == 3:
        prov["zero.stage3_prefetch_bucket_size"] = f"int(0.9 × hidden²) = int(0.9 × {h}²)"
        prov["zero.stage3_param_persistence_threshold"] = f"10 × hidden = 10 × {h}"
    return Buckets(
        reduce_bucket_size=h * h,
        stage3_prefetch_bucket_size=int(0.9 * h * h) if stage == 3 else None,
        stage3_param_persistence_threshold=10 * h if stage == 3 else None,
    )


def _or(items: list[str] | tuple[object, ...]) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

