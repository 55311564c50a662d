"""Which engine holds a plan's model state: one answer for `plan` and the head rules.

The recipe names a strategy, but what runs it depends on the launcher too: `zero` is
DeepSpeed, except under verl, whose emitter builds FSDP2 for every strategy but
`megatron` (`engines.verl.actor_engine`); `ddp` is torch DDP, except when DeepSpeed's
launcher runs it (DeepSpeed stage 0) or verl does (FSDP2 on one-rank shard groups).
OpenRLHF's launcher runs `zero` as DeepSpeed, as its strategy builds it. Which launchers
start a trainer's own Ray driver (verl's, OpenRLHF's) is here too, for `launch` and its
SLURM, SkyPilot and Kubernetes files alike.
"""

from __future__ import annotations

from distrecipe.engines.openrlhf import PPO_ENTRY
from distrecipe.engines.verl import ENTRY as VERL_ENTRY
from distrecipe.engines.verl import actor_engine
from distrecipe.job import Plan

DEEPSPEED_BACKENDS = ("deepspeed", "accelerate-deepspeed")
"""Launchers that run a `ddp` recipe through DeepSpeed's engine (stage 0)."""
RAY_TRAINERS: dict[str, tuple[str, str]] = {"verl": ("verl", VERL_ENTRY), "openrlhf": ("OpenRLHF", PPO_ENTRY)}
"""Launchers whose program is a trainer's own Ray driver → (its name, its entry module): one
node starts a local Ray cluster, several join the one `RAY_ADDRESS` names (`launch.launchers.ray`)."""


def runs_fsdp2(plan: Plan) -> bool:
    """Whether torch FSDP2 holds the model state: `fsdp`, and `zero` and `ddp` under verl,
    whose emitter builds that actor with FSDP2 (`engines.verl.actor_engine`); DDP there
    is FSDP2 on shard groups of one rank, not torch DDP: fp32 parameters and gradients,
    no bucket copy. `fsdp_version: 1` holds FSDP2's model state too (`plan.fsdp1`)."""
    return plan.recipe.strategy == "fsdp" or (plan.backend == "verl" and actor_engine(plan) == "fsdp2")


def uses_deepspeed(plan: Plan) -> bool:
    """Whether DeepSpeed's engine runs the plan: `zero` (except under verl: `runs_fsdp2`),
    and `ddp` launched by DeepSpeed."""
    return (plan.recipe.strategy == "zero" and not runs_fsdp2(plan)) or (
        plan.recipe.strategy == "ddp" and plan.backend in DEEPSPEED_BACKENDS)
