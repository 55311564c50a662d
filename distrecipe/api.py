"""The library's front door: a recipe (file or document) in, a resolved Plan and each
engine's settings out.

Every command (compile, resolve, plan, launch, lint, diff, import) starts here, so
loading, overrides and resolution behave identically everywhere: a file goes through
`load_plan`, a document already in memory (a recipe lint read, a native config
imported into recipe form) through `plan_of_document`. A training script uses the
rest (README, "Use it from your training script"):

    from distrecipe import api
    plan = api.current()                      # inside `distrecipe launch`, else api.load("r.yaml")
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                      config=api.deepspeed_config(plan))

Importing it imports neither torch nor an engine; each function returns plain dicts
and lists, in the engines' own spelling, so the script passes them on unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.launch.metrics import record as record_metrics
from distrecipe.recipe import AUTO, Recipe, batch_from_script
from distrecipe.source import Document
from distrecipe.translator.load import apply_overrides, load_recipe, recipe_from_document
from distrecipe.translator.resolve import needs_fit, resolve

__all__ = [
    "Plan",
    "accelerator_kwargs",
    "checkpoint_dir",
    "current",
    "deepspeed_config",
    "deepspeed_plugin_kwargs",
    "fsdp_plugin_kwargs",
    "load",
    "load_plan",
    "plan_of_document",
    "record_metrics",
    "resume_from",
    "review_plan",
    "training_arguments",
    "verl_overrides",
]


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
    return plan_of_recipe(load_recipe(path, overrides), detected_gpus=detected_gpus,
                          environ=environ, must_detect=must_detect)


def plan_of_recipe(
    recipe: Recipe,
    *,
    detected_gpus: int | None = None,
    environ: Mapping[str, str] | None = None,
    must_detect: bool = False,
) -> Plan:
    """`load_plan` for a recipe already loaded (compile keeps it for its positions)."""
    if recipe.cluster.gpus_per_node == AUTO and detected_gpus is None and recipe.cluster.device == "gpu":
        from distrecipe.launch.detect import detect_gpus

        try:
            detected_gpus = detect_gpus(os.environ if environ is None else environ)
        except LaunchError:
            if must_detect:
                raise
    return _resolved(recipe, detected_gpus=detected_gpus)


def plan_of_document(doc: Document, base_dir: Path, *, world: int | None = None,
                     overrides: Sequence[str] = ()) -> Plan:
    """Override, validate and resolve a recipe document (diff's sides, import's result).

    Never probes the machine: a document is reviewed, not run, so `gpus_per_node: auto`
    needs `world` (or the resolver says what to write instead).
    """
    recipe = recipe_from_document(apply_overrides(doc, overrides), base_dir)
    return _resolved(recipe, world=world)


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
    return _resolved(recipe, world=world)


def _resolved(recipe: Recipe, *, detected_gpus: int | None = None, world: int | None = None) -> Plan:
    """The Plan, with `batch.micro: auto` chosen by memory where the recipe lets memory decide.

    The batch algebra alone cannot say which micro-batch "auto" means when accumulation is
    `auto` too; under `batch.micro_policy: largest-that-fits` (the default) it is the largest
    that fits, which the memory model (above the resolver) chooses: so the choice is made
    here, on the one path every command takes (`plan.fit.fitted`).
    """
    if not needs_fit(recipe):
        return resolve(recipe, detected_gpus=detected_gpus, world=world)
    from distrecipe.plan.fit import fitted  # the memory model, only when asked

    return fitted(recipe, detected_gpus=detected_gpus, world=world)


def load(path: str | Path, overrides: Sequence[str] = ()) -> Plan:
    """The resolved Plan of a recipe file; `overrides` are `--set` style `key=value` strings."""
    return load_plan(path, overrides)


def resume_from(environ: Mapping[str, str] | None = None) -> Path | None:
    """The checkpoint this run resumes from, as `distrecipe launch` chose and checked it
    (`checkpoint.resume`: the latest complete one for `auto`), or None to start fresh.
    A raw script passes it to its engine's load (`engine.load_checkpoint(path.parent,
    tag=path.name)` for DeepSpeed, `dcp.load(..., checkpoint_id=path)` for FSDP2)."""
    from distrecipe.launch.resume import RESUME_ENV

    value = (os.environ if environ is None else environ).get(RESUME_ENV)
    return Path(value) if value else None


def checkpoint_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where this run saves its checkpoints (`checkpoint.dir`, absolute), or None."""
    from distrecipe.launch.resume import CHECKPOINT_DIR_ENV

    value = (os.environ if environ is None else environ).get(CHECKPOINT_DIR_ENV)
    return Path(value) if value else None


def prune_checkpoints(saved: str | Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """`checkpoint.keep` for a raw script: call on one rank after a save has completed
    (every rank's files written), with the checkpoint just saved. Deletes the oldest
    complete checkpoints of its kind in `checkpoint_dir()` beyond `keep`, never `saved`
    and never a partial one; returns them. Nothing without `checkpoint.keep` (or `dir`)."""
    from distrecipe.checkpoints.layout import prune
    from distrecipe.launch.resume import KEEP_ENV

    env = os.environ if environ is None else environ
    root, keep = checkpoint_dir(env), env.get(KEEP_ENV)
    if root is None or not keep:
        return []
    return prune(root, int(keep), Path(saved))


def current(environ: Mapping[str, str] | None = None) -> Plan:
    """The Plan of the run this process belongs to, as `distrecipe launch` resolved it.

    Read from the run directory's `plan.json` (`DISTRECIPE_PLAN`, else
    `DISTRECIPE_RUN_DIR/plan.json`), so every rank sees exactly what was launched,
    GPU detection included, without resolving the recipe again.
    """
    from distrecipe.launch.rundir import PLAN_FILE, read_plan

    env = os.environ if environ is None else environ
    if "DISTRECIPE_PLAN" in env:
        path = Path(env["DISTRECIPE_PLAN"])
    elif "DISTRECIPE_RUN_DIR" in env:
        path = Path(env["DISTRECIPE_RUN_DIR"]) / PLAN_FILE
    else:
        raise LaunchError("not inside a job started by `distrecipe launch` (neither DISTRECIPE_PLAN "
                          "nor DISTRECIPE_RUN_DIR is set); use distrecipe.api.load(RECIPE)")
    try:
        return read_plan(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LaunchError(f"cannot read the run's plan {path}: {exc.strerror}") from None


def _refuse_inexact(findings: Sequence[Any]) -> None:
    from distrecipe.translator.equivalence import refuse_errors

    refuse_errors(list(findings))


def deepspeed_config(plan: Plan) -> dict[str, Any]:
    """The ds_config dict, for `deepspeed.initialize(config=...)` (what `compile` writes)."""
    from distrecipe.translator import deepspeed

    _refuse_inexact(deepspeed.findings(plan))
    return deepspeed.emit(plan)


def training_arguments(plan: Plan) -> dict[str, Any]:
    """`TrainingArguments(output_dir=..., **training_arguments(plan))` keyword arguments.

    On a ZeRO plan `deepspeed` is the ds_config dict itself (the Trainer accepts a dict),
    so no file has to be found at run time.
    """
    from distrecipe.translator import hf

    _refuse_inexact(hf.findings(plan))
    kwargs = hf.emit(plan)
    if "deepspeed" in kwargs:
        kwargs["deepspeed"] = deepspeed_config(plan)
    return kwargs


def accelerator_kwargs(plan: Plan) -> dict[str, Any]:
    """`Accelerator(**accelerator_kwargs(plan), fsdp_plugin=...)`: precision and accumulation."""
    from distrecipe.engines.accelerate import MIXED_PRECISION

    return {"mixed_precision": MIXED_PRECISION[plan.precision],
            "gradient_accumulation_steps": plan.batch.accumulation}


PLUGIN_KEYS = {"fsdp_offload_params": "cpu_offload",
               "fsdp_transformer_layer_cls_to_wrap": "transformer_cls_names_to_wrap"}
"""Accelerate's YAML `fsdp_config` key → `FullyShardedDataParallelPlugin` field, where the
plugin's name is not the YAML's without `fsdp_`."""


def fsdp_plugin_kwargs(plan: Plan) -> dict[str, Any]:
    """`FullyShardedDataParallelPlugin(**...)`: the FSDP2 choices the Accelerate config makes."""
    from distrecipe.translator import accelerate

    _refuse_inexact(accelerate.findings(plan))
    kwargs: dict[str, Any] = {}
    for key, value in accelerate.fsdp_config(plan).items():
        name = PLUGIN_KEYS.get(key, key if key == "fsdp_version" else key.removeprefix("fsdp_"))
        kwargs[name] = [value] if name == "transformer_cls_names_to_wrap" else value
    return kwargs


def deepspeed_plugin_kwargs(plan: Plan) -> dict[str, Any]:
    """`DeepSpeedPlugin(**...)`: the ds_config as `hf_ds_config`, which then decides everything."""
    return {"hf_ds_config": deepspeed_config(plan), "zero3_init_flag": plan.stage == 3}


def verl_overrides(plan: Plan) -> list[str]:
    """verl's Hydra overrides (`key=value`), as `verl_overrides.txt` lists them."""
    from distrecipe.translator import verl

    _refuse_inexact(verl.findings(plan))
    return verl.overrides_text(plan).splitlines()
