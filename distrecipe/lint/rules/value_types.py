"""Values of the wrong JSON type where DeepSpeed validates its config with pydantic.

DeepSpeed hands `zero_optimization`, `fp16`/`bf16`, the monitors, `compile`,
`tensor_parallel` and its other model-backed sections to pydantic models, which refuse a
value whose type they cannot coerce, at start-up on the cluster. The accepted types
of each key are read from the installed DeepSpeed's field annotations (the key tables);
what pydantic's lax mode coerces is mirrored here, so only a value pydantic refuses is
reported: `1e-4` is no integer, but `2.0`, `"8"` and `true` are (pydantic reads them
as 2, 8 and 1), `"yes"` is a boolean and `1` a float.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from distrecipe.engines.deepspeed import BATCH_KEYS
from distrecipe.engines.tables import label, section
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath

BOOL_TEXT = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})
"""Strings pydantic reads as a boolean (any case)."""
INT_TEXT = re.compile(r"\s*[+-]?\d+(?:_\d+)*(?:\.0+)?\s*")
"""Strings pydantic reads as an integer (`"8"`, `"8.0"`, `"1_000"`)."""


def _float_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def coerces(kind: str, value: Any, *, refuses_bool: bool = False) -> bool:
    """Whether pydantic's lax mode validates the JSON `value` as a `kind` field."""
    if isinstance(value, bool) and refuses_bool:
        return False
    if kind == "null":
        return value is None
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "bool":
        if isinstance(value, str):
            return value.lower() in BOOL_TEXT
        return isinstance(value, int | float) and value in (0, 1)
    if kind == "int":
        if isinstance(value, str):
            return INT_TEXT.fullmatch(value) is not None
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer() and abs(value) < 2**63
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, int | float) or (isinstance(value, str) and _float_text(value))
    raise ValueError(f"unknown JSON type {kind!r} in the DeepSpeed key table")


def _choice(value: Any, choices: list[Any]) -> bool:
    """Whether `value` coerces to one of `choices` (an integer enum takes `"2"` and `2.0`)."""
    for choice in choices:
        if isinstance(choice, str) and value == choice:
            return True
        if isinstance(choice, int) and not isinstance(choice, bool) and coerces("int", value):
            number = int(value) if isinstance(value, bool) else int(float(str(value).replace("_", "")))
            if number == choice:
                return True
    return False


def refused_type(entry: dict[str, Any], value: Any) -> str | None:
    """What the key accepts, when pydantic refuses `value` for it; None when it accepts it
    (or the table records no types: DeepSpeed takes any value, or reshapes it first)."""
    kinds: list[str] | None = entry.get("types")
    if kinds is None or value == "auto":  # DeepSpeed's models drop "auto" before validating
        return None
    choices: list[Any] | None = entry.get("choices")
    if choices is not None:
        if _choice(value, choices) or (value is None and "null" in kinds):
            return None
        return "one of " + ", ".join(map(repr, choices)) + (" or null" if "null" in kinds else "")
    if any(coerces(kind, value, refuses_bool=entry.get("refuses_bool", False)) for kind in kinds):
        return None
    return " or ".join(kinds) + (" (not a boolean)" if entry.get("refuses_bool") else "")


def _wrong(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[KeyPath, Any, str]]:
    """Every value in a ds_config's validated sections pydantic refuses, with what its key accepts."""
    found = section("deepspeed", path)
    if found is None:
        return
    for key, value in node.items():
        if isinstance(value, dict) and section("deepspeed", (*path, key)) is not None:
            yield from _wrong(value, (*path, key))
        elif key in found.keys:
            accepted = refused_type(found.keys[key], value)
            if accepted is not None:
                yield (*path, key), value, accepted


def deepspeed_wrong_type(src: Source) -> Iterator[Problem]:
    """A value of a type DeepSpeed's pydantic config models refuse, at start-up.

    `zero_optimization`, `fp16`/`bf16`, the offload blocks, the monitors, `compile` and
    the other sections DeepSpeed validates with pydantic check each value's type when the
    job starts ("Input should be a valid integer"), after the allocation has been paid
    for. pydantic coerces what it can (`"8"` or `8.0` for an integer, `1` for a float,
    `"true"` for a boolean), so only what it cannot is reported; `"auto"` is left to
    DR310/DR315. The accepted types are read from the installed DeepSpeed.

    The three batch numbers at the top level are no pydantic fields: every reader does
    arithmetic with them as written, so a number written as a string
    (`"gradient_accumulation_steps": "8"`) is refused by each: raw DeepSpeed's batch
    arithmetic fails with a TypeError, Accelerate's `accelerator.prepare` multiplies it
    into the train batch and fails with a TypeError, and the HF Trainer compares it with
    TrainingArguments without coercion and refuses the "mismatch" of `8` and `"8"`.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "fp16": {"enabled": true, "min_loss_scale": 0.0001}}
    ```

    Fails: deepspeed --world 8
    ```json
    {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "8"}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "fp16": {"enabled": true, "min_loss_scale": 1}}
    ```

    Fix: a value of the type the message names (`min_loss_scale` is a whole number).
    """
    for path, value, accepted in _wrong(src.data):
        where = ".".join(map(str, path))
        yield Problem(path, f"{label('deepspeed')} refuses {json.dumps(value)} for {where} at start-up: "
                            f"it accepts {accepted}")
    strings = [key for key in BATCH_KEYS.values() if isinstance(value := src.data.get(key), str)
               and value.lower() != "auto" and _float_text(value)]
    use = src.workspace.use(src.path) if strings and not src.within else None
    for key in strings:
        written = json.dumps(src.data[key])
        if use is not None and use.consumer == "accelerate":
            how = (f"Accelerate (used by {use.by}) multiplies it in accelerator.prepare (train_batch_size = "
                   f"micro × {written} × processes) and fails with a TypeError at start-up" + (
                       "" if use.decided else " (under the HF Trainer, the Trainer refuses it first, as a "
                       "mismatch with TrainingArguments)"))
        elif use is not None and use.consumer == "hf":
            how = (f"the HF Trainer (used by {use.by}) compares it with TrainingArguments without coercion "
                   f"and refuses it at start-up (\"ds {key}={src.data[key]} vs hf {key}=...\")")
        else:
            how = "DeepSpeed's batch arithmetic fails with a TypeError at start-up, as every reader's does"
        yield Problem((key,), f"{key} is the string {written}, not a number: {how}; write {src.data[key]}")
