"""verl's rollout engine on the same GPUs as the actor: the second phase `fits?` must cover.

verl's hybrid engine runs generation (vLLM or SGLang) and the actor's update on every
GPU in turn, so a GPU must hold the worse of two phases (`distrecipe.engines.verl` has
the sources):

* **rollout**: the engine's fraction of the GPU's total memory (`rl.rollout_memory`,
  vLLM's `gpu_memory_utilization`, 0.5 by default), plus what the actor keeps resident
  beside it: the engine view's state at rest (fp32 parameter shards and optimizer state;
  gradients are freed), less what verl's between-phase offloads (`param_offload`,
  `optimizer_offload` in `native.verl`) move to CPU, plus the trainer's own CUDA context.
  The allocator's cache is emptied before the KV cache is woken, so no fragmentation
  share is added. This is also vLLM's start-up check: free memory ≥ fraction × total.
* **training**: today's estimate, plus the whole fraction when the engine is not freed
  (`rl.free_rollout_memory: false`, or `rollout.enable_sleep_mode=false` in `native.verl`);
  freed (verl's default), none of it is counted.

Not modelled: the rollout engine's own CUDA context and captured CUDA graphs, which
stay through training even when freed, and any check that the fraction holds the
rollout engine's weights (16-bit, over its tensor parallelism) with room for a KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.verl import FREE_CACHE_DEFAULT, PHASE_OFFLOAD, ROLLOUT_MEMORY_DEFAULT, SLEEP_MODE
from distrecipe.keys import joined
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.engine import EngineView
from distrecipe.recipe import Plan
from distrecipe.translator.native import verl_pairs

PARAM_OFFLOAD, OPTIMIZER_OFFLOAD = (joined(path) for path in PHASE_OFFLOAD)
SLEEP_MODE_KEY = joined(SLEEP_MODE)


@dataclass(frozen=True, slots=True)
class Rollout:
    """Per-GPU bytes of verl's rollout phase, and what it leaves in the training phase."""

    fraction: float
    """`rl.rollout_memory` (verl's `gpu_memory_utilization`)."""
    stated: bool
    """Whether the recipe states the fraction (else it is verl's default)."""
    freed: bool
    """Whether the rollout engine frees its memory while the actor trains."""
    engine: float | None
    """fraction × `cluster.gpu_memory`; None when the GPU's size is unknown."""
    actor: dict[str, float]
    """The actor's state resident beside the rollout engine, by part."""

    @property
    def need(self) -> float | None:
        """The rollout phase's bytes: the engine's share, the actor's state, the context."""
        return None if self.engine is None else self.engine + sum(self.actor.values()) + CONTEXT

    @property
    def in_training(self) -> float:
        """What the rollout engine still holds during the actor's update."""
        return 0.0 if self.freed or self.engine is None else self.engine


def rollout(plan: Plan, engine: EngineView) -> Rollout | None:
    """The rollout phase of a verl plan (`rl` set); None for any other recipe."""
    if plan.rl is None:
        return None
    stated = plan.rl.rollout_memory is not None
    fraction = float(plan.rl.rollout_memory) if plan.rl.rollout_memory is not None else ROLLOUT_MEMORY_DEFAULT
    freed = FREE_CACHE_DEFAULT if plan.rl.free_rollout_memory is None else plan.rl.free_rollout_memory
    if any(key == SLEEP_MODE_KEY and value is False for _, key, value in verl_pairs(plan.native.verl)):
        freed = False  # vLLM's sleep frees only its sleep-mode pool
    moved = _phase_offloaded(plan)
    actor = {part: size for part, size in engine.points["rest"].items() if size and part not in moved}
    size = None if plan.gpu_memory is None else fraction * plan.gpu_memory
    return Rollout(fraction, stated, freed, size, actor)


def _phase_offloaded(plan: Plan) -> set[str]:
    """Engine-view parts verl moves to CPU for the rollout phase, by the native overrides."""
    on = {key for _, key, value in verl_pairs(plan.native.verl) if value is True}
    moved: set[str] = set()
    if PARAM_OFFLOAD in on:
        moved |= {"parameters", "buffers"}
    if OPTIMIZER_OFFLOAD in on:
        moved.add("optimizer")
    return moved


def largest_fraction(plan: Plan, phase: Rollout) -> float | None:
    """The largest fraction, in hundredths, whose rollout phase fits `cluster.gpu_memory`
    with the actor as resident as it is; None when even a hundredth does not fit."""
    if plan.gpu_memory is None:
        return None
    room = plan.gpu_memory - sum(phase.actor.values()) - CONTEXT
    hundredths = int(room * 100 // plan.gpu_memory)
    return hundredths / 100 if hundredths >= 1 else None
