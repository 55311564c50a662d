"""Memory per GPU, from `distrecipe plan`'s model, for recipes that state their GPUs' memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from distrecipe.job import Plan
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.plan.units import gb

if TYPE_CHECKING:
    from distrecipe.plan.verdict import Verdict
from distrecipe.translator.resolve import variant


def memory_does_not_fit(src: Source) -> Iterator[Problem]:
    """The plan needs more memory per GPU than `cluster.gpu_memory` offers, even at its band's low end.

    The estimate is `distrecipe plan`'s: what PyTorch's allocator reserves at the worse
    of the start of backward (engine view, activations, loss gradients, gathered and
    reduce buffers) and the optimizer step, plus the CUDA context and NCCL, with the
    error band its engine family showed on published runs (`plan/bands.json`), against
    `cluster.gpu_memory` less `cluster.headroom`. Within the band it is DR372's warning.
    Without the check, the job runs out of memory in its first step, after the model has
    loaded on every node.

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: ddp
    batch: {micro: 1, global: 32, seq_len: 4096}
    ```
    (DDP keeps all of the 8B model's state on every GPU: about 128 GB.)

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: zero
    stage: 2
    batch: {micro: 1, global: 32, seq_len: 4096}
    ```

    Fix: `distrecipe plan FILE` names the least sharded stage that fits, or
    recompute, offload, tensor parallelism.
    """
    message = does_not_fit(src.plan) if src.plan is not None else None
    if message is not None:
        yield Problem(("cluster", "gpu_memory"), message)


def does_not_fit(plan: Plan) -> str | None:
    """DR370's message when even the optimistic end of the plan's error band needs more than
    `cluster.gpu_memory` less `cluster.headroom` (lint's rule, which `compile` runs too: it
    refuses such a recipe)."""
    said = _verdict(plan)
    if said is None or said.word != "does not fit":
        return None
    from distrecipe.plan.verdict import band_text
    return (f"{_label(plan)} needs {gb(said.need)} per GPU (reserved + CUDA context; "
            f"{band_text(said)}), more than {_usable(said)}; see distrecipe plan")


def memory_tight(src: Source) -> Iterator[Problem]:
    """The GPU's memory lies within the plan's error band: the job may or may not fit.

    `needed` at the optimistic end of the band (the smallest error the engine family
    and kernels showed on published runs, `distrecipe/plan/bands.json`) fits, at the
    pessimistic end it does not. Launch goes ahead (DR370 refuses only a plan that cannot
    fit at either end); this says the margin is thinner than the estimate's own error.

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32, kv_heads: 8,
            intermediate_size: 12288, vocab: 151936}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: zero
    stage: 1
    batch: {micro: 2, global: 256, seq_len: 8192}
    activation_checkpointing: full
    ```
    (ZeRO-1 needs 85 GB by the plan; DeepSpeed's band, −6.8 % … +7.8 %, puts it at 79–92 GB.)

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32, kv_heads: 8,
            intermediate_size: 12288, vocab: 151936}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: zero
    stage: 2
    batch: {micro: 2, global: 256, seq_len: 8192}
    activation_checkpointing: full
    ```

    Fix: what `distrecipe plan FILE` advises (a smaller micro-batch, recompute, more
    sharding), or keep it knowingly (suppress DR372).
    """
    said = _verdict(src.plan) if src.plan is not None else None
    if said is not None and said.word == "tight":
        from distrecipe.plan.verdict import band_text

        yield Problem(("cluster", "gpu_memory"), (
            f"tight: {_label(src.plan)} needs {gb(said.need)} per GPU ({band_text(said)}): the "
            f"error band lies on both sides of {_usable(said)}; see distrecipe plan"))


def _verdict(plan: Plan) -> Verdict | None:
    if plan.recipe.model.params is None or plan.script_batch:  # no size, or no micro-batch to size
        return None
    from distrecipe.plan.report import estimate  # only recipes that size a model need it

    return estimate(plan).verdict


def _label(plan: Plan | None) -> str:
    from distrecipe.plan.report import label

    return "the plan" if plan is None else label(plan)


def _usable(said: Verdict) -> str:
    if not said.headroom:
        return f"cluster.gpu_memory {gb(said.gpu_memory)}"
    return (f"cluster.gpu_memory {gb(said.gpu_memory)} less cluster.headroom {gb(said.headroom)} "
            f"= {gb(said.usable)}")


def zero3_where_zero2_fits(src: Source) -> Iterator[Problem]:
    """Stage 3 where stage 2 already fits, and sends more: traffic for memory not needed.

    Stage 3 also shards the 16-bit parameters, so every micro-step gathers them again in
    forward and in backward (the seed's formula: 31 → 46.5 GB per step for 8B on 32
    GPUs). When stage 2 fits in the same GPUs, the extra traffic buys nothing; this is
    advice, not an error. The bytes are the engine's, as `distrecipe plan` and its advice
    quote them, so the rule stays silent where the engine sends less at stage 3: DeepSpeed
    all-reduces ZeRO-2's gradients on every micro-step (`use_multi_rank_bucket_allreduce`)
    and keeps a model under `stage3_max_live_parameters` gathered from forward to backward.

    Fails: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: fsdp
    stage: 3
    batch: {micro: 1, global: 32, seq_len: 4096}
    ```

    Passes: recipe
    ```yaml
    recipe: 1
    model: {params: 8.0e9, hidden_size: 4096, layers: 36, heads: 32}
    cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
    strategy: fsdp
    stage: 2
    batch: {micro: 1, global: 32, seq_len: 4096}
    ```

    Fix: `stage: 2` (or suppress when the memory is wanted for a larger batch).
    """
    plan = src.plan
    if (plan is None or plan.stage != 3 or plan.recipe.strategy not in ("zero", "fsdp")
            or plan.recipe.model.params is None):
        return
    from distrecipe.plan.report import estimate

    current = estimate(plan)
    if not current.fits:
        return
    offload = plan.recipe.offload
    lighter = estimate(variant(plan, stage=2, offload=replace(offload, params="none")))  # stage 2 resolves

    extra = current.traffic_engine.total - lighter.traffic_engine.total
    if lighter.comfortable and extra > 0:  # a tight stage 2 is no reason to leave stage 3
        yield Problem(("stage",), (
            f"stage 2 also fits ({gb(lighter.need)} of {gb(lighter.budget or 0)} per GPU) and "
            f"sends {gb(extra)} less per step than stage 3"))
