"""Recipes: the checkpoint `checkpoint.resume` names, checked as `launch` will check it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from distrecipe.checkpoints.check import resume_of
from distrecipe.checkpoints.layout import CheckpointError
from distrecipe.checkpoints.verdict import stated_kind
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def checkpoint_cannot_resume(src: Source) -> Iterator[Problem]:
    """The checkpoint the recipe resumes from cannot be loaded by this job as it is.

    `launch` checks `checkpoint.resume` before any rank starts and refuses a path that
    does not exist, is not a checkpoint or is partial (its engine's marker or a rank's
    files missing), `auto` without `checkpoint.dir`, and a checkpoint the job's engine
    loads only after a conversion (a ZeRO checkpoint at another data-parallel world:
    `ds_to_universal`) or not at all (`docs/checkpoints.md`). Lint says the same from
    file names and JSON only, without torch, so a DeepSpeed shard missing at the highest
    rank and ZeRO-1 against ZeRO-2 are left to `launch` and `distrecipe checkpoint check`.
    Relative paths are the job's working directory's, here the one lint runs in.

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 1.3e9}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: zero
    stage: 2
    batch: {micro: 4, global: 32}
    checkpoint: {dir: checkpoints, resume: checkpoints/global_step400}
    ```

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 1.3e9}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: zero
    stage: 2
    batch: {micro: 4, global: 32}
    checkpoint: {dir: checkpoints-not-written-yet, resume: auto}
    ```

    Fix: resume from an existing complete checkpoint, `auto` with `checkpoint.dir`, or run
    the conversion the message names (`distrecipe checkpoint convert`).
    """
    plan = src.plan
    if plan is None or plan.recipe.checkpoint is None or plan.recipe.checkpoint.resume is None:
        return
    try:
        found = resume_of(plan, stated_kind(plan), cwd=Path.cwd(), deep=False)
    except CheckpointError as exc:
        yield Problem(("checkpoint", "resume"), exc.message)
        return
    if found is not None and found.layout is not None and found.verdict is not None \
            and found.verdict.outcome != "resumes as is":
        yield Problem(("checkpoint", "resume"), found.verdict.line(found.layout))
