"""Pipeline stages: which layers, which end of the model and how many micro-batches each holds.

Every pipeline engine puts the embedding on the first stage and the output head (with
the loss) on the last (Megatron-Core's `pre_process` / `post_process`, torchtitan's
`pipeline_llm` split, DeepSpeed's `PipelineModule`); a tied head keeps its own copy of
the embedding on the last stage (Megatron's `share_embeddings_and_output_weights`, whose
copies are all-reduced over the embedding group). Transformer layers split evenly
(⌈L/p⌉ on the fullest stage), or as `parallel.first_stage_layers` /
`last_stage_layers` say (`resolve.stage_layers`).

Under 1F1B pipeline rank r runs p − r forwards before its first backward (all m if a
step has fewer), so the first stage holds the most micro-batches and the last one;
under Megatron's interleaved schedule (v model chunks per rank) rank r runs
2·(p − r − 1) + (v − 1)·p chunk forwards first (`forward_backward_pipelining_with_
interleaving`). The stages that can hold the most are the first (most in flight), the
second (most in flight among the middle ones, which an uneven split may fill more) and
the last (the head and the loss): `binding` lists those, and `plan` judges the worst.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.job import Plan
from distrecipe.translator.resolve import stage_layers


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline rank's share of the model, per tensor-parallel rank."""

    rank: int
    """Pipeline rank, 0 (first) to p − 1 (last)."""
    layers: int
    """Transformer layers this rank holds (over all its model chunks)."""
    params: float
    """Parameters this rank holds: its layers, and the embedding or the head it carries."""
    embedding: bool
    head: bool
    in_flight: int
    """Model chunks whose activations are held at once (`in_flight`)."""

    @property
    def name(self) -> str:
        if self.embedding and self.head:
            return "whole model"
        return "first stage" if self.embedding else "last stage" if self.head else f"stage {self.rank}"


def in_flight(plan: Plan, rank: int) -> int:
    """Model chunks (of a v-th of the rank's layers) whose activations pipeline rank `rank`
    holds at once: 1F1B p − rank forwards (at most m); interleaved, Megatron's warm-up
    2·(p − rank − 1) + (v − 1)·p chunk forwards plus the steady state's one, at most v·m."""
    p, m, v = plan.dims.pipeline, plan.batch.accumulation, plan.dims.virtual_stages
    if v == 1:
        return min(p - rank, m)
    return min(2 * (p - rank - 1) + (v - 1) * p + 1, v * m)


def parts(plan: Plan) -> tuple[float, float, float] | None:
    """(embedding, head, one block) parameters ÷ tensor parallelism, from Ψ and the shape:
    the embedding V·h, the head V·h (a copy when tied), the blocks sharing the rest; None
    when the shape does not say (then Ψ splits evenly over the stages)."""
    m = plan.recipe.model
    if m.params is None or m.vocab is None or m.hidden_size is None or m.layers is None:
        return None
    embedding = float(m.vocab * m.hidden_size)
    head = 0.0 if m.tied_embeddings else embedding
    block = (m.params - embedding - head) / m.layers
    if block <= 0:
        return None
    t = plan.dims.tensor
    return embedding / t, (head or embedding) / t, block / t


def stage(plan: Plan, rank: int) -> Stage:
    """Pipeline rank `rank` of `plan` (rank 0 of a plan without a pipeline is the whole model)."""
    p = plan.dims.pipeline
    first, last = rank == 0, rank == p - 1
    split = parts(plan)
    if plan.recipe.model.layers is None or split is None:
        psi = float(plan.recipe.model.params or 0) / plan.dims.model_shards
        return Stage(rank, -(-(plan.recipe.model.layers or 0) // p), psi, first, last, in_flight(plan, rank))
    layers = stage_layers(plan.recipe)[rank]
    embedding, head, block = split
    if p == 1:  # the whole model: Ψ itself (a tied embedding serves both ends)
        return Stage(rank, layers, float(plan.recipe.model.params or 0) / plan.dims.tensor, True, True,
                     in_flight(plan, rank))
    params = layers * block + (embedding if first else 0.0) + (head if last else 0.0)
    return Stage(rank, layers, params, first, last, in_flight(plan, rank))


def binding(plan: Plan) -> tuple[Stage, ...]:
    """The stages that can hold the most (module docstring): first, second, last."""
    p = plan.dims.pipeline
    return tuple(stage(plan, rank) for rank in dict.fromkeys((0, min(1, p - 1), p - 1)))
