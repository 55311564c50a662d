"""The library's front door: a recipe (file or document) in, a resolved Plan out.

Every command (compile, resolve, plan, launch, lint, diff, import) starts here, so
loading, overrides and resolution behave identically everywhere: a file goes through
`load_plan`, a document already in memory (a recipe lint read, a native config
imported into recipe form) through `plan_of_document`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.recipe import AUTO, Plan, Recipe, batch_from_script
from distrecipe.source import Document
from distrecipe.translator.load import apply_overrides, load_recipe, recipe_from_document
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
    return _fitted(recipe, resolve(recipe, detected_gpus=detected_gpus))


def plan_of_document(doc: Document, base_dir: Path, *, world: int | None = None,
                     overrides: Sequence[str] = ()) -> Plan:
    """Override, validate and resolve a recipe document (diff's sides, import's result).

    Never probes the machine: a document is reviewed, not run, so `gpus_per_node: auto`
    needs `world` (or the resolver says what to write instead).
    """
    recipe = recipe_from_document(apply_overrides(doc, overrides), base_dir)
    return _fitted(recipe, resolve(recipe, world=world))


def review_plan(doc: Document, base_dir: Path, *, world: int | None) -> Plan | None:
    """Lint's view of a recipe document: its Plan, or None when there is none to check yet.

    `gpus_per_node: auto` with no world known is answered at launch, on the machine;
    a recipe that says so is not wrong, so there is nothing to resolve (or report). So is
    a batch the training script decides (`batch_from_script`: micro and global written
    `auto`): it is given with `--set` when the recipe is compiled.
    """
    recipe = recipe_from_document(doc, base_dir)
    batch = doc.data.get("batch") if isinstance(doc.data, dict) else None
    if (recipe.cluster.gpus_per_node == AUTO and world is None) or batch_from_script(batch):
        return None
    return _fitted(recipe, resolve(recipe, world=world))


def _fitted(recipe: Recipe, plan: Plan) -> Plan:
    """`plan` with `batch.micro: auto` chosen by memory where the recipe lets memory decide.

    The batch algebra alone (the resolver) takes accumulation 1 and the largest micro-batch
    when both are `auto`; with the model, sequence and GPU known, the largest micro-batch
    that fits is the one a user means. The memory model sits above the resolver, so the
    choice is made here, on the one path every command takes.
    """
    batch = recipe.batch
    if batch.micro != AUTO or batch.accumulation != AUTO or batch.global_ == AUTO:
        return plan
    from distrecipe.plan.fit import judgeable, largest_micro  # the memory model, only when asked

    return largest_micro(plan) if judgeable(plan) else plan
