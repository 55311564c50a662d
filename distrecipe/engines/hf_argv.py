"""The command line of a Hugging Face Trainer script, as `HfArgumentParser` reads it.

`HfArgumentParser(TrainingArguments)` is argparse over the dataclass: `--name VALUE`
or `--name=VALUE`, the last occurrence wins, a bool field given alone (`--bf16`)
means true and takes `yes/true/t/y/1` or `no/false/f/n/0`, and a dict field takes a
JSON object or a file path. This module spells a recipe's TrainingArguments as that
argv and reads a user's argv back, for the flags distrecipe decides, without
importing transformers; tests/test_launch_hf.py parses the same argv with
`HfArgumentParser` itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TRUE_WORDS = ("yes", "true", "t", "y", "1")
FALSE_WORDS = ("no", "false", "f", "n", "0")
"""`transformers.hf_argparser.string_to_bool`'s words, lower-cased as it compares them."""

OPTIONAL_VALUE = ("bf16", "fp16", "gradient_checkpointing", "use_cpu", "fsdp")
"""Fields whose flag may stand alone (bools, and `fsdp`, declared `nargs="?", const=True`)."""


def flag_value(value: Any) -> str:
    """One TrainingArguments value as the word argparse turns back into it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def flag_words(name: str, value: Any) -> list[str]:
    """`--name value`; `fsdp=True` is the bare `--fsdp` (a str field whose `const` is True)."""
    return [f"--{name}"] if name == "fsdp" and value is True else [f"--{name}", flag_value(value)]


@dataclass(frozen=True, slots=True)
class Given:
    """One flag a user's argv sets, and the value's word as given."""

    name: str
    text: str
    """The value's word (`"true"` for a bool flag given alone)."""


def find_flags(argv: Sequence[str], names: Sequence[str]) -> list[Given]:
    """Every occurrence of `--name` among `names` in `argv`, in order (the last one wins)."""
    found: list[Given] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        name, eq, inline = word[2:].partition("=") if word.startswith("--") else ("", "", "")
        if name not in names:
            index += 1
            continue
        if eq:
            found.append(Given(name, inline))
            index += 1
        elif index + 1 < len(argv) and not (
            name in OPTIONAL_VALUE and argv[index + 1].startswith("--")
        ):
            found.append(Given(name, argv[index + 1]))
            index += 2
        else:
            found.append(Given(name, "true"))
            index += 1
    return found


def same_value(given: str, decided: Any) -> bool:
    """Whether the word a user gave parses to the value the recipe decided."""
    if isinstance(decided, bool):
        word = given.lower()
        return (word in TRUE_WORDS and decided) or (word in FALSE_WORDS and not decided)
    if isinstance(decided, dict):
        try:
            return bool(json.loads(given) == decided)
        except ValueError:
            return False
    if isinstance(decided, (int, float)):
        try:
            return float(given) == float(decided)
        except ValueError:
            return False
    return given == str(decided)
