"""verl (0.9.1) actor batch rules, including those only its GPU workers check.

verl counts `data.train_batch_size` in prompts; each is rolled out `rollout.n` times,
and one optimizer step consumes `ppo_mini_batch_size × n` sequences (see
`translator/verl.py`). `validate_config` checks some divisibility before any GPU is
used; the rest are asserted inside the workers, after Ray, the rollout engine and the
model have started on the cluster. A rule runs only on numbers the file writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from distrecipe.lint.rule import Problem, Source, get, integer
from distrecipe.schemas import did_you_mean
from distrecipe.source import KeyPath

ACTOR: KeyPath = ("actor_rollout_ref", "actor")
MINI: KeyPath = (*ACTOR, "ppo_mini_batch_size")
MICRO: KeyPath = (*ACTOR, "ppo_micro_batch_size_per_gpu")
PROMPTS: KeyPath = ("data", "train_batch_size")
ULYSSES: KeyPath = (*ACTOR, "ulysses_sequence_parallel_size")
FSDP_SIZE: KeyPath = (*ACTOR, "fsdp_config", "fsdp_size")
DEPRECATED: tuple[tuple[KeyPath, str], ...] = (
    ((*ACTOR, "ppo_micro_batch_size"), "ppo_micro_batch_size_per_gpu"),
    (("critic", "ppo_micro_batch_size"), "ppo_micro_batch_size_per_gpu"),
    (("actor_rollout_ref", "rollout", "log_prob_micro_batch_size"), "log_prob_micro_batch_size_per_gpu"),
    (("actor_rollout_ref", "ref", "log_prob_micro_batch_size"), "log_prob_micro_batch_size_per_gpu"),
)


@dataclass(frozen=True, slots=True)
class Shape:
    world: int
    dp: int
    megatron: bool
    sp: int


def uses_megatron(data: dict[str, Any]) -> bool:
    """verl trains the actor with Megatron (`model_engine=megatron` or the actor's strategy)."""
    return data.get("model_engine") == "megatron" or get(data, *ACTOR, "strategy") == "megatron"


def _shape(src: Source) -> Shape | None:
    if src.world is None:
        return None
    megatron = uses_megatron(src.data)
    if megatron:
        split = [integer(src.get(*ACTOR, "megatron", f"{k}_parallel_size")) or 1
                 for k in ("tensor_model", "pipeline_model", "context")]
        model_parallel = split[0] * split[1] * split[2]
        sp = 1
    else:
        model_parallel = sp = integer(src.get(*ULYSSES)) or 1
    if src.world % model_parallel:
        return Shape(src.world, 0, megatron, sp)
    return Shape(src.world, src.world // model_parallel, megatron, sp)


def batch_rules(src: Source) -> Iterator[Problem]:
    """A verl batch that verl refuses, before the GPUs start or inside its workers.

    With P = `data.train_batch_size` prompts, n = `rollout.n`, M =
    `actor.ppo_mini_batch_size` prompts, m = `ppo_micro_batch_size_per_gpu`, N GPUs
    and DP = N / ulysses (FSDP) or N / (TP × PP × CP) (Megatron):

    * `validate_config`: P × n divisible by N (Megatron: by DP × m); P ≥ M.
    * only inside the GPU workers: P a multiple of M; M × n divisible by DP; M × n / DP
      divisible by m; N divisible by the Ulysses size and by `fsdp_size`.

    The worker-side failures cost a cluster start-up each (Ray, the rollout engine,
    the model load) before the assertion. Same fact as DR220, which `compile --target
    verl` reports for recipes.

    Fails (8 GPUs): `data.train_batch_size=60 actor.ppo_mini_batch_size=12
    rollout.n=2` (12 × 2 = 24 sequences split over 8 ranks as 3, but micro 2 does not
    divide 3). Fix: the message names the numbers; keep M × n a multiple of DP × m.
    """
    shape = _shape(src)
    prompts, mini, micro = (integer(src.get(*p)) for p in (PROMPTS, MINI, MICRO))
    n = integer(src.get("actor_rollout_ref", "rollout", "n")) or 1
    if shape is None:
        return
    for path, value in ((PROMPTS, prompts), (MINI, mini), (MICRO, micro)):
        if value is not None and value < 1:  # every rule below divides by it
            yield Problem(path, f"{'.'.join(map(str, path))} is {value}; verl needs at least 1 "
                                "(its workers divide by it)")
            return
    if shape.dp == 0:
        yield Problem(ULYSSES, f"{shape.world} GPUs are not divisible by the model-parallel size "
                               "(checked only inside the workers)")
        return
    if prompts is not None:
        minimal = shape.dp * micro if shape.megatron and micro else shape.world
        if prompts * n % minimal:
            what = f"DP {shape.dp} × micro {micro}" if shape.megatron else f"{shape.world} GPUs"
            yield Problem(PROMPTS, f"train_batch_size × rollout.n = {prompts} × {n} = {prompts * n} "
                                   f"is not divisible by {what} (validate_config refuses it)")
        elif mini and prompts % mini and prompts > mini:
            yield Problem(PROMPTS, f"data.train_batch_size {prompts} is not a whole number of mini-batches "
                                   f"of {mini} prompts (checked only inside the workers)")
        if mini is not None and prompts < mini:
            yield Problem(MINI, f"ppo_mini_batch_size {mini} > data.train_batch_size {prompts} "
                                "(validate_config refuses it)")
    if mini is not None:
        sequences = mini * n
        if sequences % shape.dp:
            yield Problem(MINI, f"ppo_mini_batch_size × rollout.n = {mini} × {n} = {sequences} sequences "
                                f"do not split over DP {shape.dp} ranks (checked only inside the workers)")
        elif micro is not None and sequences // shape.dp % micro:
            yield Problem(MICRO, f"per-rank mini-batch {sequences} / DP {shape.dp} = {sequences // shape.dp} "
                                 f"is not divisible by ppo_micro_batch_size_per_gpu {micro} "
                                 "(checked only inside the workers)")
    fsdp_size = integer(src.get(*FSDP_SIZE))
    if not shape.megatron and fsdp_size and 0 < fsdp_size < shape.world and shape.world % fsdp_size:
        yield Problem(FSDP_SIZE, f"{shape.world} GPUs are not divisible by fsdp_size {fsdp_size} "
                                 "(checked only inside the workers)")


ACTOR_STRATEGIES = ("fsdp", "fsdp2", "fsdp_turbo", "megatron", "veomni", "torchtitan")


def unknown_actor_strategy(src: Source) -> Iterator[Problem]:
    """An actor strategy verl does not have.

    `actor_rollout_ref.actor.strategy` picks the training engine: `fsdp` (FSDP1, the
    default), `fsdp2` or `fsdp_turbo` with the dp engine; `megatron`, `veomni` or
    `torchtitan` with theirs. Anything else (`deepspeed`, `FSDP2`) passes
    `validate_config` and fails only when the workers build the actor, after Ray and
    the rollout engine have started.

    Fails: `actor_rollout_ref.actor.strategy=deepspeed`. Fix: `fsdp2` (or `megatron`).
    """
    strategy = src.get(*ACTOR, "strategy")
    if isinstance(strategy, str) and strategy not in ACTOR_STRATEGIES:
        hint = did_you_mean(strategy, list(ACTOR_STRATEGIES))
        yield Problem((*ACTOR, "strategy"), f"actor strategy {strategy!r} does not exist in verl{hint} "
                      f"(one of {', '.join(ACTOR_STRATEGIES)}); it fails only when the workers start")


def deprecated_micro_batch(src: Source) -> Iterator[Problem]:
    """The deprecated global `ppo_micro_batch_size` (or `log_prob_micro_batch_size`).

    verl 0.9 sizes micro-batches per GPU (`..._per_gpu`). With both forms set,
    `validate_config` refuses the config ("set exactly once"); with only the global
    one, it passes `validate_config` but the workers never convert it and fail for
    lack of the `_per_gpu` value, after the cluster has started.

    Fails: `actor_rollout_ref.actor.ppo_micro_batch_size=64`.
    Fix: `ppo_micro_batch_size_per_gpu` = the global value / number of GPUs.
    """
    for path, replacement in DEPRECATED:
        value = src.get(*path)
        if value is None:
            continue
        both = src.get(*path[:-1], replacement) is not None
        consequence = ("both forms are set, validate_config refuses it" if both else
                       "the workers never convert it and fail without the _per_gpu value")
        dotted = ".".join(map(str, path))
        yield Problem(path, f"{dotted} is deprecated: use {replacement} ({consequence})", key=True)
