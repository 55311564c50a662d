"""`plan --search`: every valid recipe for the model, cluster and global batch, ranked.

The recipe's model, cluster, global batch, sequence length, precision, optimizer and
pipeline / sequence degrees stay as written; the search varies what a user tunes:

* strategy and stage: DDP, ZeRO-1/2/3 and FSDP2 (reshard or not) when the launcher is
  `auto`; with a launcher written, the stages of the written strategy only;
* offload: none, the optimizer to the CPU (stage ≥ 1), parameters too (stage 3);
* checkpointing: none, selective (op level), full;
* tensor parallelism 1, 2, 4, 8 within a node, where the engine has it (DeepSpeed
  AutoTP for ZeRO, FSDP2 + TP with a shard group of 2+); never for DDP;
* the micro-batch (every divisor of the samples a rank takes per step), with
  accumulation following.

Each candidate is a `Recipe` the resolver accepts (its refusals are the search's), that
the engine can run (AutoTP's mesh has no sequence dimension: `engines.deepspeed`), that
fits (`needed ≤ cluster.gpu_memory`, as `plan` judges; with offload, the host memory a
node's ranks hold ≤ `cluster.cpu_memory` when it is given), ranked by estimated step time,
then by memory needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from distrecipe.engines.deepspeed import autotp_refusal
from distrecipe.errors import DistrecipeError, RecipeError
from distrecipe.plan.report import Estimate, estimate
from distrecipe.recipe import AUTO, Offload, Recipe, Recompute, Strategy
from distrecipe.translator.resolve import ALLOWED_STAGES, resolve

TENSOR_DEGREES = (1, 2, 4, 8)
CHECKPOINTING: tuple[Recompute, ...] = ("none", "selective", "full")


@dataclass(frozen=True, slots=True)
class Candidate:
    recipe: Recipe
    estimate: Estimate

    @property
    def seconds(self) -> float:
        assert self.estimate.step is not None  # search() keeps only estimated ones
        return self.estimate.step.seconds

    def overrides(self) -> dict[str, object]:
        """The recipe keys the search set, as `--set` would write them."""
        r, p = self.recipe, self.estimate.plan
        return {
            "strategy": r.strategy, "stage": p.stage,
            "offload.optimizer": r.offload.optimizer, "offload.params": r.offload.params,
            "parallel.tensor": r.parallel.tensor,
            "batch.micro": p.micro, "batch.accumulation": p.accumulation,
            "batch.global": p.global_batch,
            "activation_checkpointing": r.activation_checkpointing,
        }


@dataclass(frozen=True, slots=True)
class Result:
    ranked: list[Candidate]
    """Every fitting candidate, fastest first."""
    tried: int
    """Candidates the resolver and the engines accepted, fitting or not."""


def _strategies(recipe: Recipe) -> list[tuple[Strategy, int]]:
    if recipe.launch.backend != AUTO or recipe.rl is not None or recipe.strategy == "megatron":
        return [(recipe.strategy, stage) for stage in ALLOWED_STAGES[recipe.strategy]]
    return [("ddp", 0), ("zero", 1), ("zero", 2), ("zero", 3), ("fsdp", 2), ("fsdp", 3)]


def _offloads(strategy: Strategy, stage: int) -> list[Offload]:
    options = [Offload()]
    if stage >= 1 and strategy != "megatron":
        options.append(Offload(optimizer="cpu"))
    if stage == 3 and strategy != "megatron":
        options.append(Offload(optimizer="cpu", params="cpu"))
    return options


def _tensors(recipe: Recipe, strategy: Strategy, gpus_per_node: int) -> list[int]:
    if strategy == "ddp" or strategy == "megatron":
        return [recipe.parallel.tensor]
    return [t for t in TENSOR_DEGREES if gpus_per_node % t == 0]


def candidates(recipe: Recipe, gpus_per_node: int) -> Iterator[Recipe]:
    """Every recipe the search considers, before the resolver and the engines judge it."""
    for strategy, stage in _strategies(recipe):
        for offload in _offloads(strategy, stage):
            for tensor in _tensors(recipe, strategy, gpus_per_node):
                for recompute in CHECKPOINTING:
                    yield replace(
                        recipe, strategy=strategy, stage=stage, offload=offload,
                        parallel=replace(recipe.parallel, tensor=tensor, shard_group="all"),
                        batch=replace(recipe.batch, micro=1, accumulation=AUTO),
                        activation_checkpointing=recompute, checkpoint_every=None,
                    )


def search(recipe: Recipe, gpus_per_node: int) -> Result:
    """Resolve, judge and estimate every candidate; keep those that fit, fastest first."""
    fitting: list[Candidate] = []
    tried = 0
    for shape in candidates(recipe, gpus_per_node):
        try:
            base = resolve(shape)
        except RecipeError:
            continue
        if autotp_refusal(base) is not None:
            continue
        per_rank = base.global_batch // base.dp
        for micro in (d for d in range(1, per_rank + 1) if per_rank % d == 0):
            accumulation = per_rank // micro
            declared = replace(shape, batch=replace(shape.batch, micro=micro, accumulation=accumulation))
            plan = replace(base, micro=micro, accumulation=accumulation)
            tried += 1
            est = estimate(plan)
            if est.fits and est.step is not None and host_fits(est):
                fitting.append(Candidate(declared, est))
    fitting.sort(key=lambda c: (round(c.seconds, 6), c.estimate.need))
    return Result(fitting, tried)


def host_bytes_per_node(est: Estimate) -> float:
    """Host memory the offloaded state of one node's ranks takes (the engine view's)."""
    return sum(est.engine.cpu.values()) * est.plan.gpus_per_node


def host_fits(est: Estimate) -> bool:
    """Offload fits the host when `cluster.cpu_memory` says so, or does not say."""
    cpu = est.plan.cpu_memory
    return cpu is None or host_bytes_per_node(est) <= cpu


def check_searchable(recipe: Recipe, plan_of: Estimate) -> None:
    """What the search needs to rank anything: a memory budget and a step-time estimate."""
    missing = [key for key, absent in (
        ("cluster.gpu_memory", plan_of.plan.gpu_memory is None),
        ("cluster.gpu or cluster.peak_tflops", plan_of.step is None),
        ("a fixed batch.global", recipe.batch.global_ == AUTO)) if absent]
    if missing:
        raise DistrecipeError(f"{recipe.source}: plan --search needs {', '.join(missing)}",
                              recipe.at("cluster", "batch"))


def why(candidate: Candidate, budget: float) -> str:
    """One line: what the candidate is and what decides its place."""
    est = candidate.estimate
    step = est.step
    assert step is not None
    p = est.plan
    parts = [est.label]
    if p.tensor > 1:
        parts.append(f"TP {p.tensor}")
    parts += [f"micro {p.micro} × accumulation {p.accumulation}",
              f"checkpointing {p.activation_checkpointing}"]
    if p.offload.enabled:
        host = host_bytes_per_node(est) / 1e9
        parts.append(f"host {host:.0f} GB per node" + (
            "" if p.cpu_memory is not None else " (cluster.cpu_memory unknown: not checked)"))
    return (f"{', '.join(parts)}: {step.seconds:.3g} s/step, {step.tokens_per_s_per_gpu:,.0f} "
            f"tokens/s/GPU, MFU {step.mfu:.1%} (compute {step.compute:.3g} s, exposed traffic "
            f"{step.exposed:.3g} s); needs {est.need / 1e9:.1f} of {budget / 1e9:.0f} GB")

