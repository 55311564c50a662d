"""`plan --search`: every valid recipe for the model, cluster and global batch, ranked.

The recipe's model, cluster, global batch, sequence length, precision and optimizer
stay as written; the search varies what a user tunes:

* strategy and stage: DDP, ZeRO-1/2/3 and FSDP2 (reshard or not) when the launcher is
  `auto`; with a launcher written, or under `rl`, or for `megatron`, the stages of the
  written strategy only;
* offload: none, the optimizer to the CPU (stage ≥ 1), parameters too (stage 3);
* checkpointing: none, selective (op level), full;
* the model-parallel layout (tensor × pipeline × sequence, and for a mixture of experts under
  Megatron the expert degree, `EXPERT_DEGREES`) the engine that would run the
  candidate supports (`layouts`): tensor and context parallel inside a node (1, 2, 4, 8,
  their product dividing the node), pipeline 1, 2, 4, 8 dividing the layers;
  - FSDP2 under torchrun (torchtitan): tensor, pipeline and context parallel;
  - FSDP2 under Accelerate: tensor and context (`parallelism_config`), no pipeline;
  - DeepSpeed ZeRO: AutoTP tensor parallel or Ulysses sequence parallel
    (`sequence_parallel_size`), not both (AutoTP's mesh has no sequence dimension), no
    pipeline (it needs a Megatron mpu or a PipelineModule the recipe cannot name);
  - Megatron (a Megatron-LM script, or verl's Megatron engine): tensor, pipeline and
    context parallel, and with pipeline > 1 interleaved 1F1B of 2 virtual stages beside
    plain 1F1B (`VIRTUAL_STAGES`; the others' schedules cannot be told to interleave);
  - verl's FSDP engine: Ulysses only; DDP: the written layout;
* the micro-batch (every divisor of the samples a rank takes per step), with
  accumulation following.

Each candidate is a `Recipe` the resolver accepts (its refusals are the search's), whose
heads and sequence split over its tensor and sequence degrees in the engine that runs it
(`engines.heads`, lint's DR105; unknown heads check nothing), that the engine runs as
`plan` models it (`runnable.judge`, as for `--compare`: each micro-batch compiles for the
targets its launcher emits with no error, e.g. AutoTP beside a sequence group or verl's
batch rules, and no warning the recipe's own compile lacks, e.g. ZeRO-1 under verl), whose
verdict is *fits* (`verdict.py`: `needed` at the top of its error band within
`cluster.gpu_memory` less `cluster.headroom`, as `plan` judges; a *tight* one is not
offered; with offload, the host memory a node's ranks hold ≤ `cluster.cpu_memory` when it
is given, `host.py`), ranked by estimated step time
(`rank`); with a program kind stated, what the kind reads compiles as `--strict` would
(`runnable`). A mixture of experts whose estimated MFU is above its family's best published
run (`efficiency.moe_ceiling`) is not credible and ranks after every plausible candidate.
When none fits, `binding` says whether the GPU's memory, the host's or both bind.
Step times within 0.5 % of the fastest of their group are a tie (the estimate
is not that exact), broken by stated preferences, in this order: fewer parallel
dimensions (each of tensor, pipeline, virtual stages and sequence above 1 is one more
group to launch, debug and fail), then more headroom (less memory needed), then no
offload, then less recompute, then less traffic.

One bound keeps it fast without deciding for the user: under 1F1B a pipeline of p
stages idles (p − 1)/(m + p − 1) of the step, so a layout with pipeline > 1 is tried
only with the micro-batches that leave m ≥ p micro-batches per step (fewer would leave
most stages idle most of the time and hold no less memory: the first stage keeps
min(p, m) micro-batches in flight). Interleaving needs m a multiple of p (Megatron's
rule, `resolve`), so its micro-batches are those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from distrecipe.engines.heads import refusal as split_refusal
from distrecipe.errors import DistrecipeError, RecipeError
from distrecipe.plan import host
from distrecipe.plan.activations import ring_context_parallel
from distrecipe.plan.efficiency import moe_ceiling
from distrecipe.plan.report import Estimate, estimate
from distrecipe.plan.runnable import judge
from distrecipe.plan.steptime import context_parallel_bytes, pipeline_bytes, tensor_parallel_bytes
from distrecipe.recipe import AUTO, Offload, Recipe, Recompute, Strategy
from distrecipe.translator.resolve import (
    ALLOWED_STAGES,
    default_backend,
    needs_fit,
    offload_refusal,
    resolve,
    variant,
)

DEGREES = (1, 2, 4, 8)
CHECKPOINTING: tuple[Recompute, ...] = ("none", "selective", "full")
EXPERT_DEGREES = (1, 2, 4, 8, 16, 32, 64)
"""Expert-parallel degrees tried under Megatron (`expert_model_parallel_size`) for a mixture
of experts: those dividing the experts, and (the resolver's rule) data × sequence parallel.
Only Megatron: DeepSpeed MoE's `ep_size` is the script's own MoE layer (DR232) and the other
engines have none (DR208)."""
VIRTUAL_STAGES = (1, 2)
"""Model chunks per pipeline rank tried under Megatron: 2 halves the bubble for twice the
point-to-point sends and (p − 1)/(2p) more in flight on the first stage; more chunks
shrink the bubble less each time while the sends keep growing."""
Layout = tuple[int, int, int]
"""(tensor, pipeline, sequence)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    shape: Recipe
    """The recipe the search built; its batch is the estimate's plan's (`overrides`)."""
    estimate: Estimate

    @property
    def seconds(self) -> float:
        assert self.estimate.step is not None  # a timed search keeps only estimated ones
        return self.estimate.step.seconds

    @property
    def traffic(self) -> float:
        """Bytes one rank sends per step, data-parallel (the engine view's), tensor-, context-
        and pipeline-parallel together: what an untimed search ranks by."""
        plan = self.estimate.plan
        return (self.estimate.traffic_engine.total + tensor_parallel_bytes(plan)
                + context_parallel_bytes(plan) + pipeline_bytes(plan))

    @property
    def implausible(self) -> str | None:
        """Why the estimated MFU is above what any published run of the model's family reached
        (`efficiency.moe_ceiling`), or None: such a candidate ranks after every plausible one."""
        step, ceiling = self.estimate.step, moe_ceiling(self.estimate.plan)
        if step is None or ceiling is None or step.mfu <= ceiling.mfu:
            return None
        family = self.estimate.plan.recipe.model.family
        return (f"MFU {step.mfu:.1%} is above the best published run of a {family} mixture of experts, "
                f"{ceiling.mfu:.1%} ({ceiling.source}): not credible, ranked after every "
                "plausible candidate")

    def overrides(self) -> dict[str, object]:
        """The recipe keys the search set, as `--set` would write them."""
        r, p = self.shape, self.estimate.plan
        return {
            "strategy": r.strategy, "stage": p.stage,
            "offload.optimizer": r.offload.optimizer, "offload.params": r.offload.params,
            "parallel.tensor": r.parallel.tensor, "parallel.pipeline": r.parallel.pipeline,
            "parallel.sequence": r.parallel.sequence,
            "parallel.virtual_stages": r.parallel.virtual_stages, "parallel.expert": r.parallel.expert,
            "batch.micro": p.batch.micro, "batch.accumulation": p.batch.accumulation,
            "batch.global": p.batch.global_,
            "activation_checkpointing": r.activation_checkpointing,
        }


@dataclass(frozen=True, slots=True)
class Result:
    ranked: list[Candidate]
    """Every fitting candidate, fastest first."""
    tried: int
    """Candidates the resolver and the engines accepted, fitting or not."""
    timed: bool = True
    """Whether step time ranked them; without a GPU's peak, fit and traffic do (`search`)."""
    lightest: Estimate | None = None
    """Of the candidates the host holds (or unchecked), the one needing the least GPU
    memory: what `binding` names."""
    lightest_any: Estimate | None = None
    """The candidate needing the least GPU memory, host memory aside."""
    host_bound: Estimate | None = None
    """Of the candidates that fit the GPU but not the host (`host.fits`), the one needing the
    least host memory per node; None when none was refused for the host alone."""


def _strategies(recipe: Recipe) -> list[tuple[Strategy, int]]:
    """The written strategy's stages where the launcher or engine is fixed; else every one,
    FSDP2 left out for a raw DeepSpeed program (DeepSpeed runs it as ZeRO-3, DR238, which is
    already a candidate)."""
    if recipe.launch.backend != AUTO or recipe.rl is not None or recipe.strategy == "megatron":
        return [(recipe.strategy, stage) for stage in ALLOWED_STAGES[recipe.strategy]]
    every: list[tuple[Strategy, int]] = [("ddp", 0), ("zero", 1), ("zero", 2), ("zero", 3), ("fsdp", 2),
                                         ("fsdp", 3)]
    return [(s, stage) for s, stage in every if s != "fsdp" or recipe.launch.program_kind != "deepspeed"]


def _offloads(strategy: Strategy, stage: int) -> list[Offload]:
    """The CPU offloads the resolver accepts for the stage (Megatron's formula view has
    none); whether the engine runs each as modelled is the emitters' word (`runnable`)."""
    if strategy == "megatron":
        return [Offload()]
    options = (Offload(), Offload(optimizer="cpu"), Offload(optimizer="cpu", params="cpu"))
    return [off for off in options if offload_refusal(off, stage, strategy) is None]


def layouts(recipe: Recipe, strategy: Strategy, gpus_per_node: int) -> list[Layout]:
    """The (tensor, pipeline, sequence) degrees the engine running `strategy` supports
    (see the module's docstring); the written layout for DDP."""
    written = (recipe.parallel.tensor, recipe.parallel.pipeline, recipe.parallel.sequence)
    backend = recipe.launch.backend
    if backend == AUTO:
        backend = default_backend(replace(recipe, strategy=strategy))
    if strategy == "ddp":
        return [written]
    inside = [d for d in DEGREES if gpus_per_node % d == 0]
    layers = recipe.model.layers
    stages = [p for p in DEGREES if layers is None or layers % p == 0]
    if strategy == "zero":
        return [(1, 1, 1)] + [(t, 1, 1) for t in inside[1:]] + [(1, 1, s) for s in inside[1:]]
    if strategy == "fsdp" and backend == "verl":
        return [(1, 1, s) for s in inside]
    if strategy == "fsdp" and backend != "torchrun":
        stages = [1]
    return [(t, p, s) for t in inside for s in inside if gpus_per_node % (t * s) == 0
            for p in stages]


def virtual_stages(recipe: Recipe, strategy: Strategy, pipeline: int) -> tuple[int, ...]:
    """The virtual stages tried for a layout: `VIRTUAL_STAGES` under Megatron with a
    pipeline, those the layers split into (unknown layers check nothing); else 1."""
    if strategy != "megatron" or pipeline == 1:
        return (1,)
    layers = recipe.model.layers
    return tuple(v for v in VIRTUAL_STAGES if layers is None or layers % (pipeline * v) == 0)


def expert_degrees(recipe: Recipe, strategy: Strategy) -> tuple[int, ...]:
    """`EXPERT_DEGREES` dividing the experts under Megatron; else the written degree."""
    experts = recipe.model.experts
    if strategy != "megatron" or not experts:
        return (recipe.parallel.expert,)
    return tuple(e for e in EXPERT_DEGREES if experts % e == 0)


def candidates(recipe: Recipe, gpus_per_node: int) -> Iterator[Recipe]:
    """Every recipe the search considers, before the resolver and the engines judge it."""
    for strategy, stage in _strategies(recipe):
        for offload in _offloads(strategy, stage):
            for (tensor, pipeline, sequence), expert in ((layout, e) for layout in
                                                         layouts(recipe, strategy, gpus_per_node)
                                                         for e in expert_degrees(recipe, strategy)):
                for virtual, recompute in ((v, r) for v in virtual_stages(recipe, strategy, pipeline)
                                           for r in CHECKPOINTING):
                    yield replace(
                        recipe, strategy=strategy, stage=stage, offload=offload,
                        parallel=replace(recipe.parallel, tensor=tensor, pipeline=pipeline,
                                         sequence=sequence, virtual_stages=virtual, shard_group="all",
                                         expert=expert),
                        batch=replace(recipe.batch, micro=1, accumulation=AUTO),
                        activation_checkpointing=recompute, recompute_every=None,
                    )


def search(recipe: Recipe, gpus_per_node: int) -> Result:
    """Resolve, judge and estimate every candidate; keep those that fit, fastest first.

    Without a GPU model or peak (`cluster.gpu`, `cluster.peak_tflops`) there is no step
    time: the search still judges what it can, which recipes fit and how much each rank
    sends per step, and ranks by that, least traffic first (then without offload before
    with it, then least memory needed); the result says it is untimed (`Result.timed`)."""
    fitting: list[Candidate] = []
    tried = 0
    lightest: Estimate | None = None
    lightest_any: Estimate | None = None
    host_bound: Estimate | None = None
    written = resolve(recipe, detected_gpus=gpus_per_node, micro=1 if needs_fit(recipe) else None)
    timed = estimate(written).step is not None
    runs = judge(written)
    for shape in candidates(recipe, gpus_per_node):
        try:
            base = resolve(shape, detected_gpus=gpus_per_node)
        except RecipeError:
            continue
        if split_refusal(base) is not None or not runs(base):
            continue
        per_rank = base.batch.global_ // base.dims.dp
        # The bound in the module's docstring: at least p micro-batches per step. verl's
        # batch rules (DR220) read the micro-batch, so each is judged.
        # Interleaving's micro-batches come in groups of p (the module's docstring).
        group = base.dims.pipeline if base.dims.virtual_stages > 1 else 1
        plans = [variant(base, batch={"micro": d, "global_": base.batch.global_})
                 for d in range(1, per_rank // base.dims.pipeline + 1)
                 if per_rank % d == 0 and per_rank // d % group == 0]
        plans = [p for p in plans if p.batch.micro == base.batch.micro or runs(p)]
        tried += len(plans)
        for plan in plans:
            est = estimate(plan)
            if lightest_any is None or est.need < lightest_any.need:
                lightest_any = est
            if host.allowed(est) and (lightest is None or est.need < lightest.need):
                lightest = est
            said = est.verdict
            if said is not None and said.word != "fits":  # tight is not offered: it may not fit
                break  # memory grows with the micro-batch: no larger one fits either
            if not host.allowed(est):
                if host_bound is None or (host.per_node(est), est.need) < (host.per_node(host_bound),
                                                                           host_bound.need):
                    host_bound = est
                continue
            if est.step is not None or not timed:
                fitting.append(Candidate(shape, est))
    if timed:
        return Result(rank(fitting), tried, timed, lightest, lightest_any, host_bound)
    # Offload's PCIe copies and CPU step cost time no byte count here shows: after it.
    fitting.sort(key=lambda c: (round(c.traffic), c.shape.offload.enabled, c.estimate.need))
    return Result(fitting, tried, timed, lightest, lightest_any, host_bound)


def combined(results: list[Result]) -> Result:
    """Several searches (`init`'s launcher groups) as one: every fitting candidate ranked
    together (ties by the stated preferences), the closest misses of all."""
    def least(found: list[Estimate | None], key: Callable[[Estimate], tuple[float, float]]
              ) -> Estimate | None:
        return min((e for e in found if e is not None), key=key, default=None)

    ranked = [c for r in results for c in r.ranked]
    timed = all(r.timed for r in results)
    return Result(rank(ranked) if timed else ranked, sum(r.tried for r in results), timed,
                  least([r.lightest for r in results], lambda e: (e.need, 0.0)),
                  least([r.lightest_any for r in results], lambda e: (e.need, 0.0)),
                  least([r.host_bound for r in results], lambda e: (host.per_node(e), e.need)))


TIE = 0.005
"""Step times closer than this (relative) are a tie: the estimate is not that exact."""
RECOMPUTE_COST = {"none": 0, "selective": 1, "full": 2}


def parallel_dimensions(candidate: Candidate) -> int:
    """How many model-parallel dimensions the candidate uses (degrees above 1)."""
    p = candidate.estimate.plan
    d = p.dims
    return sum(degree > 1 for degree in (d.tensor, d.pipeline, d.virtual_stages, d.sequence,
                                         p.recipe.parallel.expert))


def preference(candidate: Candidate) -> tuple[int, float, bool, int, float]:
    """The stated preferences that break a tie (module docstring), best first."""
    recipe = candidate.estimate.plan.recipe
    step = candidate.estimate.step
    assert step is not None
    return (parallel_dimensions(candidate), candidate.estimate.need, recipe.offload.enabled,
            RECOMPUTE_COST[recipe.activation_checkpointing], step.communication)


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Fastest first; a group is the fastest left and every candidate within `TIE` of it,
    ordered by `preference`. A candidate whose MFU no published run reached
    (`Candidate.implausible`) comes after every plausible one, ranked among its kind."""
    plausible = [c for c in candidates if c.implausible is None]
    return _by_time(plausible) + _by_time([c for c in candidates if c.implausible is not None])


def _by_time(candidates: list[Candidate]) -> list[Candidate]:
    left = sorted(candidates, key=lambda c: (c.seconds, preference(c)))
    out: list[Candidate] = []
    start = 0
    while start < len(left):
        limit, end = left[start].seconds * (1 + TIE), start
        while end < len(left) and left[end].seconds <= limit:
            end += 1
        out += sorted(left[start:end], key=preference)
        start = end
    return out


def layout_words(est: Estimate) -> list[str]:
    """`TP 2`, `PP 4`, ...: the model-parallel degrees above 1, as the lines name them."""
    p = est.plan
    return [f"{name} {degree}" for name, degree in
            (("TP", p.dims.tensor), ("PP", p.dims.pipeline), ("VP", p.dims.virtual_stages),
             ("CP" if ring_context_parallel(p) else "SP", p.dims.sequence), ("EP", p.recipe.parallel.expert))
            if degree > 1]


def _named(est: Estimate) -> str:
    return ", ".join([est.label, *layout_words(est), f"micro {est.plan.batch.micro}",
                      f"checkpointing {est.plan.recipe.activation_checkpointing}"])


def binding(result: Result) -> str:
    """Why nothing fits (the words after "nothing fits: "), naming what binds (the GPU's
    memory, the host's, or both) with the numbers of the candidate that came closest on each:

    * some candidates fit the GPU, but each offloads more than a node's host memory: host
      memory binds; the least host-hungry of them, and the lightest the host allows;
    * none fits the GPU: GPU memory binds, and the host too where the lightest candidate
      offloads more than the node has."""
    light, any_light, bound = result.lightest, result.lightest_any, result.host_bound
    if any_light is None:
        return "no candidate was judged"
    budget = any_light.budget or 0.0

    def gpu(est: Estimate) -> str:
        return f"needs {est.need / 1e9:.1f} of {budget / 1e9:.0f} GB per GPU ({_named(est)})"

    held = f"; the lightest candidate the host holds {gpu(light)}" if light is not None else ""
    if bound is not None:
        return (f"host memory binds: the candidates that fit {budget / 1e9:.0f} GB per GPU "
                f"offload, and the one needing the least host memory needs {host.note(bound)} "
                f"({_named(bound)}, {bound.need / 1e9:.1f} GB per GPU){held}: more host memory "
                "(cluster.cpu_memory), or more GPUs")
    if host.fits(any_light) is False:
        return (f"GPU and host memory bind: the lightest candidate {gpu(any_light)}, and "
                f"with its offload it needs {host.note(any_light)}{held}")
    unchecked = f"; it needs {host.note(any_light)}" if any_light.engine.cpu else ""
    return (f"GPU memory binds: the lightest candidate {gpu(any_light)}{unchecked}: more "
            "GPUs, a smaller global batch or sequence, or a GPU with more memory")


def check_searchable(recipe: Recipe, plan_of: Estimate) -> None:
    """What the search needs to rank anything: a memory budget (what fits) and a fixed
    global batch. A step-time estimate (a GPU's peak) it uses when there is one."""
    missing = [key for key, absent in (
        ("cluster.gpu_memory (or cluster.gpu)", plan_of.plan.gpu_memory is None),
        ("a fixed batch.global", recipe.batch.global_ == AUTO)) if absent]
    if missing:
        raise DistrecipeError(f"{recipe.source}: plan --search needs {', '.join(missing)}",
                              recipe.at("cluster", "batch"))


def why(candidate: Candidate, budget: float) -> str:
    """One line: what the candidate is and what decides its place."""
    est = candidate.estimate
    step = est.step
    p = est.plan
    parts = [est.label, *layout_words(est)]
    parts += [f"micro {p.batch.micro} × accumulation {p.batch.accumulation}",
              f"checkpointing {p.recipe.activation_checkpointing}"]
    if est.engine.cpu:
        parts.append(host.note(est))
    sent = est.traffic_engine.total
    needs = f"needs {est.need / 1e9:.1f} of {budget / 1e9:.0f} GB"
    if step is None:
        return f"{', '.join(parts)}: sends {candidate.traffic / 1e9:.3g} GB per rank per step; {needs}"
    extra = "".join(f", {name} {seconds:.3g} s" for name, seconds in
                    (("bubble", step.bubble), ("offload", step.offload)) if seconds)
    flag = f"; {candidate.implausible}" if candidate.implausible else ""
    return (f"{', '.join(parts)}: {step.seconds:.3g} s/step, {step.tokens_per_s_per_gpu:,.0f} "
            f"tokens/s/GPU, MFU {step.mfu:.1%} (compute {step.compute:.3g} s at matmul size "
            f"{step.matmul:.2f}, "
            f"exposed traffic {step.exposed:.3g} s of {step.communication:.3g} s for {sent / 1e9:.3g} GB "
            f"sent{extra}); {needs}{flag}")


def as_json(candidate: Candidate, rank: int) -> dict[str, object]:
    """One candidate's figures for `plan --search --format json`: the keys it sets, its step
    time by part, its memory and traffic, in bytes and seconds."""
    est = candidate.estimate
    step = est.step
    timing: dict[str, object] = {} if step is None else {
        "seconds": step.seconds, "compute_seconds": step.compute, "bubble_seconds": step.bubble,
        "exposed_seconds": step.exposed, "exposed_by": step.exposed_by, "offload_seconds": step.offload,
        "communication_seconds": step.communication, "tokens_per_s_per_gpu": step.tokens_per_s_per_gpu,
        "mfu": step.mfu, "efficiency": step.efficiency.value, "matmul_factor": step.matmul,
        "implausible": candidate.implausible}
    return {
        "rank": rank, "label": est.label, "set": candidate.overrides(),
        "parallel_dimensions": parallel_dimensions(candidate), **timing,
        "sent_bytes": est.traffic_engine.total, "needed_bytes": est.need,
        "reserved_bytes": est.memory.reserved,
        "host_bytes_per_node": host.per_node(est), "host_fits": host.fits(est), "fits": est.fits,
        "verdict": None if est.verdict is None else est.verdict.word,
    }

