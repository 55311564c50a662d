"""verl actor overrides (`key=value` lines, a launch script, or the same as YAML) → recipe.

The inverse of `translator/verl.py`: `ppo_mini_batch_size` prompts × `rollout.n` is
the global batch in sequences, `data.train_batch_size` the prompts per RL step; the
FSDP2 actor's `reshard_after_forward` is the stage and `fsdp_size` the shard group,
the Megatron actor's distributed optimizer is stage 1. `use_dynamic_bsz` is the
recipe's `batch.micro_tokens`; verl's between-phase offloads are not the recipe's offload.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines import FSDP2_RESHARDS_BY_DEFAULT, stage_of_reshard
from distrecipe.engines import verl as engine
from distrecipe.engines.hydra import script_overrides
from distrecipe.engines.shell import is_script
from distrecipe.engines.tables import label
from distrecipe.engines.verl import VERL_FSDP_VERSION, uses_megatron
from distrecipe.keys import dotted, get, integer, section
from distrecipe.source import KeyPath
from distrecipe.translator.importers import Context, Imported, NotImportable, World, cluster, inverse

FSDP_OPTIMIZERS = inverse(engine.FSDP_OPTIMIZER)
MEGATRON_OPTIMIZERS = inverse(engine.MEGATRON_OPTIMIZER)
FSDP_PRECISIONS = inverse(engine.FSDP_DTYPE)
MEGATRON_PRECISIONS = inverse(engine.MEGATRON_DTYPE)
VERL_ACTOR_STRATEGY = "fsdp"
"""`actor_rollout_ref.actor.strategy` where the overrides say none (verl's `dp_actor.yaml`)."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    notes: list[str] = []
    if is_script(context.doc.file):
        data = _expanded(context, notes)
    actor = section(data, "actor_rollout_ref", "actor")
    world = _world(data, context)
    megatron = uses_megatron(data, context.doc.lines)
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world)}
    recipe.update(_megatron(actor) if megatron else _fsdp(actor, world))
    n = integer(get(data, "actor_rollout_ref", "rollout", "n"))
    n = 1 if n is None else n
    parallel = recipe.get("parallel", {})
    # A size that is not an integer (`'4'` quoted is Hydra's string) stays in the recipe,
    # where resolve refuses it at its key; here it only must not break the arithmetic.
    model_parallel = 1
    for size in (parallel.get(key) for key in ("tensor", "pipeline", "sequence")):
        model_parallel *= max(integer(size) or 1, 1)
    dp = world.size // model_parallel
    recipe["batch"] = _batch(actor, n, dp, context)
    recipe["precision"] = _precision(actor, megatron)
    optimizer = _optimizer(section(actor, "optim"), megatron)
    if optimizer:
        recipe["optimizer"] = optimizer
    clip = get(actor, "optim", "clip_grad")
    if isinstance(clip, int | float) and not isinstance(clip, bool):
        recipe["grad_clip"] = 0 if clip == float("inf") else clip
    schedule = _schedule(section(actor, "optim"), data, megatron)
    if schedule:
        recipe["schedule"] = schedule
    checkpoint = _saving(data)
    if checkpoint:
        recipe["checkpoint"] = checkpoint
    checkpointing = get(data, "actor_rollout_ref", "model", "enable_gradient_checkpointing")
    recipe["activation_checkpointing"] = checkpointing is True
    prompts = integer(get(data, "data", "train_batch_size"))
    if prompts is None:  # verl's step is prompts × rollout.n sequences: no step without it
        raise NotImportable("verl's step needs an integer data.train_batch_size (prompts per step): "
                            "write the number",
                            context.doc.where(("data", "train_batch_size")))
    recipe["rl"] = {"rollout_n": n, "prompts_per_step": prompts, **_rollout_memory(data)}
    recipe["launch"] = {"backend": "verl"}
    return Imported(recipe, notes + _phase_offload(actor, megatron), read=data)


_FSDP: KeyPath = (*engine.ACTOR, "fsdp_config")
_MEGATRON: KeyPath = (*engine.ACTOR, "megatron")
_OPTIM: KeyPath = (*engine.ACTOR, "optim")
READ: tuple[KeyPath, ...] = (
    engine.PROMPTS, engine.ROLLOUT_N, engine.MINI, engine.MICRO, engine.LEGACY_MICRO, engine.DYNAMIC,
    engine.MAX_TOKENS, engine.ULYSSES, engine.FSDP_SIZE, (*engine.ACTOR, "strategy"), ("model_engine",),
    (*_FSDP, "reshard_after_forward"), (*_FSDP, "offload_policy"), (*_FSDP, "mixed_precision", "param_dtype"),
    (*_MEGATRON, "tensor_model_parallel_size"), (*_MEGATRON, "pipeline_model_parallel_size"),
    (*_MEGATRON, "context_parallel_size"), (*_MEGATRON, "virtual_pipeline_model_parallel_size"),
    (*_MEGATRON, "use_distributed_optimizer"), (*_MEGATRON, "dtype"),
    (*_OPTIM, "optimizer"), (*_OPTIM, "lr"), (*_OPTIM, "weight_decay"), (*_OPTIM, "betas"),
    (*_OPTIM, "clip_grad"), (*_OPTIM, "override_optimizer_config"),
    ("actor_rollout_ref", "model", "enable_gradient_checkpointing"),
    ("trainer", "save_freq"), ("trainer", "default_local_dir"), ("trainer", "max_actor_ckpt_to_keep"),
    ("trainer", "resume_mode"), ("trainer", "resume_from_path"),
)
"""Keys (and sections) whose values this importer maps into the recipe: one the script
leaves to a shell variable it does not fix is refused there, never read as a default."""
WORLD_KEYS: tuple[KeyPath, ...] = (("trainer", "n_gpus_per_node"), ("trainer", "nnodes"))
PATH_KEYS: tuple[KeyPath, ...] = (("trainer", "default_local_dir"), ("trainer", "resume_from_path"))
"""Checkpoint folders: a script commonly builds them from its arguments (`$save_path`). One the
script does not fix is carried as written and named, and `checkpoint.dir`/`resume` stay unset."""


def _expanded(context: Context, notes: list[str]) -> dict[str, Any]:
    """The script's overrides as the shell passes them (`hydra.script_overrides`). A value
    the recipe takes from a variable is noted with where it comes from; one the script
    does not fix is refused where the recipe needs it, left to --world for the world,
    and otherwise carried: reading the environment where the script does, else as written."""
    expanded = script_overrides(context.doc)
    others: list[str] = []
    for path, (raw, value) in expanded.taken.items():
        if any(path[:len(key)] == key for key in (*READ, *WORLD_KEYS)):
            notes.append(f"{dotted(path)}={raw} is {value.text}, as the script sets it: taken from "
                         + "; ".join(value.how))
        else:
            others.append(dotted(path))
    if others:
        notes.append("carried with the values the script's own variables give them: " + ", ".join(others))
    unknown: list[str] = []
    environment: list[str] = []
    for path, (raw, value) in expanded.unknown.items():
        why = "; ".join(value.how)
        if path in PATH_KEYS:  # a folder from the job's environment: carried as written, not a refusal
            unknown.append(f"{dotted(path)}={raw} ({why})")
        elif any(path[:len(key)] == key for key in READ):
            raise NotImportable(f"{dotted(path)}={raw} has no value the script fixes ({why}); the import "
                                "reads a script without running it: write the value", context.doc.where(path))
        if path in WORLD_KEYS:
            notes.append(f"{dotted(path)}={raw} has no value the script fixes ({why}): "
                         "the world is --world's")
        elif path in expanded.environment:
            environment.append(f"{dotted(path)}={raw}")
        else:
            unknown.append(f"{dotted(path)}={raw} ({why})")
    if environment:
        notes.append("carried reading the environment where verl runs (`${oc.env:NAME}`), as the script "
                     "does: " + ", ".join(environment))
    if unknown:
        notes.append("carried as written, as text, with shell variables the script does not fix: "
                     + ", ".join(unknown))
    return expanded.data


def _rollout_memory(data: dict[str, Any]) -> dict[str, Any]:
    """`rollout.gpu_memory_utilization` and `free_cache_engine` where the input states them
    with a value verl's rollout engine accepts; any other value is not the recipe's to
    hold, so it stays in native.verl as written (and lint says what vLLM will do with it)."""
    out: dict[str, Any] = {}
    fraction = get(data, *engine.ROLLOUT_MEMORY)
    low, high = engine.ROLLOUT_MEMORY_RANGE
    if isinstance(fraction, int | float) and not isinstance(fraction, bool) and low < fraction <= high:
        out["rollout_memory"] = fraction
    free = get(data, *engine.FREE_CACHE)
    if isinstance(free, bool):
        out["free_rollout_memory"] = free
    return out


def _phase_offload(actor: dict[str, Any], megatron: bool) -> list[str]:
    """verl's `param_offload` / `optimizer_offload` / `grad_offload` move the actor's state
    to CPU between the rollout and training phases; the recipe's offload (FSDP2's
    `offload_policy`, Megatron's `optimizer_cpu_offload`) keeps it there during the step.
    The meanings differ, so they are carried natively and said so."""
    block = "megatron" if megatron else "fsdp_config"
    on = [key for key in ("param_offload", "optimizer_offload", "grad_offload")
          if get(actor, block, key) is True]
    if not on:
        return []
    return [f"actor.{block}.{', '.join(on)}: verl moves that state to CPU between rollout and training, "
            "not during the step as the recipe's offload does; carried in native.verl as written (the plan "
            "counts it on the GPU)"]


def _batch(actor: dict[str, Any], n: int, dp: int, context: Context) -> dict[str, Any]:
    """`ppo_mini_batch_size × n` sequences per step, split into micro-batches of
    `ppo_micro_batch_size_per_gpu` samples, or under `use_dynamic_bsz` packed by tokens
    (`ppo_max_token_len_per_gpu`; a per-GPU sample count it states is then unread).

    The deprecated `ppo_micro_batch_size` (over all `dp` data-parallel ranks) is refused
    as verl 0.9.1 refuses it: `validate_config` passes it, but its workers never convert
    it and assert that `ppo_micro_batch_size_per_gpu` is set (lint's DR350 says the same).
    """
    mini, micro = actor.get("ppo_mini_batch_size"), actor.get("ppo_micro_batch_size_per_gpu")
    if not isinstance(mini, int) or not _count(mini):
        raise NotImportable("verl's actor batch needs an integer ppo_mini_batch_size: write the number",
                            context.doc.where(engine.MINI))
    if actor.get("use_dynamic_bsz") is True:
        tokens = actor.get("ppo_max_token_len_per_gpu", engine.MAX_TOKENS_DEFAULT)
        if not _count(tokens):
            raise NotImportable("use_dynamic_bsz needs an integer ppo_max_token_len_per_gpu: "
                                "write the number", context.doc.where(engine.MAX_TOKENS))
        return {"micro": "auto", "accumulation": "auto", "global": mini * n, "micro_tokens": tokens}
    legacy = actor.get("ppo_micro_batch_size")
    if micro is None and legacy is not None:
        per_gpu = f"{legacy} / {dp} data-parallel ranks"
        if _count(legacy) and not legacy % dp:
            per_gpu += f" = {legacy // dp}"
        raise NotImportable(f"{dotted(engine.LEGACY_MICRO)} is deprecated, and {label('verl')}'s workers "
                            "never convert it: they fail without ppo_micro_batch_size_per_gpu, the "
                            f"micro-batch per GPU (write ppo_micro_batch_size_per_gpu = {per_gpu} instead)",
                            context.doc.where(engine.LEGACY_MICRO))
    if not _count(micro):
        raise NotImportable("verl's actor batch needs an integer ppo_micro_batch_size_per_gpu, or "
                            "use_dynamic_bsz=True", context.doc.where(engine.MICRO if micro is not None
                                                                     else engine.ACTOR))
    return {"micro": micro, "accumulation": "auto", "global": mini * n}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _world(data: dict[str, Any], context: Context) -> World:
    gpus = integer(get(data, "trainer", "n_gpus_per_node")) or 0
    if gpus >= 1:
        return World(max(integer(get(data, "trainer", "nnodes")) or 1, 1), gpus)
    return context.need_world("these verl overrides")


def _fsdp(actor: dict[str, Any], world: World) -> dict[str, Any]:
    fsdp = section(actor, "fsdp_config")
    sequence = max(integer(actor.get("ulysses_sequence_parallel_size")) or 1, 1)
    size = integer(fsdp.get("fsdp_size")) or -1  # 0 and -1 (unset) both mean every rank
    if size == 1:
        ddp: dict[str, Any] = {"strategy": "ddp", "stage": 0}
        return {**ddp, "parallel": {"sequence": sequence}} if sequence > 1 else ddp
    stage = stage_of_reshard(fsdp.get("reshard_after_forward", FSDP2_RESHARDS_BY_DEFAULT))
    out: dict[str, Any] = {"strategy": "fsdp", "stage": stage}
    # verl's dp_actor.yaml says `strategy: fsdp` (FSDP1) where the overrides say none.
    version = VERL_FSDP_VERSION.get(str(actor.get("strategy", VERL_ACTOR_STRATEGY)))
    if version is not None:
        out["fsdp_version"] = version
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
    mega = section(actor, "megatron")
    parallel = {ours: mega.get(f"{theirs}_parallel_size", 1) for ours, theirs in
                (("tensor", "tensor_model"), ("pipeline", "pipeline_model"), ("sequence", "context"))}
    # verl's default null is plain 1F1B, as is 1: the recipe's virtual_stages 1.
    virtual = mega.get("virtual_pipeline_model_parallel_size")
    if virtual is not None:
        parallel["virtual_stages"] = virtual
    stage = 1 if mega.get("use_distributed_optimizer", True) else 0
    out: dict[str, Any] = {"strategy": "megatron", "stage": stage,
                           "parallel": {k: v for k, v in parallel.items() if v != 1}}
    offload = {}
    if get(actor, "optim", "override_optimizer_config", "optimizer_cpu_offload") is True:
        offload["optimizer"] = "cpu"
    if offload:
        out["offload"] = offload
    return out


def _precision(actor: dict[str, Any], megatron: bool) -> str:
    if megatron:
        dtype = get(actor, "megatron", "dtype", default="bfloat16")
        return MEGATRON_PRECISIONS.get(str(dtype).lower(), "bf16")
    dtype = get(actor, "fsdp_config", "mixed_precision", "param_dtype", default="bf16")
    return FSDP_PRECISIONS.get(str(dtype).lower(), "bf16")


def _schedule(optim: dict[str, Any], data: dict[str, Any], megatron: bool) -> dict[str, Any]:
    """The warmup, decay and length the overrides state (verl's defaults say: constant, no
    warmup, the data's length, so nothing stated is no schedule)."""
    out: dict[str, Any] = {}
    decay = optim.get("lr_decay_style" if megatron else "lr_scheduler_type")
    if decay in ("constant", "linear", "cosine"):
        out["decay"] = decay
    steps, ratio = integer(optim.get("lr_warmup_steps")), optim.get("lr_warmup_steps_ratio")
    if steps is not None and steps > 0:
        out["warmup_steps"] = steps
    elif isinstance(ratio, int | float) and not isinstance(ratio, bool) and 0 < ratio < 1:
        out["warmup_ratio"] = ratio
    floor = optim.get("min_lr_ratio")
    if not megatron and isinstance(floor, int | float) and not isinstance(floor, bool) and 0 <= floor <= 1:
        out["min_lr_ratio"] = floor
    total = integer(get(data, "trainer", "total_training_steps"))
    if total is not None and total >= 1:
        out["total_steps"] = total
    if out and "decay" not in out:
        out["decay"] = "constant"
    return out


def _optimizer(optim: dict[str, Any], megatron: bool) -> dict[str, Any]:
    """The optimizer the overrides state; nothing stated is verl's own (its config's)."""
    stated = ("optimizer", "lr", "weight_decay", "betas", "override_optimizer_config")
    if not any(key in optim for key in stated):
        return {}
    names = MEGATRON_OPTIMIZERS if megatron else FSDP_OPTIMIZERS
    out: dict[str, Any] = {"name": names.get(str(optim.get("optimizer", "AdamW")).lower(), "adamw")}
    for key in ("lr", "weight_decay"):
        if key in optim:
            out[key] = optim[key]
    override = section(optim, "override_optimizer_config")
    if "betas" in optim:
        out["betas"] = optim["betas"]
    elif "adam_beta1" in override:
        out["betas"] = [override["adam_beta1"], override["adam_beta2"]]
    if "eps" in override or "adam_eps" in override:
        out["eps"] = override.get("eps", override.get("adam_eps"))
    return out


def _saving(data: dict[str, Any]) -> dict[str, Any]:
    """`checkpoint.*` from verl's `trainer` keys: `save_freq`, `default_local_dir` (not an
    interpolation, which verl composes from names the recipe does not hold),
    `max_actor_ckpt_to_keep`, and `resume_mode` (`resume_path` with `resume_from_path`)."""
    out: dict[str, Any] = {}
    save = integer(get(data, "trainer", "save_freq"))
    if save is not None and save >= 1:
        out["every"] = save
    where = get(data, "trainer", "default_local_dir")
    if isinstance(where, str) and where and "$" not in where:
        out["dir"] = where
    keep = integer(get(data, "trainer", "max_actor_ckpt_to_keep"))
    if keep is not None and keep >= 1:
        out["keep"] = keep
    mode, path = get(data, "trainer", "resume_mode"), get(data, "trainer", "resume_from_path")
    if mode in ("auto", "disable"):
        out["resume"] = "auto" if mode == "auto" else "none"
    elif mode == "resume_path" and isinstance(path, str) and path and "$" not in path:
        out["resume"] = path
    return out
