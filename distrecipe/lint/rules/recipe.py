"""Recipes: everything `distrecipe compile` would refuse, reported as a finding."""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.lint.rule import Problem
from distrecipe.lint.rules import batch
from distrecipe.lint.workspace import Source


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


def heads_do_not_split(src: Source) -> Iterator[Problem]:
    """The model's heads or sequence do not split over the tensor or sequence degree.

    Each engine cuts attention by heads (tensor parallelism, Ulysses) or the sequence by
    positions (ring attention), and refuses a degree that does not divide what it cuts
    when the model is built or the first batch arrives, after every node has loaded the
    model. The rules are the engine's own (`distrecipe/engines/heads.py` cites each):
    DeepSpeed Ulysses needs heads % sequence == 0, kv heads and sequence dividing one
    another, and seq_len % sequence == 0; verl's Ulysses the same head rules; DeepSpeed
    AutoTP at least one kv head per tensor rank; torchtitan, Accelerate and Megatron
    heads and kv heads % tensor == 0; torchtitan's and Megatron's context parallelism
    seq_len % (2 × sequence) == 0, Accelerate's seq_len % sequence == 0. Nothing is
    said when the recipe does not state `model.heads` (or `batch.seq_len`).

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 7.6e9, hidden_size: 3584, layers: 28, heads: 28, kv_heads: 4}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: zero
    stage: 2
    parallel: {sequence: 8}
    batch: {micro: 1, global: 2, seq_len: 32768}
    ```
    (DeepSpeed Ulysses: 28 heads do not split over 8 ranks.)

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 32, heads: 32, kv_heads: 8}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: fsdp
    parallel: {sequence: 4}
    batch: {micro: 1, global: 2, seq_len: 8196}
    ```
    (torchtitan's head-tail sharder cuts each sequence into 2 × 4 = 8 equal parts.)

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 7.6e9, hidden_size: 3584, layers: 28, heads: 28, kv_heads: 4}
    cluster: {nodes: 1, gpus_per_node: 8}
    strategy: zero
    stage: 2
    parallel: {sequence: 4}
    batch: {micro: 1, global: 2, seq_len: 32768}
    ```

    Fix: a degree the message lists, or a sequence length it divides;
    `distrecipe plan --search` only proposes layouts that split.
    """
    if src.plan is None:
        return
    from distrecipe.engines.heads import refusal

    refused = refusal(src.plan)
    if refused is not None:
        yield Problem(tuple(refused.keys[0].split(".")), refused.message)
