"""Whether a kind of training program carries a plan's parallelism under its launcher.

A launcher starts a world of ranks; how they split the model and the batch is the
program's. A tensor or sequence degree the program never reads runs as data
parallelism over every rank, so the global batch grows by that factor with no error
anywhere. `launch` refuses such a plan, and `plan --search` with a program kind offers
only what that kind runs. From the installed programs' own sources:

* `hf` (transformers' Trainer): no Megatron, pipeline, token-packed micro-batches or
  DeepSpeed Ulysses (the emitter's DR208). Tensor and context parallelism beside FSDP2
  reach it only through the Accelerator's `parallelism_config`, which the Trainer takes
  from `accelerate launch`'s config (`ACCELERATE_USE_PARALLELISM_CONFIG`): no
  TrainingArguments flag carries them, so under another launcher they are refused.
  AutoTP beside ZeRO is carried (`Trainer.get_tp_size` reads `tensor_parallel.autotp_size`).
* `torchrun` (a plain script reading `distrecipe.api`): DeepSpeed's Ulysses groups and
  AutoTP are built by `deepspeed.initialize`, which such a script does not call, so ZeRO
  with sequence or tensor parallelism is refused; under FSDP2 the script builds its own
  mesh from the plan (torchtitan's layout), which is what `plan` models.
* `deepspeed` (a raw `deepspeed.initialize` script): no pipeline outside Megatron (DeepSpeed
  pipelines only a `PipelineModule` the script builds; the ds_config has no degree).
* `deepspeed`, `accelerate`, `verl`, `openrlhf`: their launcher's config file carries the layout; the
  emitters for the files they read say what they cannot express (`plan.runnable`).

It asks the Trainer's emitter what it refuses and `targets.emitted_targets` what a kind
reads, so it lives beside them in the translator, below `plan` and `launch`, which ask it.
"""

from __future__ import annotations

from distrecipe.engines.hf import uses_fsdp
from distrecipe.errors import Refusal
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.recipe import Backend, ProgramKind
from distrecipe.translator import hf
from distrecipe.translator.codes import finding
from distrecipe.translator.targets import emitted_targets

COMPATIBLE: dict[ProgramKind, tuple[Backend, ...]] = {
    "hf": ("deepspeed", "torchrun", "accelerate", "accelerate-deepspeed"),
    "accelerate": ("accelerate", "accelerate-deepspeed"),
    "deepspeed": ("deepspeed", "torchrun"),
    "torchrun": ("deepspeed", "torchrun", "accelerate", "accelerate-deepspeed"),
    "verl": ("verl",),
    "openrlhf": ("openrlhf",),
}
"""Launchers that can hand each kind what it reads (an Accelerate script learns its
engine only from `accelerate launch`; verl and OpenRLHF run only under their own entry points)."""

ACCELERATE: tuple[Backend, ...] = ("accelerate", "accelerate-deepspeed")


def refusal(plan: Plan, kind: ProgramKind) -> Refusal | None:
    """The first thing `kind`'s program cannot carry of `plan` under its launcher, naming the
    one recipe key to change (`keys`), or None."""
    if plan.backend not in COMPATIBLE[kind]:
        return _refusal("launch.backend", f"program kind {kind} cannot run under launch.backend "
                        f"{plan.backend}: use one of {', '.join(COMPATIBLE[kind])}")
    if kind == "hf":
        return _trainer(plan)
    if kind == "deepspeed" and plan.dims.pipeline > 1 and plan.recipe.strategy != "megatron":
        return _refusal("parallel.pipeline", f"parallel.pipeline {plan.dims.pipeline}: a raw DeepSpeed "
                        "program pipelines only a PipelineModule it builds itself; no ds_config key carries "
                        "the degree")
    if kind == "torchrun" and plan.recipe.strategy == "zero":
        return _lost(plan, "a torchrun program (no deepspeed.initialize) builds no DeepSpeed "
                     "Ulysses or AutoTP groups")
    return None


def _refusal(key: str, message: str) -> Refusal:
    return Refusal(message, keys=(key,))


def _trainer(plan: Plan) -> Refusal | None:
    errors = [f for f in hf.findings(plan) if f.severity == "error"]
    if errors:
        why = "; ".join(f"{f.code} {f.message}" for f in errors)
        return _refusal(_first_key(plan, errors[0].message), why)
    if uses_fsdp(plan) and plan.backend not in ACCELERATE:
        return _lost(plan, "the HF Trainer takes tensor and context parallelism only from "
                     "`accelerate launch`'s parallelism_config (launch.backend accelerate), no "
                     "TrainingArguments flag")
    return None


def _lost(plan: Plan, why: str) -> Refusal | None:
    """A refusal naming the tensor or sequence degree the program would drop, and the batch it
    would run instead; None when both are 1."""
    d = plan.dims
    degrees = (("parallel.sequence", d.sequence), ("parallel.tensor", d.tensor))
    lost = [(key, degree) for key, degree in degrees if degree > 1]
    if not lost:
        return None
    key, degree = lost[0]
    ranks = d.world // d.pipeline
    runs = ""
    if not plan.script_batch:
        b = plan.batch
        runs = (f"; it would run DP {ranks}, global {b.micro} × {b.accumulation} × {ranks} = "
                f"{b.micro * b.accumulation * ranks}, not {b.global_}")
    return _refusal(key, f"{key} {degree}: {why}{runs}")


def _first_key(plan: Plan, message: str) -> str:
    """The recipe key a finding's message opens with, else the parallel degree or strategy at fault."""
    word = message.split(" ", 1)[0]
    if word in plan.recipe.where:
        return word
    if plan.recipe.strategy == "megatron":
        return "strategy"
    d = plan.dims
    for key, degree in (("parallel.pipeline", d.pipeline), ("parallel.sequence", d.sequence),
                        ("parallel.tensor", d.tensor)):
        if degree > 1:
            return key
    return "strategy"


def script_duties(plan: Plan, kind: ProgramKind) -> list[Finding]:
    """What the program must do itself because nothing it is handed carries it: a torchrun
    program that reads no emitted file (FSDP2, DDP, Megatron) gets the recompute mode only
    in the plan (`DISTRECIPE_PLAN`), so it checkpoints its own blocks (DR222). The other
    kinds are handed it (the Trainer's `--gradient_checkpointing` or `fsdp_config`,
    Accelerate's `fsdp_activation_checkpointing`, verl's `enable_gradient_checkpointing`)
    or their emitter names it (DR222 for a ds_config, Accelerate off FSDP)."""
    mode = plan.recipe.activation_checkpointing
    if kind != "torchrun" or mode == "none" or emitted_targets(plan, kind):
        return []
    return [finding("DR222", "torchrun", f"activation_checkpointing {mode}: the program reads it from "
                    "the plan (DISTRECIPE_PLAN) and must checkpoint its own blocks")]
