"""The library's front door: a recipe file in, a resolved Plan out.

Every command (compile, resolve, plan, launch, lint, diff) starts here, so loading,
overrides and resolution behave identically everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.recipe import AUTO, Plan
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve


def load_plan(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    detected_gpus: int | None = None,
    environ: Mapping[str, str] | None = None,
    must_detect: bool = False,
) -> Plan:
    """Load, override, validate and resolve a recipe file.

    `cluster.gpus_per_node: auto` is answered by probing the machine (CUDA_VISIBLE_DEVICES
    in `environ`, then nvidia-smi) unless the caller already knows. With no GPU found,
    the resolver explains what to write instead, or, with `must_detect` (launch, which
    is about to use the GPUs), the probe's own reason is the error.
    """
    recipe = load_recipe(path, overrides)
    if recipe.cluster.gpus_per_node == AUTO and detected_gpus is None and recipe.cluster.device == "gpu":
        from distrecipe.launch.detect import detect_gpus

        try:
            detected_gpus = detect_gpus(os.environ if environ is None else environ)
        except LaunchError:
            if must_detect:
                raise
    return resolve(recipe, detected_gpus=detected_gpus)
