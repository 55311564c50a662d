"""Axolotl's training YAML as facts: its keys, and the TrainingArguments it builds from them.

Axolotl validates the YAML with the pydantic model `AxolotlInputConfig` (keys, types and
defaults in `tables/axolotl/RELEASE.json`, generated from its sources by `scripts/schema_tables.py`),
then builds the HF Trainer's `TrainingArguments` from it (`core/builders/base.py`):
`micro_batch_size` becomes `per_device_train_batch_size`, `bf16: auto` becomes True on a
GPU with bf16 (`resolve_dtype`), `deepspeed:` names the ds_config the Trainer fills and
checks. A path there is opened from the directory Axolotl runs in (the repository's root).
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.hf import defaults as trainer_defaults

MARKERS = frozenset({"micro_batch_size", "sequence_len", "num_epochs", "lr_scheduler", "sample_packing",
                     "val_set_size", "dataset_prepared_path", "adapter"})
"""Keys only Axolotl's YAML writes; with `base_model` (which Axolotl requires) they mark one."""

PARALLEL = ("dp_shard_size", "dp_replicate_size", "tensor_parallel_size", "context_parallel_size",
            "expert_parallel_size")
"""The degrees Axolotl hands Accelerate's ParallelismConfig (`utils/distributed.py`)."""

UNKNOWN = object()
"""A value that depends on the machine (`bf16: auto`): no file can contradict it."""


def is_axolotl(keys: set[str]) -> bool:
    return "base_model" in keys and bool(keys & MARKERS)


def trainer_arguments(data: dict[str, Any]) -> dict[str, tuple[Any, str | None]]:
    """The `TrainingArguments` fields the Trainer matches against a ds_config, as Axolotl
    sets them: HF name → (value, the Axolotl key it comes from, None for a default).
    `UNKNOWN` where the machine decides (`bf16: auto`)."""
    hf = trainer_defaults()
    out: dict[str, tuple[Any, str | None]] = {}
    micro = data.get("micro_batch_size", 1)
    out["per_device_train_batch_size"] = (micro, "micro_batch_size" if "micro_batch_size" in data else None)
    accumulation: Any = data.get("gradient_accumulation_steps")
    source: str | None = "gradient_accumulation_steps"
    total = data.get("batch_size")
    if accumulation is None and isinstance(total, int) and isinstance(micro, int) and micro > 0:
        accumulation, source = total // micro, "batch_size"  # normalize_config
    elif accumulation is None:
        accumulation, source = 1, None
    out["gradient_accumulation_steps"] = (accumulation, source)
    for name in ("max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay"):
        value = data.get(name)
        unset = 0.0 if name == "weight_decay" else hf[name]  # Axolotl's weight_decay default is 0
        out[name] = (value, name) if value is not None else (unset, None)
    rate = data.get("learning_rate")
    out["learning_rate"] = ((_number(rate), "learning_rate") if rate is not None
                            else (hf["learning_rate"], None))
    bf16 = data.get("bf16", "auto")
    if bf16 is None:
        bf16 = data.get("bfloat16")
    fp16 = data.get("fp16")
    if bf16 == "auto":
        bf16_value: Any = False if fp16 is True else UNKNOWN
    else:
        bf16_value = bool(bf16) or bf16 == "full"
    out["bf16"] = (bf16_value, "bf16" if "bf16" in data else None)
    out["fp16"] = (UNKNOWN if bf16_value is UNKNOWN and fp16 is None else bool(fp16) and not bf16_value,
                   "fp16" if "fp16" in data else None)
    return out


def _number(value: Any) -> Any:
    """A number Axolotl's pydantic model reads from a string (`learning_rate: 2e-5` is a
    string in YAML 1.1), else the value as written."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


BOOL_WORDS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})
"""The strings pydantic's lax mode reads as a boolean (case-insensitive)."""


def refusal(value: Any, entry: dict[str, Any]) -> str | None:
    """Why `AxolotlInputConfig` refuses `value` for a key of `entry` (its JSON `types` and
    `choices` in the table), as pydantic's lax mode converts: None when it accepts it, or
    when the table cannot tell (a type of its own, a validator converting first)."""
    types = set(entry.get("types", ("any",)))
    if "any" in types or entry.get("converted_before"):
        return None
    if value is None:
        return None if "null" in types else "null, and the key takes no null"
    choices = entry.get("choices")
    if choices is not None:  # every alternative is closed (Literal, a str enum)
        listed = [c for c in choices if c is not None]
        return None if value in listed else f"not one of {', '.join(map(repr, listed))}"
    if any(_accepts(kind, value) for kind in types):
        return None
    return "not " + " or ".join(_NAMES[kind] for kind in sorted(types - {"null"}) if kind in _NAMES)


_NAMES = {"integer": "an integer", "number": "a number", "boolean": "a boolean", "string": "a string",
          "null": "null", "array": "a list", "object": "a mapping"}


def _accepts(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool) or (isinstance(value, int | float) and value in (0, 1)) or (
            isinstance(value, str) and value.strip().lower() in BOOL_WORDS)
    if kind == "integer":
        if isinstance(value, bool | int):
            return True
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, str) and _integral(value)
    if kind == "number":
        return isinstance(value, bool | int | float) or (isinstance(value, str) and _float(value) is not None)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "object":
        return isinstance(value, dict)
    return True


def _float(text: str) -> float | None:
    try:
        return float(text.strip().replace("_", ""))
    except ValueError:
        return None


def _integral(text: str) -> bool:
    number = _float(text)
    return number is not None and number.is_integer()
