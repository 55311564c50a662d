"""TRL config (`trl sft|grpo --config FILE`, + world size) → recipe: the Trainer's arguments
as the HF importer reads them, and GRPO's group size as the recipe's `rl`.

A TRL config extends `TrainingArguments`, so its batch, precision, optimizer, schedule
and `deepspeed:` are the HF importer's, where the file leaves them out at the TRL config's
own defaults (bf16, gradient checkpointing, its learning rate). `num_generations` is
`rl.rollout_n`, and GRPOConfig's generation batch (`generation_batch_size`, or micro × world
× `steps_per_generation`, by default the accumulation) holds `rl.prompts_per_step` groups; `vllm_mode` is
`rl.rollout_mode`, and a colocated vLLM's `vllm_gpu_memory_utilization` is
`rl.rollout_memory` and its sleep mode `rl.free_rollout_memory`. What a recipe does not
model is carried verbatim, as `compile --target trl` writes it back: the Trainer's keys in
`native.hf`, TRL's own (the model, the dataset, `beta`, the completion length, a server's
address, `env:`) in `native.trl` (`residue`, against the GRPO keys the recipe decides).
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.tables import training_arguments, training_defaults
from distrecipe.engines.trl import command_of
from distrecipe.keys import integer
from distrecipe.translator.carry import FIELDS
from distrecipe.translator.importers import Context, Imported, NotImportable, hf


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    trainer = training_arguments()
    stated = {key: value for key, value in data.items() if key in trainer}
    own = own_defaults(data, trainer)
    imported = hf.to_recipe({**own, **stated}, context)
    imported.read = {**own, **stated}  # what the trainer runs, so another target runs it too
    if own:
        imported.notes.append("left out, the Trainer's kwargs are TRL's defaults, not TrainingArguments': "
                              + ", ".join(f"{key} {str(value).lower() if isinstance(value, bool) else value}"
                                          for key, value in own.items()))
    imported.companions["trl"] = {key: value for key, value in data.items() if key not in trainer}
    rl = _rl(data, imported.recipe, context)
    if rl:
        imported.recipe["rl"] = rl
    # `trl NAME` runs under `accelerate launch` (a recipe with `rl` would otherwise be verl's)
    zero = imported.recipe.get("strategy") == "zero"
    imported.recipe["launch"] = {"backend": "accelerate-deepspeed" if zero else "accelerate"}
    return imported


def own_defaults(data: dict[str, Any], trainer: frozenset[str]) -> dict[str, Any]:
    """The Trainer's kwargs the recipe maps (the carry table's TrainingArguments keys) that the
    command's config declares again with its own default, where the file leaves them out
    (TRL's configs train in bf16 unless fp16 is set, with gradient checkpointing on:
    `trl.trainer.base_config`): what the trainer runs, not TrainingArguments'. The others
    (`logging_steps`) stay TRL's default in the TRL config compile writes."""
    command, theirs = command_of(data), training_defaults()
    mapped = {key for row in FIELDS.values() for key in row.hf.keys}
    out: dict[str, Any] = {}
    for key in sorted((trainer & mapped) - set(data)):
        entry = command.field(key)
        if entry is not None and "default" in entry and entry["default"] != theirs.get(key):
            out[key] = entry["default"]
    if out.get("bf16", False) is None:  # `bf16 = not fp16 if bf16 is None`
        out["bf16"] = data.get("fp16") is not True
    return out


def _rl(data: dict[str, Any], recipe: dict[str, Any], context: Context) -> dict[str, Any]:
    """GRPO's group and generation batch as the recipe's `rl`, where the file states them."""
    generations = integer(data.get("num_generations"))
    if generations is None:
        return {}
    knobs = [key for key in ("generation_batch_size", "steps_per_generation") if data.get(key) is not None]
    if len(knobs) == 2:
        raise NotImportable("generation_batch_size and steps_per_generation both set: GRPOConfig refuses "
                            "them together", context.doc.where((knobs[1],)))
    batch, cluster = recipe.get("batch", {}), recipe.get("cluster", {})
    micro, accumulation = integer(batch.get("micro")), integer(batch.get("accumulation"))
    world = (integer(cluster.get("nodes")) or 1) * (integer(cluster.get("gpus_per_node")) or 1)
    if micro is None or accumulation is None:
        raise NotImportable("the recipe's prompts per step are GRPO's generation batch in groups of "
                            "num_generations, which needs numbers: per_device_train_batch_size and "
                            "gradient_accumulation_steps", context.doc.where(("num_generations",)))
    knob = knobs[0] if knobs else "num_generations"
    generation = _generation_batch(data, knob, micro * world, accumulation, context)
    if generation % generations:
        raise NotImportable(f"num_generations {generations} does not divide the generation batch "
                            f"{generation} (micro {micro} × world {world} × steps "
                            f"{generation // (micro * world)}): "
                            "GRPOConfig refuses it", context.doc.where(("num_generations",)))
    rl: dict[str, Any] = {"rollout_n": generations, "prompts_per_step": generation // generations}
    mode = data.get("vllm_mode", "colocate") if data.get("use_vllm") else None
    if mode == "colocate" and data.get("vllm_gpu_memory_utilization") is not None:
        rl["rollout_memory"] = data["vllm_gpu_memory_utilization"]
    elif mode is not None:  # colocated is what a stated rollout_memory already says
        rl["rollout_mode"] = mode
    if mode == "colocate" and data.get("vllm_enable_sleep_mode") is not None:
        rl["free_rollout_memory"] = bool(data["vllm_enable_sleep_mode"])
    return rl


def _generation_batch(data: dict[str, Any], knob: str, per_step: int, accumulation: int,
                      context: Context) -> int:
    """GRPOConfig's generation batch in sequences, as its `__post_init__` derives it: the
    stated `generation_batch_size` (a whole number of per-device batches over the world),
    or `steps_per_generation` (default: the accumulation) such batches."""
    if knob == "generation_batch_size":
        generation = integer(data[knob])
        if generation is None or generation < 1 or generation % per_step:
            raise NotImportable(f"generation_batch_size {data[knob]!r} is not a positive multiple of "
                                f"per_device_train_batch_size × world = {per_step}: GRPOConfig refuses it",
                                context.doc.where((knob,)))
        return generation
    steps = integer(data["steps_per_generation"]) if knob == "steps_per_generation" else accumulation
    if steps is None or steps < 1:
        raise NotImportable(f"steps_per_generation {data[knob]!r} is not a positive integer",
                            context.doc.where((knob,)))
    return per_step * steps
