"""What an engine reads for a key a native config does not state: its own default.

`diff` compares two files of one kind key by key; where only one side states a key,
the other side gets what its engine would use, taken from the generated key tables
(`engines/tables`), never from a recipe default. A DeepSpeed section's pydantic
defaults, Accelerate's config dataclasses, verl's composed Hydra config (with its
`${...}` interpolations resolved against the file's own values, as OmegaConf would)
and TrainingArguments' defaults each answer for their kind. A key the engine reads
without a default (`optimizer.params.lr`), or one it defaults to `null` (it derives
the value itself, as DeepSpeed does `overlap_comm` from the stage), has none: the
side is "not stated", which is all that can be said without inventing a value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distrecipe.engines import Kind
from distrecipe.engines.accelerate import EMITTED_DEFAULTS
from distrecipe.engines.deepspeed import NO_DEFAULT, stage_default, stage_of
from distrecipe.engines.hydra import parse_value
from distrecipe.engines.tables import label, section, table, training_defaults, verl_tree
from distrecipe.engines.verl import verl_config

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Default:
    """The engine's value for an unstated key, and whose default it is (for the reader)."""

    value: Any
    source: str
    """`DeepSpeed 0.19.8 default`: the engine and version the value was read from."""


Lookup = Callable[[Path], Default | None]
"""An unstated key's path → the engine's default for it, or None when it has none."""


def canonical(kind: Kind, path: Path) -> Path:
    """The name the engine reads a key under, so two spellings of one setting compare
    as one: DeepSpeed's `stage3_` aliases and its legacy `bfloat16`, Accelerate's optional
    section prefixes."""
    if kind == "deepspeed" and path[:1] == ("bfloat16",):  # DeepSpeed reads it where `bf16` is absent
        path = ("bf16", *path[1:])  # (runtime/precision_config.py get_bfloat16_config: BFLOAT16_OLD)
    if kind == "deepspeed" and path:
        found = section("deepspeed", path[:-1])
        alias = found.keys.get(path[-1], {}).get("alias_of") if found else None
        return (*path[:-1], alias) if isinstance(alias, str) else path
    if kind == "accelerate" and len(path) == 2:
        found = section("accelerate", path[:1])
        prefix: str = table("accelerate")["sections"][path[0]]["prefix"] if found else ""
        if prefix and not path[1].startswith(prefix):
            return (path[0], prefix + path[1])
    return path


def modelled(kind: Kind, path: Path) -> bool:
    """Whether the engine reads the mapping at `path` as a section with defaults, so an
    empty one (`"fp16": {}`) is the same as none; `"params": {}` under `optimizer` is not."""
    return kind in ("deepspeed", "accelerate") and section(kind, path) is not None


def lookup(kind: Kind, data: Any, lines: Sequence[str] = ()) -> Lookup:
    """The default lookup for one side of a diff: its engine, and for verl its composed
    config (`ppo_megatron_trainer` or `ppo_trainer`) completed with the side's own values."""
    if kind == "deepspeed":
        return _DeepSpeed(stage_of(data)).default
    if kind == "accelerate":
        return _accelerate
    if kind == "verl":
        return _Verl(data if isinstance(data, dict) else {}, lines).default
    if kind == "hf":
        return _hf
    return lambda path: None


def null_is_default(kind: Kind, path: Path) -> bool:
    """Whether the engine's own default for `path` is null, so a file that states it null
    says no more than one that leaves it out (a TrainingArguments dump's `hub_token`, a
    ds_config's `zero_optimization.offload_optimizer`). Unknown keys, and keys defaulting
    to anything else, are not: there a stated null is the file's own word."""
    if kind == "hf":
        return len(path) == 1 and path[0] in training_defaults() and training_defaults()[path[0]] is None
    if kind == "deepspeed" or (kind == "accelerate" and len(path) <= 2):
        found = section(kind, path[:-1]) if path else None
        return found is not None and found.default(path[-1]) == (True, None)
    return False


def _known(value: Any, source: str) -> Default | None:
    return None if value is None else Default(value, source)


def _deepspeed(path: Path) -> Default | None:
    """The key's default in its section's model, or inside its parent's default value
    (a section defaulting to `{}` or to a mapping, like `leaf_module`)."""
    if not path:
        return None
    found = section("deepspeed", path[:-1])
    if found is not None:
        has, value = found.default(path[-1])
        if has:
            return _known(value, f"{label('deepspeed')} default")
    parent = _deepspeed(path[:-1])
    if parent is not None and isinstance(parent.value, dict) and path[-1] in parent.value:
        return _known(parent.value[path[-1]], parent.source)
    return None


@dataclass(frozen=True)
class _DeepSpeed:
    """DeepSpeed's defaults for one side: the key table's, and where `DeepSpeedConfig` derives
    one from the side's ZeRO stage (`overlap_comm` is on at stage 3 only), that one."""

    stage: int | None

    def default(self, path: Path) -> Default | None:
        if self.stage is not None:
            derived = stage_default(path, self.stage)
            if derived is not NO_DEFAULT:
                return Default(derived, f"{label('deepspeed')} default")
        return _deepspeed(path)


def _accelerate(path: Path) -> Default | None:
    if len(path) > 2:
        return None
    found = section("accelerate", path[:-1])
    has, value = found.default(path[-1]) if found is not None else (False, None)
    if not has or value is None:  # what the config loader fills in, or `accelerate launch` defaults to
        has, value = path in EMITTED_DEFAULTS, EMITTED_DEFAULTS.get(path)
    if path[0] == "fsdp_config" and isinstance(value, str) and value.isdigit():
        # The launcher hands every fsdp_config value to the workers as text (`FSDP_VERSION`,
        # utils/launch.py), which the plugin reads with int(): the default "1" is the number 1.
        value = int(value)
    return _known(value, f"{label('accelerate')} default") if has else None


def _hf(path: Path) -> Default | None:
    if len(path) == 1 and path[0] in training_defaults():
        return _known(training_defaults()[path[0]], "TrainingArguments default")
    return None


_EMBEDDED = re.compile(r"\$\{([\w.]+)\}")
"""A plain `${path}` inside text (`checkpoints/${trainer.project_name}`)."""
_MISSING = object()


class _Verl:
    """verl's composed config for one side: defaults, the side's overrides on top,
    and OmegaConf's `${path}`, `${.key}` and `${oc.select:path,default}` resolved."""

    def __init__(self, data: dict[str, Any], lines: Sequence[str]) -> None:
        self.data = data
        self.tree = verl_tree(verl_config(data, lines))
        self.source = f"{label('verl')} default"

    def default(self, path: Path) -> Default | None:
        value = self._at(self.tree, path)
        if value is _MISSING:
            return None
        return _known(self._resolve(value, path[:-1], depth=0), self.source)

    def _effective(self, path: Path) -> Any:
        """The side's value at `path`, else the default: what an interpolation reads."""
        return _merged(self._at(self.tree, path), self._at(self.data, path))

    @staticmethod
    def _at(node: Any, path: Path) -> Any:
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def _resolve(self, value: Any, node: Path, depth: int) -> Any:
        """`value` with its interpolations followed as OmegaConf does; custom resolvers
        (`${oc.env:...}`) are kept as written, their answer is not in the config."""
        if not isinstance(value, str) or "${" not in value or depth > 8:
            return value
        body = _whole(value)
        if body is None:
            return _EMBEDDED.sub(lambda m: self._text(m.group(1), node, depth, m.group(0)), value)
        if body.startswith("oc.select:"):
            target, _, fallback = body.removeprefix("oc.select:").partition(",")
            found = self._effective(self._path(target, node))
            if found is _MISSING or found == "???":
                return self._resolve(parse_value(fallback), node, depth + 1)
        elif ":" in body:
            return value
        else:
            found = self._effective(self._path(body, node))
            if found is _MISSING:
                return value
        return self._resolve(found, node, depth + 1)

    def _text(self, reference: str, node: Path, depth: int, written: str) -> str:
        found = self._resolve(self._effective(self._path(reference, node)), node, depth + 1)
        return written if found is _MISSING or isinstance(found, dict | list) else str(found)

    @staticmethod
    def _path(reference: str, node: Path) -> Path:
        """An interpolation's key path: absolute, or relative to the node holding the key
        (one leading dot is that node, each further dot one level up)."""
        if not reference.startswith("."):
            return tuple(reference.split("."))
        dots = len(reference) - len(reference.lstrip("."))
        base = node[: len(node) - (dots - 1)] if dots > 1 else node
        return (*base, *reference[dots:].split("."))


def _merged(default: Any, stated: Any) -> Any:
    """A stated value over the default, mapping into mapping as Hydra merges overrides."""
    if stated is _MISSING:
        return default
    if isinstance(default, dict) and isinstance(stated, dict):
        return {**default, **{k: _merged(default.get(k, _MISSING), v) for k, v in stated.items()}}
    return stated


def _whole(value: str) -> str | None:
    """The body of `value` when it is one interpolation `${...}` (braces inside balanced),
    else None."""
    if not value.startswith("${") or not value.endswith("}"):
        return None
    depth = 0
    for index, char in enumerate(value[1:], start=1):
        depth += char == "{"
        depth -= char == "}"
        if depth == 0 and index < len(value) - 1:
            return None
    return value[2:-1]
