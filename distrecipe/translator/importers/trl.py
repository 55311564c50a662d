"""TRL config (`trl sft|grpo --config FILE`, + world size) → recipe: the Trainer's arguments
as the HF importer reads them, and GRPO's group size as the recipe's `rl`.

A TRL config extends `TrainingArguments`, so its batch, precision, optimizer, schedule
and `deepspeed:` are the HF importer's. `num_generations` is `rl.rollout_n`, and GRPOConfig's
generation batch (micro × world × `steps_per_generation`, by default the accumulation)
holds `rl.prompts_per_step` groups; a colocated vLLM's `vllm_gpu_memory_utilization` is
`rl.rollout_memory` and its sleep mode `rl.free_rollout_memory`. What a recipe does not
model (the dataset, `beta`, the completion length, a vLLM server) is named in a note: keep
the YAML for it.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.tables import training_arguments
from distrecipe.keys import integer
from distrecipe.translator.importers import Context, Imported, NotImportable, hf

MAPPED = frozenset({"num_generations", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
                    "vllm_enable_sleep_mode"})
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
    if knobs:
        knob = knobs[0]
        raise NotImportable("a GRPO generation batch other than one optimizer step (generation_batch_size, "
                            "steps_per_generation) has no recipe field: the recipe's prompts per step are "
                            "one optimizer step's", context.doc.where((knob,)))
    batch, cluster = recipe.get("batch", {}), recipe.get("cluster", {})
    micro, accumulation = integer(batch.get("micro")), integer(batch.get("accumulation"))
    world = (integer(cluster.get("nodes")) or 1) * (integer(cluster.get("gpus_per_node")) or 1)
    if micro is None or accumulation is None:
        raise NotImportable("the recipe's prompts per step are GRPO's generation batch in groups of "
                            "num_generations, which needs numbers: per_device_train_batch_size and "
                            "gradient_accumulation_steps", context.doc.where(("num_generations",)))
    if (micro * world * accumulation) % generations:
        raise NotImportable(f"num_generations {generations} does not divide the generation batch (micro "
                            f"{micro} × world {world} × accumulation {accumulation}): GRPOConfig refuses it",
                            context.doc.where(("num_generations",)))
    prompts = micro * world * accumulation // generations
    rl: dict[str, Any] = {"rollout_n": generations, "prompts_per_step": prompts}
    if data.get("use_vllm") and data.get("vllm_mode", "colocate") == "colocate" \
            and data.get("vllm_gpu_memory_utilization") is not None:
        rl["rollout_memory"] = data["vllm_gpu_memory_utilization"]
    if data.get("vllm_enable_sleep_mode") is not None:
        rl["free_rollout_memory"] = bool(data["vllm_enable_sleep_mode"])
    return rl
