"""TRL config (`trl sft|grpo --config FILE`, + world size) → recipe: the Trainer's arguments
as the HF importer reads them, and GRPO's group size as the recipe's `rl`.

A TRL config extends `TrainingArguments`, so its batch, precision, optimizer, schedule
and `deepspeed:` are the HF importer's. `num_generations` is `rl.rollout_n`, and GRPOConfig's
generation batch (`generation_batch_size`, or micro × world × `steps_per_generation`, by
default the accumulation) holds `rl.prompts_per_step` groups; `vllm_mode` is
`rl.rollout_mode`, and a colocated vLLM's `vllm_gpu_memory_utilization` is
`rl.rollout_memory` and its sleep mode `rl.free_rollout_memory`. What a recipe does not
model (the dataset, `beta`, the completion length, a server's address) is named in a note:
keep the YAML for it.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.tables import training_arguments
from distrecipe.keys import integer
from distrecipe.translator.importers import Context, Imported, NotImportable, hf

MAPPED = frozenset({"num_generations", "generation_batch_size", "steps_per_generation", "use_vllm",
                    "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"})
"""The TRL keys `_rl` reads into the recipe."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    trainer = training_arguments()
    imported = hf.to_recipe({key: value for key, value in data.items() if key in trainer}, context)
    imported.read = {key: value for key, value in data.items() if key in trainer}
    rl = _rl(data, imported.recipe, context)
    if rl:
        imported.recipe["rl"] = rl
    # `trl NAME` runs under `accelerate launch` (a recipe with `rl` would otherwise be verl's)
    zero = imported.recipe.get("strategy") == "zero"
    imported.recipe["launch"] = {"backend": "accelerate-deepspeed" if zero else "accelerate"}
    left = sorted(key for key in data if key not in trainer and key not in MAPPED)
    if left:
        shown = f"{', '.join(left[:4])}{', ...' if len(left) > 4 else ''}"
        imported.notes.append(f"{len(left)} TRL settings are not a recipe's (model, data, loss, generation: "
                              f"{shown}): keep the YAML for them")
    return imported


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
