"""The command line of a Hugging Face Trainer script, as `HfArgumentParser` reads it.

`HfArgumentParser(TrainingArguments)` is argparse over the dataclass: `--name VALUE`
or `--name=VALUE`, the last occurrence wins, a bool field given alone (`--bf16`)
means true and takes `yes/true/t/y/1` or `no/false/f/n/0`, and a dict field takes a
JSON object or a file path. This module spells a recipe's TrainingArguments as that
argv and judges a user's value against the recipe's (the argv itself is read by
`engines.argv.read_flags`), without importing transformers; tests/test_launch_hf.py
parses the same argv with `HfArgumentParser` itself.
"""

from __future__ import annotations

import json
from typing import Any

from distrecipe.engines.argv import FALSE_WORDS, TRUE_WORDS


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
