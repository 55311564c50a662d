"""verl actor overrides (`key=value` lines, a launch script, or the same as YAML) → recipe.

The inverse of `translator/verl.py`: `ppo_mini_batch_size` prompts × `rollout.n` is
the global batch in sequences, `data.train_batch_size` the prompts per RL step; the
FSDP2 actor's `reshard_after_forward` is the stage and `fsdp_size` the shard group,
the Megatron actor's distributed optimizer is stage 1.
"""

from __future__ import annotations

from typing import Any

from distrecipe.translator import verl as emitter
from distrecipe.translator.importers import Context, Imported, NotImportable, World, cluster, inverse

FSDP_OPTIMIZERS = inverse(emitter.FSDP_OPTIMIZER)
MEGATRON_OPTIMIZERS = inverse(emitter.MEGATRON_OPTIMIZER)
FSDP_PRECISIONS = inverse(emitter.FSDP_DTYPE)
MEGATRON_PRECISIONS = inverse(emitter.MEGATRON_DTYPE)


def _get(data: dict[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _section(data: dict[str, Any], dotted: str) -> dict[str, Any]:
    value = _get(data, dotted)
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    actor = _section(data, "actor_rollout_ref.actor")
    world = _world(data, context)
    megatron = data.get("model_engine") == "megatron" or actor.get("strategy") == "megatron"
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world)}
    recipe.update(_megatron(actor) if megatron else _fsdp(actor, world))
    n = _int(_get(data, "actor_rollout_ref.rollout.n"), 1)
    mini = actor.get("ppo_mini_batch_size")
    micro = actor.get("ppo_micro_batch_size_per_gpu")
    if not isinstance(mini, int) or not isinstance(micro, int):
        raise NotImportable("verl actor batch needs ppo_mini_batch_size and ppo_micro_batch_size_per_gpu",
                            context.doc.where(("actor_rollout_ref", "actor")))
    recipe["batch"] = {"micro": micro, "accumulation": "auto", "global": mini * n}
    recipe["precision"] = _precision(actor, megatron)
    recipe["optimizer"] = _optimizer(_section(actor, "optim"), megatron)
    clip = _get(actor, "optim.clip_grad", 1.0)
    recipe["grad_clip"] = 0 if clip == float("inf") else clip
    checkpointing = _get(data, "actor_rollout_ref.model.enable_gradient_checkpointing")
    recipe["activation_checkpointing"] = checkpointing is True
    prompts = _get(data, "data.train_batch_size")
    if isinstance(prompts, int):
        recipe["rl"] = {"rollout_n": n, "prompts_per_step": prompts}
    recipe["launch"] = {"backend": "verl"}
    return Imported(recipe)


def _world(data: dict[str, Any], context: Context) -> World:
    gpus = _int(_get(data, "trainer.n_gpus_per_node"), 0)
    if gpus >= 1:
        return World(max(_int(_get(data, "trainer.nnodes"), 1), 1), gpus)
    return context.need_world("these verl overrides")


def _fsdp(actor: dict[str, Any], world: World) -> dict[str, Any]:
    fsdp = _section(actor, "fsdp_config")
    sequence = max(_int(actor.get("ulysses_sequence_parallel_size"), 1), 1)
    size = _int(fsdp.get("fsdp_size"), -1)
    if size == 1:
        ddp: dict[str, Any] = {"strategy": "ddp", "stage": 0}
        return {**ddp, "parallel": {"sequence": sequence}} if sequence > 1 else ddp
    stage = 3 if fsdp.get("reshard_after_forward", True) is True else 2
    out: dict[str, Any] = {"strategy": "fsdp", "stage": stage}
    if fsdp.get("offload_policy") is True:
        out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    parallel: dict[str, Any] = {}
    if sequence > 1:
        parallel["sequence"] = sequence
    if 0 < size < world.size:
        # fsdp_size counts ranks of a shard group including the Ulysses split (see the emitter).
        parallel["shard_group"] = size // sequence
    if parallel:
        out["parallel"] = parallel
    return out


def _megatron(actor: dict[str, Any]) -> dict[str, Any]:
    mega = _section(actor, "megatron")
    parallel = {ours: mega.get(f"{theirs}_parallel_size", 1) for ours, theirs in
                (("tensor", "tensor_model"), ("pipeline", "pipeline_model"), ("sequence", "context"))}
    stage = 1 if mega.get("use_distributed_optimizer", True) else 0
    out: dict[str, Any] = {"strategy": "megatron", "stage": stage,
                           "parallel": {k: v for k, v in parallel.items() if v != 1}}
    offload = {}
    if mega.get("param_offload") is True:
        offload["params"] = "cpu"
    if _get(actor, "optim.override_optimizer_config.optimizer_cpu_offload") is True:
        offload["optimizer"] = "cpu"
    if offload:
        out["offload"] = offload
    return out


def _precision(actor: dict[str, Any], megatron: bool) -> str:
    if megatron:
        return MEGATRON_PRECISIONS.get(str(_get(actor, "megatron.dtype", "bfloat16")).lower(), "bf16")
    dtype = _get(actor, "fsdp_config.mixed_precision.param_dtype", "bf16")
    return FSDP_PRECISIONS.get(str(dtype).lower(), "bf16")


def _optimizer(optim: dict[str, Any], megatron: bool) -> dict[str, Any]:
    names = MEGATRON_OPTIMIZERS if megatron else FSDP_OPTIMIZERS
    out: dict[str, Any] = {"name": names.get(str(optim.get("optimizer", "AdamW")).lower(), "adamw")}
    for key in ("lr", "weight_decay"):
        if key in optim:
            out[key] = optim[key]
    override = _section(optim, "override_optimizer_config")
    if "betas" in optim:
        out["betas"] = optim["betas"]
    elif "adam_beta1" in override:
        out["betas"] = [override["adam_beta1"], override["adam_beta2"]]
    if "eps" in override or "adam_eps" in override:
        out["eps"] = override.get("eps", override.get("adam_eps"))
    return out
