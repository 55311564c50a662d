"""The formula view: the seed's ZeRO table as data, per GPU, in bytes.

Mixed-precision Adam keeps 16 bytes per parameter Ψ: 2 (16-bit parameters) + 2
(16-bit gradients) + 12 (fp32 master weights, Adam's m and v). Each ZeRO stage
divides one more of the three by the N data-parallel ranks:

| strategy                          | not sharded | sharded ÷ N | N = 32, Ψ = 8B |
|-----------------------------------|-------------|-------------|----------------|
| DDP (stage 0)                     | 16Ψ         |             | 128 GB         |
| ZeRO-1 (optimizer state)          | 4Ψ          | 12Ψ/N       | 35 GB          |
| ZeRO-2 (+ gradients)              | 2Ψ          | 14Ψ/N       | 19.5 GB        |
| ZeRO-3 / FSDP (+ parameters)      |             | 16Ψ/N       | 4 GB           |
| Megatron distributed optimizer    | 6Ψ          | 12Ψ/N       | 51 GB          |
| Megatron without it (stage 0)     | 18Ψ         |             | 144 GB         |

Megatron is ZeRO-1 with fp32 gradients (4 bytes, not 2); without the distributed optimizer
(`stage: 0`) it shards nothing. Ψ counts every parameter, a mixture of experts' every
expert; expert parallelism (`parallel.expert`) divides the routed experts among ranks, so
what is not sharded covers only a rank's own experts. Pure fp32 training has no
master copy: 4 + 4 + 8 bytes, the same 16 but split differently; nor has pure bf16
(`optimizer.master_weights: bf16`): 2 + 2 + 4 bytes with bf16 moments (torch's optimizers
over bf16 parameters, DeepSpeed's `bf16_optimizer_states`), 2 + 2 + 8 with fp32 ones
(DeepSpeed's on the host). Tensor and pipeline
parallelism divide Ψ before any of this; a shard group smaller than N shards within
the group only. This is the paper's steady state; `engine.py` adds what engines hold
beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.runner import uses_deepspeed
from distrecipe.errors import Position, RecipeError
from distrecipe.job import Plan, gradient_bytes
from distrecipe.model_shapes import inventory
from distrecipe.recipe import PRECISION_BYTES, Precision, Strategy


@dataclass(frozen=True, slots=True)
class Term:
    """One part of model state: its bytes per parameter and whether this stage shards it."""

    name: str
    bytes_per_param: int
    sharded: bool


@dataclass(frozen=True, slots=True)
class FormulaView:
    """Model state per GPU (and per rank on the host, when offloaded), in bytes."""

    formula: str
    """The seed's expression, e.g. `2Ψ + 14Ψ/N`."""
    gpu: dict[str, float]
    cpu: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.gpu.values())


def terms(strategy: Strategy, stage: int, precision: Precision, *, pure: bool = False,
          moments: int = 8) -> tuple[Term, Term, Term]:
    """Bytes per parameter of parameters, gradients, optimizer, and which are sharded;
    `pure`: no fp32 master copy (pure bf16), `moments`: bytes of Adam's m and v."""
    lp = PRECISION_BYTES[precision]
    grads = gradient_bytes(strategy, precision)
    optimizer = moments if precision == "fp32" or pure else 4 + moments
    return (
        Term("parameters", lp, stage >= 3),
        Term("gradients", grads, stage >= 2),
        Term("optimizer", optimizer, stage >= 1),
    )


def formula(strategy: Strategy, stage: int, precision: Precision, *, pure: bool = False,
            moments: int = 8) -> str:
    """The table's expression: unsharded bytes·Ψ + sharded bytes·Ψ/N."""
    parts = terms(strategy, stage, precision, pure=pure, moments=moments)
    whole = sum(t.bytes_per_param for t in parts if not t.sharded)
    split = sum(t.bytes_per_param for t in parts if t.sharded)
    shown = [f"{whole}Ψ"] if whole else []
    shown += [f"{split}Ψ/N"] if split else []
    return " + ".join(shown)


def model_state(
    psi: float,
    n: int,
    strategy: Strategy,
    stage: int,
    precision: Precision,
    *,
    offload_optimizer: bool = False,
    offload_params: bool = False,
    held: float | None = None,
    pure: bool = False,
    moments: int = 8,
) -> FormulaView:
    """Per-GPU model state for Ψ parameters (already divided by TP × PP) over N shards.

    Offload moves the optimizer state (ZeRO-Offload) and, at stage 3 only, the
    parameter shard (ZeRO-Infinity) to host memory: those bytes appear under `cpu`.
    `held` is what one rank keeps of what is not sharded when expert parallelism leaves
    it a part of the experts (`held_params`); the sharded terms stay Ψ/N, as each
    rank's experts are sharded over the N/ep ranks holding the same ones.
    """
    gpu: dict[str, float] = {}
    cpu: dict[str, float] = {}
    whole = psi if held is None else held
    for term in terms(strategy, stage, precision, pure=pure, moments=moments):
        size = term.bytes_per_param * (psi / n if term.sharded else whole)
        moved = (term.name == "optimizer" and offload_optimizer) or (
            term.name == "parameters" and offload_params and term.sharded
        )
        (cpu if moved else gpu)[term.name] = size
    return FormulaView(formula(strategy, stage, precision, pure=pure, moments=moments), gpu, cpu)


def local_params(plan: Plan) -> float:
    """Ψ one rank's model replica holds: tensor and pipeline parallel divide the model."""
    if plan.recipe.model.params is None:
        raise RecipeError("plan needs model.params (or model.hf_config, or the model's shape)",
                          Position(plan.recipe.source, 1, 1), keys=("model.params", "model.hf_config"))
    return plan.recipe.model.params / plan.dims.model_shards


def held_params(plan: Plan) -> float:
    """Ψ one rank holds of its replica's share under expert parallelism: `local_params` less
    the routed experts that live on the other ep − 1 ranks of its expert group (Megatron's
    `expert_model_parallel_size`, the experts' tensor parallelism the model's)."""
    ep = plan.recipe.parallel.expert
    psi = local_params(plan)
    found = inventory(plan.recipe.model) if ep > 1 else None
    if found is None:
        return psi
    return psi - found.routed * (1 - 1 / ep) / plan.dims.model_shards


def shard_ranks(plan: Plan) -> int:
    """Ranks one shard of model state spans: the shard group times the sequence degree.

    Context/sequence-parallel ranks hold the same parameters and each computes gradients
    on its share of the tokens, so every engine shards and reduces over them too:
    torchtitan's and Accelerate's FSDP2 mesh `dp_shard_cp` (`parallelism_config.py`),
    DeepSpeed's `seq_data_parallel_group` under Ulysses (`runtime/engine.py`, the ZeRO
    optimizers' `dp_process_group`), Megatron's data-parallel group
    `with_context_parallel=True`.
    """
    return plan.dims.shard_group * plan.dims.sequence


def reduce_ranks(plan: Plan) -> int:
    """Ranks gradients are reduced over: data-parallel × sequence (see `shard_ranks`)."""
    return plan.dims.dp * plan.dims.sequence


def pure_bf16(plan: Plan) -> bool:
    """Whether the optimizer updates the bf16 parameters themselves (`optimizer.master_weights`)."""
    return plan.recipe.optimizer is not None and plan.recipe.optimizer.master_weights == "bf16"


def moment_bytes(plan: Plan) -> int:
    """Bytes per parameter of Adam's m and v: 4 with `optimizer.state_dtype: bf16`, and under
    pure bf16 where a torch optimizer runs (it keeps them in the parameters' dtype); else 8.
    DeepSpeed's pure bf16 keeps fp32 moments unless `bf16_optimizer_states`."""
    opt = plan.recipe.optimizer
    if opt is not None and opt.state_dtype == "bf16":
        return 4
    return 4 if pure_bf16(plan) and not uses_deepspeed(plan) else 8


def plan_model_state(plan: Plan) -> FormulaView:
    """The formula view of a Plan: shards span `shard_ranks`, not always all N."""
    return model_state(
        local_params(plan),
        shard_ranks(plan),
        plan.recipe.strategy,
        plan.stage,
        plan.precision,
        offload_optimizer=plan.recipe.offload.optimizer != "none",
        offload_params=plan.recipe.offload.params != "none",
        held=held_params(plan) if plan.recipe.parallel.expert > 1 else None,
        pure=pure_bf16(plan),
        moments=moment_bytes(plan),
    )
