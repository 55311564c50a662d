"""The engines' key tables: which keys each section of a native config accepts, their
defaults, and whether the engine refuses an unknown key there or silently ignores it.

The JSON files beside this module are written by `scripts/engine_tables.py` from the
installed DeepSpeed, Accelerate, verl and transformers (introspected and probed, never transcribed),
and `tests/test_engine_tables.py` regenerates and compares them, so an engine upgrade
shows up as a failing test naming the keys. Axolotl's and LLaMA-Factory's, which cannot
be installed beside those, are written by `scripts/schema_tables.py` from their schema
sources stored at a pinned commit (`tests/corpus/schemas/`). Reading a table costs a JSON parse and no
engine import, done once, on first use (lint's fast path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

TableEngine = Literal["deepspeed", "accelerate", "verl", "hf", "axolotl", "llamafactory"]
LABELS: dict[TableEngine, str] = {
    "deepspeed": "DeepSpeed", "accelerate": "Accelerate", "verl": "verl", "hf": "transformers",
    "axolotl": "Axolotl", "llamafactory": "LLaMA-Factory"}

def is_comment_key(key: object) -> bool:
    """A key written as a comment (`comment`, `_comment`, `//…`, `#…`, any `_`-prefixed key):
    JSON has no comments, so people write them as keys; a note, never a misspelt setting."""
    return isinstance(key, str) and (key.lower() in ("comment", "comments")
                                     or key.startswith(("_", "//", "#")))


@cache
def table(engine: TableEngine) -> dict[str, Any]:
    """The stored table of `engine` (parsed once)."""
    text = resources.files(__package__).joinpath(f"{engine}.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def label(engine: TableEngine) -> str:
    """`DeepSpeed 0.19.8`: the engine and the version its table was read from, for messages
    (`Axolotl 0.18.0 @067b021c` for a table read from sources at a commit)."""
    found = table(engine)
    at = f" @{found['commit'][:8]}" if "commit" in found else ""
    return f"{LABELS[engine]} {found['version']}{at}"


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a native config as the engine reads it."""

    name: str
    """Dotted path (`zero_optimization.offload_param`); empty for the top level."""
    keys: dict[str, dict[str, Any]]
    """Accepted key → `{"default": …}` (absent when the engine reads it without one), and
    `alias_of`, `deprecated`, `replaced_by`, `choices` where the engine has them; for a
    pydantic field, the JSON `types` its annotation accepts (`refuses_bool` where a
    validator turns booleans away; see `lint.rules.value_types`)."""
    refuses_unknown: bool
    """True when the engine stops at start-up on a key not in `keys`; False when it
    silently ignores it."""
    auto_dropped: bool = False
    """True when the engine drops an `"auto"` value before checking keys (DeepSpeed's
    models do, leaving it to the HF Trainer), so even an unknown key with it passes."""

    def default(self, key: str) -> tuple[bool, Any]:
        """(True, the engine's default for `key`) or (False, None) when it has none."""
        entry = self.keys.get(key, {})
        return ("default" in entry, entry.get("default"))


@cache
def section(engine: Literal["deepspeed", "accelerate"], path: tuple[str, ...]) -> Section | None:
    """The section at `path` of a ds_config or an Accelerate config, or None when the
    engine does not read that path as a section (free-form or not a mapping)."""
    name = ".".join(path)
    found = table(engine)["sections"].get(name)
    if found is None:
        return None
    return Section(name, found["keys"], found["unknown_keys"] == "refused", found.get("auto_dropped", False))


@cache
def removed_keys(path: tuple[str, ...]) -> frozenset[str]:
    """ds_config keys at `path` that DeepSpeed removed and now refuses by name."""
    return frozenset(table("deepspeed")["removed"].get(".".join(path), ()))


VerlConfig = Literal["ppo_trainer", "ppo_megatron_trainer"]


def verl_tree(config: VerlConfig) -> dict[str, Any]:
    """verl's composed Hydra config `config`, whole, with its defaults (interpolations as written)."""
    tree: dict[str, Any] = table("verl")["configs"][config]
    return tree


@cache
def training_flags() -> dict[str, dict[str, Any]]:
    """How `HfArgumentParser(TrainingArguments)` reads each field from a command line: its
    conversion (`int`, `float`, `bool`, `str`, `enum`, `other`), `choices`, `nargs`."""
    flags: dict[str, dict[str, Any]] = table("hf")["flags"]
    return flags


@cache
def trainer_modules() -> frozenset[str]:
    """The installed verl's trainer modules (`verl.trainer.main_ppo`, ...)."""
    return frozenset(table("verl").get("trainer_modules", ()))


@cache
def training_arguments() -> frozenset[str]:
    """The fields `HfArgumentParser` accepts for the installed transformers' `TrainingArguments`."""
    return frozenset(table("hf")["training_arguments"])


def training_defaults() -> dict[str, Any]:
    """`TrainingArguments`' default for each field that has a stable one (null included)."""
    defaults: dict[str, Any] = table("hf")["defaults"]
    return defaults
