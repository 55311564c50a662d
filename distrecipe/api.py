"""The library's front door: a recipe file in, a resolved Plan out.

Every command (compile, resolve, plan, launch, lint, diff) starts here, so loading,
overrides and resolution behave identically everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.recipe import AUTO, Plan
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve


def load_plan(
    path: str | Path, overrides: Sequence[str] = (), *, detected_gpus: int | None = None
) -> Plan:
    """Load, override, validate and resolve a recipe file.

    `cluster.gpus_per_node: auto` is answered by probing this machine (CUDA_VISIBLE_DEVICES,
    then nvidia-smi) unless the caller already knows; with no GPU found the resolver
    explains what to write instead.
    """
    recipe = load_recipe(path, overrides)
    if recipe.cluster.gpus_per_node == AUTO and detected_gpus is None and recipe.cluster.device == "gpu":
        from distrecipe.launch.detect import detect_gpus

        try:
            detected_gpus = detect_gpus(os.environ)
        except LaunchError:
            detected_gpus = None
    return resolve(recipe, detected_gpus=detected_gpus)
