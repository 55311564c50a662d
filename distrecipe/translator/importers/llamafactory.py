"""LLaMA-Factory training YAML (+ world size) → recipe: its Trainer arguments, as the HF importer reads them.

LLaMA-Factory hands its `TrainingArguments` (transformers' names: batch, precision,
optimizer, `deepspeed:`, `fsdp`) to the HF Trainer, so the recipe is the HF importer's;
the ds_config is opened from the directory the command runs in (the repository's root).
Its model, data and finetuning arguments are not a recipe's and are left to the YAML.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from distrecipe.engines.hf import MATCHED
from distrecipe.translator.importers import Context, Imported, hf

TRAINER_KEYS = (*MATCHED, "optim", "deepspeed", "fsdp", "fsdp_config", "gradient_checkpointing",
                *hf.SCHEDULE_KEYS, "save_steps", "save_strategy")
"""What the HF importer reads (the schedule and checkpoint cadence too: TrainingArguments of theirs)."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    imported = hf.to_recipe(data, replace(context, launched=True))
    left = sorted(key for key in data if key not in TRAINER_KEYS)
    if left:
        imported.notes.append(f"{len(left)} LLaMA-Factory settings are not a recipe's (model, data, "
                              f"finetuning: {', '.join(left[:4])}{', ...' if len(left) > 4 else ''}): "
                              "keep the YAML for them")
    imported.read = {key: data[key] for key in data if key in TRAINER_KEYS}
    return imported
