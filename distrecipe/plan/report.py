"""One Plan's estimate: both memory views, activations, traffic, and the fit verdict.

Everything `plan` prints, writes as JSON or plots comes from an `Estimate`, so the
three outputs cannot disagree. "Fits?" uses the engine view's peak plus activations
and the ZeRO-3/FSDP working set, against the GPU's memory less a stated headroom.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from distrecipe.engines.deepspeed import zero_optimization
from distrecipe.plan import traffic
from distrecipe.plan.activations import Activations, plan_activations, working_set
from distrecipe.plan.engine import DeepSpeedZero, EngineView, plan_engine_view, uses_deepspeed
from distrecipe.plan.memory import FormulaView, local_params, plan_model_state
from distrecipe.recipe import Offload, Plan, Strategy

HEADROOM = 0.10
"""Share of GPU memory kept free for the CUDA context, NCCL buffers and allocator
fragmentation; a plan that needs more than the rest does not fit."""


@dataclass(frozen=True, slots=True)
class Estimate:
    plan: Plan
    label: str
    """The strategy in the seed's words: DDP, ZeRO-2, FSDP2 (reshard), Megatron, ..."""
    psi: float
    formula: FormulaView
    engine: EngineView
    activations: tuple[Activations, ...]
    """Estimates by formula; the first is the one used for the verdict."""
    working_set: float
    traffic_formula: traffic.Traffic
    traffic_engine: traffic.Traffic
    ddp_buckets: float

    @property
    def activation(self) -> float:
        return self.activations[0].total if self.activations else 0.0

    @property
    def need(self) -> float:
        """Per-GPU bytes at the peak: engine view + activations + gathered working set."""
        return self.engine.peak + self.activation + self.working_set

    @property
    def budget(self) -> float | None:
        memory = self.plan.gpu_memory
        return None if memory is None else memory * (1 - HEADROOM)

    @property
    def fits(self) -> bool | None:
        return None if self.budget is None else self.need <= self.budget


def label(plan: Plan) -> str:
    offload = " + offload" if plan.offload.enabled else ""
    if plan.strategy == "megatron":
        name = "Megatron"
    elif plan.strategy == "fsdp":
        name = f"FSDP2 ({'reshard' if plan.reshard_after_forward else 'no reshard'})"
    elif plan.stage == 0 or plan.strategy == "ddp":
        name = "DDP"
    else:
        name = f"ZeRO-{plan.stage}"
    return name + offload


def deepspeed_zero(plan: Plan) -> DeepSpeedZero | None:
    """The ZeRO knobs exactly as `compile --target deepspeed` writes them for this plan."""
    if not uses_deepspeed(plan):
        return None
    return DeepSpeedZero.from_config(zero_optimization(plan))


def estimate(plan: Plan) -> Estimate:
    zero = deepspeed_zero(plan)
    reshard = plan.reshard_after_forward and plan.strategy in ("zero", "fsdp")
    return Estimate(
        plan=plan,
        label=label(plan),
        psi=local_params(plan),
        formula=plan_model_state(plan),
        engine=plan_engine_view(plan, zero),
        activations=plan_activations(plan),
        working_set=working_set(plan, reshard=reshard),
        traffic_formula=traffic.formula(plan),
        traffic_engine=traffic.engine(plan, zero),
        ddp_buckets=traffic.ddp_buckets(plan),
    )


def variants(plan: Plan) -> list[Plan]:
    """DDP, ZeRO-1, ZeRO-2, ZeRO-3 and Megatron for the same model, batch and cluster.

    An FSDP plan compares FSDP2 for stages 2 and 3 (FSDP2 has no stage 1). Offload is
    dropped: it is the decision tree's last resort, not a stage.
    """
    family: Strategy = "fsdp" if plan.strategy == "fsdp" else "zero"
    base = replace(plan, offload=Offload())
    return [
        replace(base, strategy="ddp", stage=0),
        replace(base, strategy="zero", stage=1),
        replace(base, strategy=family, stage=2),
        replace(base, strategy=family, stage=3),
        replace(base, strategy="megatron", stage=1),
    ]


def compare(plan: Plan) -> list[Estimate]:
    return [estimate(variant) for variant in variants(plan)]
