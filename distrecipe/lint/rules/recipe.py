"""Recipes: everything `distrecipe compile` would refuse, reported as a finding."""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.lint.rule import Problem, Source
from distrecipe.lint.rules import batch


def recipe_invalid(src: Source) -> Iterator[Problem]:
    """The recipe does not validate or resolve.

    Lint reports what `distrecipe compile` and `resolve` would refuse (a schema
    violation, a stage that does not go with the strategy, parameter offload below
    stage 3, a world that does not split into data-parallel replicas, ...) with the
    same message and position. Batch arithmetic has its own codes (DR101 to DR104),
    so a recipe refused for its batch is reported once, under those.

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 1.3e9}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: ddp
    stage: 3
    batch: {micro: 4, global: 32}
    ```

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 1.3e9}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: zero
    stage: 3
    batch: {micro: 4, global: 32}
    ```

    Fix: the message says what to change; `distrecipe resolve FILE` shows the rest.
    """
    if src.error is None:
        return
    arithmetic = (batch.batch_mismatch, batch.batch_not_exact, batch.dp_exceeds_global, batch.no_batch_size)
    if any(next(iter(check(src)), None) for check in arithmetic):
        return
    yield Problem((), src.error.message, where=src.error.where)
