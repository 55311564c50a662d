"""The registry of compile targets: name → pure function Plan → files + findings.

Each engine module stays a pure `Plan → dict` function; this module only turns the
dicts into exact bytes (deterministic: fixed key order, trailing newline) and lists
the targets, so `compile --target NAME` has one place to look, and which of them a
job reads (`emitted_targets`: what `launch` writes, and what `plan` asks whether an
engine runs a variant of the recipe).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import to_json
from distrecipe.recipe import ProgramKind
from distrecipe.translator import deepspeed


@dataclass(frozen=True, slots=True)
class EmitOptions:
    hf_auto: bool = False
    """Keep "auto" where the Hugging Face Trainer fills values (DeepSpeed config)."""
    launched: bool = False
    """The files are for `distrecipe launch`, whose argv and environment carry `launch.*`:
    those fields are not named as left out of them."""


@dataclass(frozen=True, slots=True)
class Output:
    files: dict[str, str]
    """File name → exact text to write."""
    findings: tuple[Finding, ...] = ()


Render = Callable[[Plan, EmitOptions], Output]



def render_deepspeed(plan: Plan, options: EmitOptions) -> Output:
    """`ds_config.json`, with what no key of it carries named."""
    from distrecipe.translator.equivalence import refuse_errors  # only a few recipes need it

    found = deepspeed.findings(plan, hf_auto=options.hf_auto, launched=options.launched)
    refuse_errors(found)
    return Output(
        files={CONFIG_FILE: to_json(deepspeed.emit(plan, hf_auto=options.hf_auto))},
        findings=tuple(found),
    )


class _Registry(Mapping[str, Render]):
    """Target name → renderer, importing an engine's module only when it is asked for.

    `compile --target deepspeed` then never loads the verl or Accelerate emitters,
    which keeps the fast path fast as targets are added.
    """

    def __init__(self, paths: dict[str, str]) -> None:
        self._paths = paths

    def __getitem__(self, name: str) -> Render:
        module, _, attribute = self._paths[name].partition(":")
        render: Render = getattr(importlib.import_module(module), attribute)
        return render

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


def launch_world(plan: Plan) -> int:
    """The world a ds_config for `plan` is read at when the job starts.

    A Megatron strategy hands DeepSpeed its mpu, which reports the data-parallel ranks
    (sequence ranks included, as `sequence_parallel_size` then divides them out); every
    other strategy is launched on all ranks (AutoTP's tensor ranks included).
    """
    if plan.recipe.strategy == "megatron":
        return plan.dims.world // (plan.dims.tensor * plan.dims.pipeline)
    return plan.dims.world


def emitted_targets(plan: Plan, kind: ProgramKind | None = None) -> tuple[str, ...]:
    """Which emitters' files the backend's job reads.

    torchrun carries no engine config of its own, but a ZeRO plan's script (the
    reference trainer included) and any raw DeepSpeed script still read DeepSpeed's.
    """
    backend = plan.backend
    zero_script = backend == "torchrun" and plan.recipe.strategy == "zero"
    if backend == "deepspeed" or kind == "deepspeed" or zero_script:
        return ("deepspeed",)
    if backend in ("accelerate", "accelerate-deepspeed"):
        return ("accelerate",)  # on the DeepSpeed path it also writes the ds_config it names
    if backend == "verl":
        return ("verl",)
    if backend == "openrlhf":
        return ("openrlhf",)
    return ()


TARGETS: Mapping[str, Render] = _Registry({
    "deepspeed": "distrecipe.translator.targets:render_deepspeed",
    "accelerate": "distrecipe.translator.accelerate:render",
    "verl": "distrecipe.translator.verl:render",
    "hf": "distrecipe.translator.hf:render",
    "trl": "distrecipe.translator.trl:render",
    "openrlhf": "distrecipe.translator.openrlhf:render",
    "all": "distrecipe.translator.summary:render_all",
})
