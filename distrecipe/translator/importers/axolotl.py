"""Axolotl training YAML (+ world size) → recipe: the TrainingArguments Axolotl builds from it.

Axolotl turns `micro_batch_size`, `gradient_accumulation_steps`, `bf16`, the optimizer
settings and `deepspeed:` (opened from the directory it runs in) into the HF Trainer's
arguments (`engines.axolotl.trainer_arguments`), and `fsdp_version: 2` with
`fsdp_config` into the Trainer's FSDP2; the recipe is the HF importer's of those.
`bf16: auto` is bf16 on a GPU that has it: the recipe says bf16, and a note says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from distrecipe.engines.axolotl import PARALLEL, UNKNOWN, trainer_arguments
from distrecipe.translator.importers import Context, Imported, hf

FSDP_KEYS = {"offload_params": "cpu_offload", "reshard_after_forward": "reshard_after_forward",
             "transformer_layer_cls_to_wrap": "transformer_layer_cls_to_wrap",
             "activation_checkpointing": "activation_checkpointing"}
"""Axolotl's `fsdp_config` keys (with or without their `fsdp_` prefix) → the Trainer's."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    notes: list[str] = []
    args: dict[str, Any] = {}
    for name, (value, _) in trainer_arguments(data).items():
        if value is UNKNOWN:
            if name == "bf16":
                notes.append("bf16: auto is bf16 on a GPU that has it (Axolotl's resolve_dtype): "
                             "the recipe says bf16")
                args[name] = True
            continue
        args[name] = value
    if isinstance(data.get("optimizer"), str):
        args["optim"] = data["optimizer"]
    if isinstance(data.get("deepspeed"), str):
        args["deepspeed"] = data["deepspeed"]
    if data.get("gradient_checkpointing") is True:
        args["gradient_checkpointing"] = True
    fsdp = data.get("fsdp_config")
    if data.get("fsdp_version") == 2 and isinstance(fsdp, dict):
        config: dict[str, Any] = {"version": 2}
        for key, value in fsdp.items():
            trainer_key = FSDP_KEYS.get(str(key).removeprefix("fsdp_"))
            if trainer_key is not None:
                listed = trainer_key == "transformer_layer_cls_to_wrap" and isinstance(value, str)
                config[trainer_key] = [value] if listed else value
        args.update(fsdp="full_shard", fsdp_config=config)
    degrees = {key: data[key] for key in PARALLEL if isinstance(data.get(key), int) and data[key] > 1}
    if degrees:
        notes.append("parallel degrees " + ", ".join(f"{k} {v}" for k, v in degrees.items())
                     + " go to Accelerate's ParallelismConfig, which a recipe does not carry: keep the YAML")
    imported = hf.to_recipe(args, replace(context, launched=True))
    imported.notes[:0] = notes
    imported.read = args
    return imported
