"""TrainingArguments JSON (+ world size) → recipe: the inverse of `translator/hf.py`.

The Trainer's kwargs hold the batch (per device × accumulation; the world comes from
`--world` or the launcher), precision, optimizer and clipping. `deepspeed` names a
ds_config that says the ZeRO side; `fsdp` with an `fsdp_config` of version 2 says
FSDP2's; neither means DDP.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines import FSDP2_RESHARDS_BY_DEFAULT, stage_of_reshard
from distrecipe.engines.accelerate import FSDP1_STAGE, STATE_DICT_TYPE, fsdp1_strategy, version_number
from distrecipe.engines.argv import launches
from distrecipe.engines.hf import FLAG_TYPES, OPTIM, defaults
from distrecipe.engines.shell import is_script
from distrecipe.engines.tables import training_defaults
from distrecipe.keys import section
from distrecipe.translator.importers import Context, Imported, World, cluster, inverse
from distrecipe.translator.importers import deepspeed as ds_importer

OPTIMIZERS = inverse(OPTIM)
WEIGHTS = inverse(STATE_DICT_TYPE)


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    notes: list[str] = []
    world = context.world or _script_world(context, notes) or context.need_world("TrainingArguments")
    companions: dict[str, dict[str, Any]] = {}
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world)}
    args = {**defaults(), **data}
    optimizer = _optimizer(data)
    if isinstance(data.get("deepspeed"), str):
        ds = context.companion(data["deepspeed"], "hf", world, ("deepspeed",))
        companions["deepspeed"] = ds.doc.data if isinstance(ds.doc.data, dict) else {}
        zero = ds_importer.to_recipe(companions["deepspeed"], ds)
        notes += zero.notes
        zero_side = ("model", "strategy", "stage", "offload", "parallel", "schedule", "checkpoint")
        recipe.update({k: v for k, v in zero.recipe.items() if k in zero_side})
        # DeepSpeed's own optimizer runs; the Trainer fills its "auto" values from these kwargs.
        if "optimizer" in zero.recipe:
            optimizer = {**optimizer, **zero.recipe["optimizer"]}
    elif data.get("fsdp"):
        config = section(data, "fsdp_config")
        if isinstance(data.get("fsdp_config"), str):  # a JSON file the Trainer opens
            named = context.companion(data["fsdp_config"], "hf", world, ("fsdp_config",))
            config = named.doc.data if isinstance(named.doc.data, dict) else {}
            notes.append(f"fsdp_config names {data['fsdp_config']}: its settings are read as the Trainer "
                         "reads them, and the name is carried (compile writes it back)")
        recipe.update(_fsdp(config, recipe, data["fsdp"], notes, world))
    else:
        recipe.update(strategy="ddp", stage=0)
    micro = args["per_device_train_batch_size"]
    # A micro left to the command line leaves the accumulation beside it there too.
    accumulation = "auto" if micro == "auto" and "gradient_accumulation_steps" not in data \
        else args["gradient_accumulation_steps"]
    recipe["batch"] = {"micro": micro, "accumulation": accumulation, "global": "auto"}
    recipe["precision"] = "bf16" if args["bf16"] else "fp16" if args["fp16"] else "fp32"
    if optimizer:
        recipe["optimizer"] = optimizer
    if "max_grad_norm" in data:
        recipe["grad_clip"] = data["max_grad_norm"]
    schedule = _schedule(data)
    if "schedule" in recipe:  # the ds_config's scheduler runs; the Trainer fills its "auto" steps
        recipe["schedule"] = {**{k: v for k, v in schedule.items() if k != "decay"}, **recipe["schedule"]}
    elif schedule:
        recipe["schedule"] = schedule
    checkpoint = {**recipe.get("checkpoint", {}), **_saving(data)}
    if checkpoint:
        recipe["checkpoint"] = checkpoint
    checkpointing = data.get("gradient_checkpointing") or section(data, "fsdp_config").get(
        "activation_checkpointing")
    recipe["activation_checkpointing"] = checkpointing is True
    recipe.update(_kernels(data, recipe["model"]))
    return Imported(recipe, notes, companions)


ATTENTION = {"eager": "eager", "sdpa": "sdpa", "flash_attention_2": "flash", "flash_attention_3": "flash",
             "flex_attention": "unknown"}
"""transformers' `attn_implementation` names → `model.attention` (TRL's `ModelConfig` carries it
beside TrainingArguments); a name not listed (a hub kernel) is `unknown`."""


def _kernels(data: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """The Trainer's kernel switches as the recipe's `kernels:` (and `model.attention`):
    `torch_compile`, `use_liger_kernel` (Liger's fused ops and its fused linear
    cross-entropy), where the file states them as booleans."""
    kernels: dict[str, Any] = {}
    if isinstance(data.get("torch_compile"), bool):
        kernels["compile"] = data["torch_compile"]
    if isinstance(data.get("use_liger_kernel"), bool):
        kernels["fused_ops"] = "liger" if data["use_liger_kernel"] else "none"
    attention = data.get("attn_implementation")
    if isinstance(attention, str):
        model["attention"] = ATTENTION.get(attention, "unknown")
    return {"kernels": kernels} if kernels else {}


SCHEDULES = {"constant": "constant", "constant_with_warmup": "constant", "linear": "linear",
             "cosine": "cosine", "cosine_with_min_lr": "cosine"}
"""The Trainer's `lr_scheduler_type`s the recipe's schedule says (warmup, then constant,
linear or cosine decay); the others stay native."""


def _optimizer(data: dict[str, Any]) -> dict[str, Any]:
    """The optimizer values the file states (the Trainer's own defaults stand for the rest,
    as they would for another engine's: the import names none of them)."""
    out: dict[str, Any] = {}
    for ours, theirs in (("lr", "learning_rate"), ("eps", "adam_epsilon"), ("weight_decay", "weight_decay")):
        if theirs in data:
            out[ours] = data[theirs]
    if "adam_beta1" in data or "adam_beta2" in data:
        trainer = {**defaults(), **data}
        out["betas"] = [trainer["adam_beta1"], trainer["adam_beta2"]]
    if out or "optim" in data:
        out = {"name": OPTIMIZERS.get(str(data.get("optim", "adamw_torch")), "adamw"), **out}
    return out


SCHEDULE_KEYS = ("lr_scheduler_type", "warmup_steps", "warmup_ratio", "max_steps", "lr_scheduler_kwargs")


def _schedule(data: dict[str, Any]) -> dict[str, Any]:
    """The schedule the file states; a warmup or length without a type runs the Trainer's
    default type (linear), which the schedule then says."""
    if not any(key in data for key in SCHEDULE_KEYS):
        return {}
    args = {**training_defaults(), **data}
    kind = args.get("lr_scheduler_type")
    if not isinstance(kind, str) or kind not in SCHEDULES:
        return {}
    out: dict[str, Any] = {"decay": SCHEDULES[kind]}
    warmup, ratio = args.get("warmup_steps"), args.get("warmup_ratio")
    if isinstance(ratio, int | float) and not isinstance(ratio, bool) and 0 < ratio < 1:
        out["warmup_ratio"] = ratio
    elif isinstance(warmup, float) and 0 < warmup < 1:  # transformers 5: a fraction of the run
        out["warmup_ratio"] = warmup
    elif isinstance(warmup, int | float) and not isinstance(warmup, bool) and warmup >= 1:
        out["warmup_steps"] = int(warmup)
    steps = args.get("max_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        out["total_steps"] = steps
    floor = section(args, "lr_scheduler_kwargs").get("min_lr_rate")
    if kind == "cosine_with_min_lr" and isinstance(floor, int | float) and 0 <= floor <= 1:
        out["min_lr_ratio"] = floor
    return out


def _saving(data: dict[str, Any]) -> dict[str, Any]:
    """`checkpoint.every` where the file has the Trainer save by steps; `dir`, `keep` and a
    `resume` path from `output_dir`, `save_total_limit` and `resume_from_checkpoint`."""
    out: dict[str, Any] = {}
    for key, field in (("output_dir", "dir"), ("resume_from_checkpoint", "resume")):
        if isinstance(data.get(key), str) and data[key]:
            out[field] = data[key]
    limit = data.get("save_total_limit")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
        out["keep"] = limit
    if "save_steps" not in data and "save_strategy" not in data:
        return out
    args = {**training_defaults(), **data}
    steps = args.get("save_steps")
    if args.get("save_strategy") == "steps" and isinstance(steps, int) and not isinstance(steps, bool) \
            and steps >= 1:
        out["every"] = steps
    return out


def _script_world(context: Context, notes: list[str]) -> World | None:
    """The world a launch script's command starts (`--nproc_per_node 8 --nnodes 2`), when it says."""
    if not is_script(context.doc.file):
        return None
    text = "\n".join(context.doc.lines)
    for launch in launches(text, context.doc.file):
        if any(name in FLAG_TYPES for name in launch.flags):  # the launch the arguments were read from
            ranks, how = launch.world()
            written = launch.option("nnodes", "num_nodes", "num_machines")
            count = written.value if written is not None else None
            nodes = int(count) if count is not None and count.isdigit() and int(count) > 0 else 1
            if ranks is None or ranks % nodes:
                return None
            notes.append(f"the world is the launch command's: {how} (--world to change it)")
            return World(nodes, ranks // nodes)
    return None


FSDP1_STAGES = {"full_shard": 3, "hybrid_shard": 3, "shard_grad_op": 2, "hybrid_shard_zero2": 2,
                "no_shard": 0}
"""The Trainer's FSDP1 `--fsdp` sharding options → the ZeRO stage each is."""


def _fsdp(config: dict[str, Any], recipe: dict[str, Any], fsdp: Any, notes: list[str],
          world: World) -> dict[str, Any]:
    """FSDP2's settings (`fsdp_config` version 2), or the FSDP1 options `--fsdp` names
    (`"full_shard auto_wrap"`), or under version 1 the sharding strategy its
    `reshard_after_forward` names (what compile writes), as a strategy and stage."""
    options = fsdp.split() if isinstance(fsdp, str) else []
    # The Trainer reads `int(fsdp_config["version"])` (`fsdp_` prefixes stripped), 2 when unset.
    version = version_number(config.get("version", config.get("fsdp_version")))
    strategy = fsdp1_strategy(config.get("reshard_after_forward", "full_shard")) if version == 1 else None
    if version == 1 and not options and strategy is not None:
        stage, hybrid = FSDP1_STAGE[strategy]
        out: dict[str, Any] = {"strategy": "fsdp" if stage else "ddp", "stage": stage}
        if hybrid:  # HYBRID_SHARD shards within a node and replicates across nodes
            out["parallel"] = {"shard_group": world.gpus_per_node}
        if config.get("cpu_offload") is True and stage:
            out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    elif str(config.get("version", config.get("fsdp_version", 1))) != "2" and options:
        sharding = next((option for option in options if option in FSDP1_STAGES), "full_shard")
        stage = FSDP1_STAGES[sharding]
        notes.append(f"fsdp {fsdp!r} is the Trainer's FSDP1 ({sharding}): read as stage {stage}; its "
                     "options are carried as written (compile writes them back)")
        out = {"strategy": "fsdp" if stage else "ddp", "stage": stage}
        if "offload" in options and stage:
            out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    else:
        stage = stage_of_reshard(config.get("reshard_after_forward", FSDP2_RESHARDS_BY_DEFAULT))
        out = {"strategy": "fsdp", "stage": stage}
        if config.get("cpu_offload") is True:
            out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    if version is not None and out["strategy"] == "fsdp":
        out["fsdp_version"] = version
    weights = WEIGHTS.get(str(config.get("state_dict_type", "")).lower())
    if weights is not None:
        out["checkpoint"] = {"weights": weights}
    layers = config.get("transformer_layer_cls_to_wrap")
    if isinstance(layers, list) and len(layers) == 1:
        recipe["model"]["layer_cls"] = layers[0]
    return out
