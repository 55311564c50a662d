"""The library's front door: a recipe file in, a resolved Plan out.

Every command (compile, resolve, plan, launch, lint, diff) starts here, so loading,
overrides and resolution behave identically everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from distrecipe.recipe import Plan
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve


def load_plan(
    path: str | Path, overrides: Sequence[str] = (), *, detected_gpus: int | None = None
) -> Plan:
    """Load, override, validate and resolve a recipe file."""
    return resolve(load_recipe(path, overrides), detected_gpus=detected_gpus)
