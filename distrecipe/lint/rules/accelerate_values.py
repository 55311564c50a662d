"""Values Accelerate refuses, by the vocabularies read from the installed Accelerate.

Which values each key takes was found by asking Accelerate itself (`scripts/engine_tables.py`
writes every name of its vocabularies, its truth words, YAML booleans and a nonsense
word into a minimal config and runs its loader, launcher and plugin), so this rule
says what `lint --engines` would, without importing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.engines.tables import label, table
from distrecipe.keys import did_you_mean
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath, written_text

TRUTH = ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0")
"""Accelerate's `str_to_bool` words (any case)."""


def _written(src: Source) -> Iterator[tuple[KeyPath, str, Any]]:
    """Each probed key the file writes: its path, its name in the table, its value."""
    fsdp = src.get("fsdp_config")
    version = str(fsdp.get("fsdp_version", 1)) if isinstance(fsdp, dict) else "1"
    for dotted in table("accelerate").get("accepted", {}):
        section, _, key = dotted.rpartition(".")
        if not section:
            if key in src.data:
                yield (key,), dotted, src.data[key]
            continue
        block = src.get(section)
        if not isinstance(block, dict):
            continue
        short = key.removeprefix("fsdp_")  # the launcher adds the prefix a key lacks
        for written in (key, short) if short != key else (key,):
            if written in block:
                scope = version if section == "fsdp_config" else "*"
                yield (section, written), f"{dotted}@{scope}", block[written]


def refusal(entry: dict[str, Any], value: Any, written: str | None = None) -> str | None:
    """What the key takes, when Accelerate refuses `value` (written as `written`) for it;
    None when it takes it."""
    kind = entry["kind"]
    if kind == "open" or value is None:
        return None
    if isinstance(value, bool):
        if kind == "truth" or entry.get("booleans"):
            return None
        if written is None or written.lower() in ("true", "false"):
            return _takes(entry)
        return f"{_takes(entry)}; YAML 1.1 reads an unquoted {written} as {str(value).lower()}: quote it"
    text = str(value)
    if kind == "truth":
        return None if text.lower() in TRUTH else "true or false (a truth value)"
    if kind == "integer":
        return None if text.lstrip("-").isdigit() else "an integer"
    names = entry["names"]
    found = text in names if entry["case"] == "exact" else text.upper() in {n.upper() for n in names}
    if found or text in entry.get("digits", ()):
        return None
    return _takes(entry) + did_you_mean(text, names)


def _takes(entry: dict[str, Any]) -> str:
    if entry["kind"] == "names":
        return "one of " + ", ".join(dict.fromkeys(n if entry["case"] == "exact" else n.upper()
                                                    for n in entry["names"]))
    return "true or false (a truth value)" if entry["kind"] == "truth" else "an integer"


def value_refused(src: Source) -> Iterator[Problem]:
    """A value Accelerate refuses for a key of its config: not in its vocabulary.

    `distributed_type` must be one of Accelerate's `DistributedType` names (`MPS` is
    none: Accelerate picks Apple's backend itself), `mixed_precision` one of its
    precisions, `dynamo_backend` one of its backends; under `fsdp_version: 2` the
    plugin reads `fsdp_reshard_after_forward` as a truth value, so FSDP1's
    `FULL_SHARD` there stops every worker ("invalid truth value full_shard"); FSDP1's
    strategy, prefetch, wrap-policy and state-dict keys take their enums' names. The
    loader, `accelerate launch` or each worker's plugin refuses it, after the job is
    scheduled. The vocabularies are read from the installed Accelerate.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: FULL_SHARD
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    ```

    Fix: a value the message lists (`true` for FSDP2's full sharding, `false` for ZeRO-2's).
    """
    accepted = table("accelerate").get("accepted", {})
    for path, name, value in _written(src):
        dotted, _, version = name.partition("@")
        entry = accepted[dotted].get(version or "*")
        takes = (refusal(entry, value, written_text(src.doc, path))
                 if entry is not None and not isinstance(value, dict | list) else None)
        if takes is not None:
            shown = ".".join(map(str, path))
            yield Problem(path, f"{shown}: {label('accelerate')} refuses {value!r} (it takes {takes})")
