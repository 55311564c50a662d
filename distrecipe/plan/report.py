"""One Plan's estimate: both memory views, activations, traffic, and the fit verdict.

Everything `plan` prints, writes as JSON or plots comes from an `Estimate`, so the
three outputs cannot disagree. "Fits?" compares what the GPU needs (the allocator's
reserved bytes at the worse of the backward and optimizer-step moments, plus the
CUDA context and NCCL: `allocator.py`), with its error band, with `cluster.gpu_memory`
less `cluster.headroom` (`verdict.py`: fits, tight, does not fit); under verl, the
worse of that training phase and the rollout phase (`rollout.py`), and no fit at all when
the rollout engine's share is below its floor (vLLM would not start). `compare` lists only
the variants the recipe's engine runs (`runnable.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.deepspeed import zero_optimization
from distrecipe.engines.runner import runs_fsdp2, uses_deepspeed
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.plan import traffic
from distrecipe.plan.activations import Activations, plan_activations
from distrecipe.plan.allocator import Memory, memory
from distrecipe.plan.engine import DeepSpeedZero, EngineView, plan_engine_view
from distrecipe.plan.fsdp1 import fsdp1
from distrecipe.plan.memory import FormulaView, local_params, plan_model_state
from distrecipe.plan.rollout import Rollout, rollout
from distrecipe.plan.runnable import runs
from distrecipe.plan.stages import Stage, binding
from distrecipe.plan.steptime import StepTime, step_time
from distrecipe.plan.verdict import Verdict, verdict
from distrecipe.recipe import Offload, Strategy
from distrecipe.translator.resolve import variant


@dataclass(frozen=True, slots=True)
class Estimate:
    plan: Plan
    label: str
    """What runs, in the seed's words: DDP, ZeRO-2, FSDP2 (reshard), Megatron, ... (`label`)."""
    psi: float
    formula: FormulaView
    engine: EngineView
    activations: tuple[Activations, ...]
    """Estimates by formula; the first is the one used for the verdict."""
    memory: Memory
    """Allocated at the backward and step moments, reserved, needed."""
    traffic_formula: traffic.Traffic
    traffic_engine: traffic.Traffic
    ddp_buckets: float
    step: StepTime | None
    """Seconds per step, tokens/s/GPU and MFU; None without a GPU model or peak."""
    rollout: Rollout | None = None
    """The rollout phase of verl, TRL's colocated vLLM or OpenRLHF (`rollout.py`); None for
    every other job."""
    stage: Stage | None = None
    """The pipeline stage judged (the whole model without a pipeline)."""

    @property
    def activation(self) -> float:
        """Activation bytes at their backward peak (the first formula's)."""
        return self.activations[0].peak if self.activations else 0.0

    @property
    def training_need(self) -> float:
        """The training phase: reserved by the allocator + CUDA context and NCCL, + what a
        rollout engine that is not freed keeps, + the other models kept beside (OpenRLHF's
        reference model)."""
        return self.memory.needed + (self.rollout.in_training if self.rollout else 0.0)

    @property
    def rollout_need(self) -> float | None:
        """verl's rollout phase (its engine's share + the actor's resident state), if known."""
        return None if self.rollout is None else self.rollout.need

    @property
    def need(self) -> float:
        """Per-GPU bytes the job needs: the worse of the training and (verl) rollout phases."""
        return max(self.training_need, self.rollout_need or 0.0)

    @property
    def rollout_binds(self) -> bool:
        """verl's rollout phase, not training, is what the GPU must hold."""
        return self.rollout_need is not None and self.rollout_need > self.training_need

    @property
    def budget(self) -> float | None:
        return None if self.plan.gpu_memory is None else float(self.plan.gpu_memory)

    @property
    def starved(self) -> bool:
        """verl's rollout share is below its engine's floor: vLLM refuses to start."""
        return self.rollout is not None and self.rollout.starved

    @property
    def verdict(self) -> Verdict | None:
        """`need` with its error band against the GPU less `cluster.headroom` (`verdict.py`);
        None without `cluster.gpu_memory`."""
        phase = self.rollout
        if phase is None:
            return verdict(self.plan, self.need, starved=self.starved)
        beside = sum(phase.beside.values())  # weights, counted exactly
        exact = (phase.engine or 0.0) + beside if self.rollout_binds else phase.in_training
        return verdict(self.plan, self.need, exact=exact, starved=self.starved)

    @property
    def fits(self) -> bool | None:
        """Whether launch goes ahead: the verdict is *fits* or *tight* (None: unknown)."""
        said = self.verdict
        return None if said is None else not said.refused

    @property
    def comfortable(self) -> bool:
        """The verdict is *fits*, not *tight*: what distrecipe may choose for the user."""
        said = self.verdict
        return said is not None and said.word == "fits"


def label(plan: Plan) -> str:
    """What runs, not what the recipe wrote: verl builds `zero` and `ddp` as FSDP2
    (`engines.runner.runs_fsdp2`), so those say FSDP2 with the recipe's words after it; a
    Megatron label says whether its optimizer is distributed (stage 1) or not (stage 0),
    which `plan --search` lists as two candidates."""
    offload = " + offload" if plan.recipe.offload.enabled else ""
    if plan.recipe.strategy == "megatron":  # stage 1 is Megatron's distributed optimizer, stage 0 not
        return f"Megatron ({'' if plan.stage else 'no '}distributed optimizer)" + offload
    written = "DDP" if plan.stage == 0 or plan.recipe.strategy == "ddp" else f"ZeRO-{plan.stage}"
    if not runs_fsdp2(plan):
        return written + offload
    # verl's DDP is FSDP2 on shard groups of one rank (DR205)
    how = "fsdp_size 1" if plan.stage == 0 else "reshard" if plan.reshard_after_forward else "no reshard"
    settings = fsdp1(plan)
    if settings is not None:  # asked for by the engines' own native keys (`plan/fsdp1.py`)
        how = "NO_SHARD: one rank" if settings.no_shard else how
        limit = "" if settings.limit_all_gathers or settings.no_shard else ", all-gathers unlimited"
        return f"FSDP1 ({how}{limit}; {settings.source})" + offload
    built = "" if plan.recipe.strategy == "fsdp" else f"; {written} as verl builds it"
    return f"FSDP2 ({how}{built})" + offload


def deepspeed_zero(plan: Plan) -> DeepSpeedZero | None:
    """The ZeRO knobs exactly as `compile --target deepspeed` writes them for this plan."""
    if not uses_deepspeed(plan):
        return None
    return DeepSpeedZero.from_config(zero_optimization(plan))


def estimate(plan: Plan) -> Estimate:
    """The estimate at the pipeline stage that needs the most (`stages.binding`; the whole
    model without a pipeline), so model state and activations are one rank's."""
    zero = deepspeed_zero(plan)
    local_params(plan)  # refuses a plan without model.params
    judged = []
    for st in binding(plan):
        engine = plan_engine_view(plan, zero, st.params)
        activations = plan_activations(plan, st)
        held = memory(plan, engine, activations[0] if activations else None, st.params, st)
        judged.append((held.needed, st, engine, activations, held))
    _, st, engine, activations, held = max(judged, key=lambda item: item[0])
    traffic_engine = traffic.engine(plan, zero, st.params)
    return Estimate(
        plan=plan,
        label=label(plan),
        psi=st.params,
        formula=plan_model_state(plan),
        engine=engine,
        activations=activations,
        memory=held,
        traffic_formula=traffic.formula(plan),
        traffic_engine=traffic_engine,
        ddp_buckets=traffic.ddp_buckets(plan),
        step=step_time(plan, traffic_engine, zero),
        rollout=rollout(plan, engine),
        stage=st,
    )


def variants(plan: Plan) -> list[Plan]:
    """DDP, ZeRO-1, ZeRO-2, ZeRO-3 and Megatron for the same model, batch and cluster,
    whether or not the recipe's engine runs them (the seed's table; `compare` filters).

    An FSDP plan compares FSDP2 for stages 2 and 3 (FSDP2 has no stage 1). Offload is
    dropped: it is the decision tree's last resort, not a stage.
    """
    family: Strategy = "fsdp" if plan.recipe.strategy == "fsdp" else "zero"
    rows: list[tuple[Strategy, int]] = [("ddp", 0), ("zero", 1), (family, 2), (family, 3), ("megatron", 1)]
    out = []
    for strategy, stage in rows:
        try:  # stage 0 shards nothing: no shard group
            out.append(variant(plan, strategy=strategy, stage=stage, offload=Offload(),
                               parallel={"shard_group": "all"} if stage == 0 else {}))
        except RecipeError:
            continue  # a layout this strategy cannot have (the resolver says why)
    return out


def compare(plan: Plan) -> list[Estimate]:
    """The variants the recipe's engine runs, estimated (`plan --compare`, the advice)."""
    return [estimate(variant) for variant in variants(plan) if runs(plan, variant)]
