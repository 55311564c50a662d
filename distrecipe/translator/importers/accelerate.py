"""accelerate_config.yaml → recipe: the inverse of `translator/accelerate.py`.

The YAML says the world (`num_machines`, `num_processes`), the backend
(`distributed_type`), FSDP2's stage (`fsdp_reshard_after_forward`), offload,
precision and the parallelism mesh; on the DeepSpeed path the ds_config it names
says the rest. It holds no batch numbers (they belong to the script's DataLoader and
`ACCELERATE_GRADIENT_ACCUMULATION_STEPS`): those come from the ds_config, from the
batch comment distrecipe writes at the top of the files it emits, or from `--set`.
"""

from __future__ import annotations

import re
from typing import Any

from distrecipe.engines import FSDP2_RESHARDS_BY_DEFAULT, stage_of_reshard
from distrecipe.engines.accelerate import (
    DATA_PARALLEL_TYPES,
    FSDP1_SHARDING,
    FSDP1_STAGE,
    FSDP_VERSION_DEFAULT,
    MIXED_PRECISION,
    STATE_DICT_TYPE,
    fsdp1_strategy,
)
from distrecipe.engines.deepspeed import CONFIG_FILE as DS_CONFIG_FILE
from distrecipe.keys import section
from distrecipe.translator.importers import (
    Context,
    Imported,
    NotImportable,
    World,
    cluster,
    inverse,
    stage_strategy,
)
from distrecipe.translator.importers import deepspeed as ds_importer

PRECISIONS = inverse(MIXED_PRECISION)
WEIGHTS = inverse(STATE_DICT_TYPE)
BATCH_COMMENT = re.compile(r"#.*\bmicro (\d+) per GPU\b.*\baccumulation (\d+)\b")
"""The header line `accelerate.text` writes: `# Batch ...: micro 2 per GPU ... x accumulation 4 ...`."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    world = _world(data, context)
    kind = data.get("distributed_type", "NO")
    if kind not in ("DEEPSPEED", "FSDP", *DATA_PARALLEL_TYPES):
        # The Accelerate emitter writes DEEPSPEED, FSDP and data-parallel configs only; a
        # recipe's strategy megatron is DR208 there (it compiles for verl), so nothing would
        # give this file back.
        settings = ", ".join(sorted(section(data, "megatron_lm_config"))) if kind == "MEGATRON_LM" else ""
        raise NotImportable(f"distributed_type {kind}: compile --target accelerate writes only DEEPSPEED, "
                            f"FSDP and data-parallel configs, so Accelerate's {kind} engine has no recipe "
                            "form (a recipe's strategy megatron compiles for verl)"
                            + (f"; its megatron_lm_config ({settings}) is not imported" if settings else ""),
                            context.doc.where(("distributed_type",)))
    launch: dict[str, Any] = {"backend": "accelerate-deepspeed" if kind == "DEEPSPEED" else "accelerate"}
    if data.get("main_process_ip"):
        launch["master_addr"] = data["main_process_ip"]
    if isinstance(data.get("main_process_port"), int):
        launch["master_port"] = data["main_process_port"]
    if kind == "DEEPSPEED":
        imported = _deepspeed(data, context, world)
        imported.recipe["launch"] = launch
        return imported
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world)}
    notes: list[str] = []
    if kind == "FSDP":
        recipe.update(_fsdp(data, world, recipe, context))
    else:
        recipe.update(strategy="ddp", stage=0)
    recipe["batch"] = _batch(context)
    recipe["precision"] = _precision(data, notes)
    recipe["launch"] = launch
    return Imported(recipe, notes)


def _world(data: dict[str, Any], context: Context) -> World:
    """`num_machines` × `num_processes` / `num_machines`; a file without `num_processes` is
    told its ranks by `--world`, and still runs on the `num_machines` it states: a
    `--nodes` left at its default of 1 does not replace them, a contradicting one is refused."""
    processes, machines = data.get("num_processes"), data.get("num_machines", 1)
    if isinstance(processes, int) and processes >= 1 and isinstance(machines, int) and machines >= 1:
        if processes % machines:
            raise NotImportable(f"num_processes {processes} does not split over num_machines {machines}",
                                context.doc.where(("num_processes",)))
        return World(machines, processes // machines)
    world = context.need_world("this accelerate config")
    stated = data.get("num_machines")
    if not isinstance(stated, int) or isinstance(stated, bool) or stated < 1 or stated == world.nodes:
        return world
    if world.nodes != 1:
        raise NotImportable(f"num_machines {stated} contradicts --nodes {world.nodes}",
                            context.doc.where(("num_machines",)))
    if world.size % stated:
        raise NotImportable(f"--world {world.size} does not split over num_machines {stated}",
                            context.doc.where(("num_machines",)))
    return World(stated, world.size // stated)


def _fsdp(data: dict[str, Any], world: World, recipe: dict[str, Any], context: Context) -> dict[str, Any]:
    fsdp = section(data, "fsdp_config")
    hybrid = False
    # Accelerate's plugin reads `int(FSDP_VERSION)`, 1 when the file says none: stated as written.
    version = 2 if str(fsdp.get("fsdp_version", FSDP_VERSION_DEFAULT)) == "2" else 1
    if version == 2:
        stage = stage_of_reshard(fsdp.get("fsdp_reshard_after_forward", FSDP2_RESHARDS_BY_DEFAULT))
    else:
        # FSDP1: `accelerate launch` always exports FSDP_SHARDING_STRATEGY (default FULL_SHARD),
        # and the plugin prefers it to fsdp_reshard_after_forward.
        written = fsdp.get("fsdp_sharding_strategy", FSDP1_SHARDING[0])
        name = fsdp1_strategy(written)
        if name is None:
            raise NotImportable(f"fsdp_sharding_strategy {written!r} is none of Accelerate's "
                                f"{', '.join(FSDP1_SHARDING)} (or 1..5)",
                                context.doc.where(("fsdp_config", "fsdp_sharding_strategy")))
        stage, hybrid = FSDP1_STAGE[name]
        if stage == 0:
            return {"strategy": "ddp", "stage": 0}
    out: dict[str, Any] = {"strategy": "fsdp", "stage": stage, "fsdp_version": version}
    if hybrid:  # HYBRID_SHARD shards within a node and replicates across nodes
        out["parallel"] = {"shard_group": world.gpus_per_node}
    if fsdp.get("fsdp_offload_params") is True:
        # One CPU offload moves parameters, gradients and the optimizer step; a recipe
        # offloads parameters only at stage 3 (DR202/DR203 report the other direction).
        out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    if fsdp.get("fsdp_activation_checkpointing") is True:
        out["activation_checkpointing"] = True
    weights = WEIGHTS.get(str(fsdp.get("fsdp_state_dict_type", "")).lower())
    if weights is not None:
        out["checkpoint"] = {"weights": weights}
    if isinstance(fsdp.get("fsdp_transformer_layer_cls_to_wrap"), str):
        recipe["model"]["layer_cls"] = fsdp["fsdp_transformer_layer_cls_to_wrap"]
    mesh = section(data, "parallelism_config")
    parallel: dict[str, Any] = {}
    for ours, theirs in (("tensor", "tp"), ("sequence", "cp")):
        size = mesh.get(f"parallelism_config_{theirs}_size", 1)
        if isinstance(size, int) and size > 1:
            parallel[ours] = size
    replicate = mesh.get("parallelism_config_dp_replicate_size", 1)
    if isinstance(replicate, int) and replicate > 1:
        parallel["shard_group"] = mesh.get("parallelism_config_dp_shard_size", world.size // replicate)
    if parallel:
        out["parallel"] = {**out.get("parallel", {}), **parallel}
    return out


def _batch(context: Context) -> dict[str, Any]:
    for line in context.doc.lines:
        match = BATCH_COMMENT.match(line.strip())
        if match:
            return {"micro": int(match.group(1)), "accumulation": int(match.group(2))}
        if line.strip() and not line.startswith("#"):
            break
    return {"micro": "auto", "accumulation": "auto", "global": "auto"}  # the script decides


def _deepspeed(data: dict[str, Any], context: Context, world: World) -> Imported:
    inline = section(data, "deepspeed_config")
    ref = inline.get("deepspeed_config_file")
    if not isinstance(ref, str):
        return _inline(data, inline, context, world)
    ds = context.companion(ref, "accelerate", world, ("deepspeed_config", "deepspeed_config_file"))
    data = ds.doc.data if isinstance(ds.doc.data, dict) else {}
    imported = ds_importer.to_recipe(data, ds)
    imported.companions["deepspeed"] = data
    if ref != DS_CONFIG_FILE:
        # The recipe holds the file's settings, not its name: compile writes its own file.
        imported.notes.append(f"deepspeed_config.deepspeed_config_file {ref} is read into the recipe (its "
                              "settings become the recipe's fields and native.deepspeed): compile writes "
                              f"them as {DS_CONFIG_FILE} beside accelerate_config.yaml and names that file "
                              "instead")
    return imported


def _inline(data: dict[str, Any], inline: dict[str, Any], context: Context, world: World) -> Imported:
    """DEEPSPEED with the settings in the YAML (TRL's and open-r1's form): Accelerate's
    `DeepSpeedPlugin` builds the ds_config from them (zero_stage default 2, no offload)
    and fills the batch from the DataLoader; compile writes the same keys back inline."""
    stage = inline.get("zero_stage", 2)
    if not isinstance(stage, int) or isinstance(stage, bool) or not 0 <= stage <= 3:
        raise NotImportable(f"deepspeed_config.zero_stage {stage!r} is not 0..3",
                            context.doc.where(("deepspeed_config", "zero_stage")))
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world),
                              "strategy": stage_strategy(stage), "stage": stage}
    offload = {ours: inline[f"offload_{theirs}_device"] for ours, theirs in (("optimizer", "optimizer"),
               ("params", "param")) if inline.get(f"offload_{theirs}_device", "none") != "none"}
    if stage < 3:
        offload.pop("params", None)  # DeepSpeed reads offload_param only at stage 3
    if offload:
        recipe["offload"] = offload
    recipe["batch"] = _batch(context)
    accumulation = inline.get("gradient_accumulation_steps")
    if isinstance(accumulation, int) and not isinstance(accumulation, bool):
        recipe["batch"]["accumulation"] = accumulation
    notes: list[str] = []
    recipe["precision"] = _precision(data, notes)
    clip = inline.get("gradient_clipping")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        recipe["grad_clip"] = clip
    return Imported(recipe, notes)


def _precision(data: dict[str, Any], notes: list[str]) -> str:
    """`mixed_precision`; fp8 runs its matmuls in fp8 and the rest in bf16, which the plan counts.

    A file without it (nor the old `fp16: true`, which Accelerate's loader reads as
    `fp16`) leaves the precision to the program: `accelerate launch` exports its default,
    `no`, which a plain `Accelerator()` runs as fp32 and the HF Trainer replaces with its
    own `--bf16` / `--fp16`. That is the recipe's `precision: auto`, which compiles back to
    no `mixed_precision` (DR235); fp32 would be a value the file never stated, and would
    hand a Trainer script `--bf16 false`. A note says so."""
    if data.get("mixed_precision") is None:
        if data.get("fp16") is True:
            notes.append("fp16: true (no mixed_precision): Accelerate's loader reads it as mixed_precision "
                         "fp16, and so does the recipe (precision fp16)")
            return "fp16"
        notes.append("mixed_precision is not stated: accelerate launch then exports its default, no, which "
                     "a plain Accelerator() script runs in fp32 and an HF Trainer script overrides with its "
                     "--bf16 / --fp16; the recipe says precision auto (the program decides), which compiles "
                     "back to no mixed_precision: --set precision=fp32 (or bf16) to decide it here")
        return "auto"
    written = str(data["mixed_precision"]).lower()
    if written == "fp8":
        notes.append("mixed_precision fp8: the recipe says bf16 (what fp8 training keeps outside its "
                     "matmuls); mixed_precision and fp8_config are carried in native.accelerate")
        return "bf16"
    return PRECISIONS.get(written, "fp32")
