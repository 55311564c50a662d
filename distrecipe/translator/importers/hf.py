"""TrainingArguments JSON (+ world size) → recipe: the inverse of `translator/hf.py`.

The Trainer's kwargs hold the batch (per device × accumulation; the world comes from
`--world` or the launcher), precision, optimizer and clipping. `deepspeed` names a
ds_config that says the ZeRO side; `fsdp` with an `fsdp_config` of version 2 says
FSDP2's; neither means DDP.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines import FSDP2_RESHARDS_BY_DEFAULT, stage_of_reshard
from distrecipe.engines.hf import OPTIM, defaults
from distrecipe.keys import section
from distrecipe.translator.importers import Context, Imported, cluster, inverse
from distrecipe.translator.importers import deepspeed as ds_importer

OPTIMIZERS = inverse(OPTIM)


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    world = context.need_world("TrainingArguments")
    notes: list[str] = []
    companions: dict[str, dict[str, Any]] = {}
    recipe: dict[str, Any] = {"recipe": 1, "model": {}, "cluster": cluster(world)}
    args = {**defaults(), **data}
    optimizer = {
        "name": OPTIMIZERS.get(str(data.get("optim", "adamw_torch")), "adamw"),
        "lr": args["learning_rate"],
        "betas": [args["adam_beta1"], args["adam_beta2"]],
        "eps": args["adam_epsilon"],
        "weight_decay": args["weight_decay"],
    }
    if isinstance(data.get("deepspeed"), str):
        ds = context.companion(data["deepspeed"], "hf", world, ("deepspeed",))
        companions["deepspeed"] = ds.doc.data if isinstance(ds.doc.data, dict) else {}
        zero = ds_importer.to_recipe(companions["deepspeed"], ds)
        notes += zero.notes
        zero_side = ("model", "strategy", "stage", "offload", "parallel")
        recipe.update({k: v for k, v in zero.recipe.items() if k in zero_side})
        # DeepSpeed's own optimizer runs; the Trainer fills its "auto" values from these kwargs.
        optimizer.update(zero.recipe.get("optimizer", {}))
    elif data.get("fsdp"):
        recipe.update(_fsdp(section(data, "fsdp_config"), recipe))
    else:
        recipe.update(strategy="ddp", stage=0)
    recipe["batch"] = {"micro": args["per_device_train_batch_size"],
                       "accumulation": args["gradient_accumulation_steps"], "global": "auto"}
    recipe["precision"] = "bf16" if args["bf16"] else "fp16" if args["fp16"] else "fp32"
    recipe["optimizer"] = optimizer
    recipe["grad_clip"] = args["max_grad_norm"]
    checkpointing = data.get("gradient_checkpointing") or section(data, "fsdp_config").get(
        "activation_checkpointing")
    recipe["activation_checkpointing"] = checkpointing is True
    return Imported(recipe, notes, companions)


def _fsdp(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    stage = stage_of_reshard(config.get("reshard_after_forward", FSDP2_RESHARDS_BY_DEFAULT))
    out: dict[str, Any] = {"strategy": "fsdp", "stage": stage}
    if config.get("cpu_offload") is True:
        out["offload"] = {"optimizer": "cpu", "params": "cpu" if stage == 3 else "none"}
    layers = config.get("transformer_layer_cls_to_wrap")
    if isinstance(layers, list) and len(layers) == 1:
        recipe["model"]["layer_cls"] = layers[0]
    return out
