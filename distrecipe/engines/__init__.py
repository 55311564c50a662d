"""What the engines are, as facts: one module per engine, and what several share.

Everything distrecipe knows about DeepSpeed, Accelerate, the HF Trainer and verl
(key sets, defaults, file names, enumerations, what each refuses, the rules both the
emitters and lint apply) lives in this package, read from the installed engines'
sources. Emitters (`translator/`), importers, lint rules and the planner read it;
it reads nothing above itself, so a fact has one home whoever needs it.
"""

from __future__ import annotations

from typing import Literal, get_args

Engine = Literal["deepspeed", "accelerate", "verl", "hf"]
"""The engines distrecipe emits for (and the columns of the equivalence table)."""
ENGINES: tuple[Engine, ...] = get_args(Engine)

Kind = Literal["recipe", "deepspeed", "accelerate", "verl", "hf", "axolotl", "llamafactory",
               "trainjob", "rayjob", "pytorchjob", "skypilot", "trl", "openrlhf"]
"""The kinds of file distrecipe reads: a recipe, one engine's native config, the training
YAML of a tool built on the HF Trainer (Axolotl, LLaMA-Factory, TRL's `TrlParser` configs),
an OpenRLHF command line in a launch script, or a platform's job file
(a Kubeflow TrainJob, a KubeRay RayJob, a PyTorchJob, a SkyPilot task: `engines.platforms`),
which says the world of the configs its command names."""
KINDS: tuple[Kind, ...] = get_args(Kind)

TORCH_OPTIMIZERS = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD"}
"""A recipe optimizer → its `torch.optim` class name, which DeepSpeed's `optimizer.type`
and verl's FSDP `optim.optimizer` both take (DeepSpeed has no built-in SGD and
resolves `SGD` to `torch.optim.SGD`)."""

FSDP2_RESHARDS_BY_DEFAULT = True
"""FSDP2's `reshard_after_forward` default (Accelerate, the Trainer and verl alike)."""


def stage_of_reshard(reshard: object) -> int:
    """The recipe stage an FSDP2 `reshard_after_forward` value means (inverse of
    `Plan.reshard_after_forward`): resharding is ZeRO-3; anything but an explicit
    `true` keeps the gathered parameters, ZeRO-2."""
    return 3 if reshard is True else 2


