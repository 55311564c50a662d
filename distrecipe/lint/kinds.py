"""Which kind of config a file is, and reading it with positions.

Kinds are told apart by the keys only one of them writes, so a file needs no naming
convention: `recipe:` marks a recipe, `distributed_type` an Accelerate config,
`actor_rollout_ref` (or `data` with `trainer`) verl, TrainingArguments' own names an
HF file, and DeepSpeed's keys (or a near miss of one: `zero_optimisation`) a
ds_config. verl is also written as Hydra overrides (`key=value` lines, or a launch
script); those are read into the same nested mapping, with each override's position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from distrecipe.errors import Position
from distrecipe.lint.rule import Kind
from distrecipe.source import Document, KeyPath, parse_text, read_text

DATA_SUFFIXES = (".json", ".yaml", ".yml")
OVERRIDE_SUFFIXES = (".txt", ".sh", ".args")

HF_MARKERS = frozenset({
    "per_device_train_batch_size", "output_dir", "learning_rate", "max_grad_norm", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "num_train_epochs", "max_steps", "deepspeed",
    "fsdp", "fsdp_config", "gradient_checkpointing", "warmup_steps", "lr_scheduler_type",
})
"""TrainingArguments names that no ds_config uses (`gradient_accumulation_steps` is shared)."""
DS_MARKERS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization", "gradient_clipping",
    "fp16", "bf16", "optimizer", "scheduler", "steps_per_print", "wall_clock_breakdown",
    "gradient_accumulation_steps", "zero_allow_untested_optimizer", "activation_checkpointing",
})
VERL_ROOTS = ("actor_rollout_ref", "data", "trainer", "algorithm", "critic", "reward_model", "model_engine")


def detect(doc: Document) -> Kind | None:
    """The config's kind from its keys, or None for a file that is none of ours."""
    data = doc.data
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if "recipe" in keys:
        return "recipe"
    if keys & {"distributed_type", "compute_environment"}:
        return "accelerate"
    if "actor_rollout_ref" in keys or {"data", "trainer"} <= keys:
        return "verl"
    if keys & HF_MARKERS:
        return "hf"
    if keys & DS_MARKERS or _near_deepspeed(keys):
        return "deepspeed"
    return None


def _near_deepspeed(keys: set[str]) -> bool:
    import difflib  # only files with no known key get here

    return any(difflib.get_close_matches(key, DS_MARKERS, n=1, cutoff=0.85) for key in keys)


def read_file(path: Path) -> Document:
    """Read and parse a config file of any kind lint knows (see `read`)."""
    return read(path, read_text(path))


def read(path: Path, text: str) -> Document:
    """Parse `text` by its file's suffix: JSON fast, YAML carefully, overrides line by line."""
    name = str(path)
    suffix = path.suffix.lower()
    if suffix in OVERRIDE_SUFFIXES:
        return read_overrides(text, name)
    return parse_text(text, name)


_OVERRIDE = re.compile(r"(?:^|(?<=\s))([+~]{0,2})([A-Za-z_][\w.\-]*)=(\"[^\"]*\"|'[^']*'|\S+)")


def read_overrides(text: str, file: str) -> Document:
    """Hydra `key=value` overrides (one per line, or in a shell launch command) as a mapping.

    Only keys under verl's top-level groups are read, so the script name, `python3 -m`
    and shell variables around them are left alone.
    """
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): Position(file, 1, 1)}
    key_positions: dict[KeyPath, Position] = {}
    lines = tuple(text.splitlines())
    for number, match in override_matches(lines):
        prefix, dotted, raw = match.groups()
        path = tuple(dotted.split("."))
        if prefix == "~":
            continue
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            positions.setdefault(path[: depth + 1], Position(file, number, match.start(2) + 1))
            node = child
        else:
            node[path[-1]] = hydra_value(raw.rstrip("\\"))
            key_positions[path] = Position(file, number, match.start(2) + 1)
            positions[path] = Position(file, number, match.start(3) + 1)
    return Document(data, file, positions, key_positions, lines)


def override_matches(lines: Iterable[str]) -> Iterator[tuple[int, re.Match[str]]]:
    """Each `[+~]key=value` under one of verl's top-level groups, with its 1-based line
    number: the Hydra overrides of an override file or a launch script, comments skipped."""
    for number, line in enumerate(lines, start=1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        for match in _OVERRIDE.finditer(code):
            if match.group(2).split(".", 1)[0] in VERL_ROOTS:
                yield number, match


def hydra_value(raw: str) -> Any:
    """A value in Hydra's override grammar: scalars, `[a,b]` lists, `{k:v}` mappings."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    if raw.startswith("[") and raw.endswith("]"):
        return [hydra_value(part) for part in _split(raw[1:-1])]
    if raw.startswith("{") and raw.endswith("}"):
        pairs = (part.partition(":") for part in _split(raw[1:-1]))
        return {key.strip(): hydra_value(value) for key, _, value in pairs}
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none", ""):
        return None
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    return raw


def _split(body: str) -> list[str]:
    """Split on commas outside brackets; an empty body is an empty list."""
    parts, depth, current = [], 0, ""
    for char in body:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts
