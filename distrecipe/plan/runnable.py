"""Whether the recipe's engine runs a variant of it as `plan` models the variant.

`plan --compare` and the advice price other strategies, stages, offloads, micro-batches
and recompute modes; each is worth naming only if the job the recipe launches can run it.
The emitters already say what each engine cannot express, so they are asked rather than
a list kept here: the variant is compiled for every target its job reads under the
recipe's launcher (`translator.targets.emitted_targets`, verl for an `rl` recipe). An
error finding (DR208, DR220, ...) means the engine refuses it; a warning the recipe's own
compile does not raise means the engine would run something else than the variant
`plan` estimated (ZeRO-1 under verl is FSDP2 stage 2, DR201; DDP is FSDP2 with
`fsdp_size=1`, DR205; optimizer-only offload under FSDP2 moves the parameters too,
DR202; selective recompute under verl recomputes whole blocks, DR207). Either way the
variant is not offered. A launcher whose job reads no emitted file (torchrun with FSDP2
or DDP: the user's script) has nothing to refuse. With `launch.program_kind` stated, the
files are those that kind reads, and a variant the program cannot carry
(`translator.programs.refusal`: context parallelism for a Trainer under torchrun,
Ulysses for a plain torchrun script) is not offered either; and what the program reads
(`KIND_TARGET`: the Trainer's TrainingArguments, the Accelerate or DeepSpeed file) is
judged as `compile --strict` judges it: a warning the recipe's own compile for that
target lacks refuses the variant, the ones `MODELLED` names included (selective
recompute under the Trainer is whole blocks, DR207; Accelerate's context parallel is
ring attention, DR206). So every variant offered for a kind compiles with `--strict`
wherever the recipe does.
"""

from __future__ import annotations

from collections.abc import Callable

from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.recipe import AUTO, ProgramKind
from distrecipe.translator.programs import refusal
from distrecipe.translator.targets import TARGETS, EmitOptions, emitted_targets

MODELLED = frozenset({"DR206", "DR222"})
"""Warnings that name a mapping `plan` already models: `parallel.sequence` runs as the
engine's own kind (ring attention under torchtitan and Accelerate, Ulysses under DeepSpeed
and verl, Megatron's context parallel: `activations.ring_context_parallel`); a setting the
file leaves to the training script (DR222: recompute under raw DeepSpeed) runs as stated
once the script does it, which the finding tells the user."""


KIND_TARGET: dict[ProgramKind, str] = {"hf": "hf", "accelerate": "accelerate", "deepspeed": "deepspeed",
                                       "verl": "verl", "openrlhf": "openrlhf"}
"""The `compile --target` whose file each program kind reads itself (a torchrun script reads
the plan through `distrecipe.api`, and a ZeRO plan's ds_config: `emitted_targets`)."""


def _warnings(plan: Plan, target: str, strict: bool = False) -> frozenset[str] | None:
    """The warning codes `target` raises compiling `plan` that `plan` does not model (all of
    them when `strict`, as `compile --strict` counts them); None when it refuses it."""
    try:
        output = TARGETS[target](plan, EmitOptions())
    except RecipeError:
        return None
    found = frozenset(f.code for f in output.findings if f.severity == "warning")
    return found if strict else found - MODELLED


def kind_targets(plan: Plan, kind: ProgramKind | None) -> tuple[str, ...]:
    """The targets whose files the job reads (`emitted_targets`), and the kind's own."""
    own = () if kind is None or kind not in KIND_TARGET else (KIND_TARGET[kind],)
    return tuple(dict.fromkeys((*emitted_targets(plan, kind), *own)))


def runs(recipe: Plan, variant: Plan) -> bool:
    """The variant compiles for its job's targets with no error and no warning the
    recipe's own compile lacks, and the recipe's program kind, when stated, carries it."""
    return judge(recipe)(variant)


def judge(recipe: Plan) -> Callable[[Plan], bool]:
    """`runs(recipe, ·)` with the recipe's own compile done once per target: `plan
    --search` asks it of every candidate."""
    own: dict[str, frozenset[str]] = {}
    kind = recipe.recipe.launch.program_kind
    program = None if kind == AUTO else kind  # a raw DeepSpeed program reads a ds_config under torchrun
    strict = program is not None  # what the program reads is judged as `compile --strict` does

    def own_warnings(target: str) -> frozenset[str]:
        # Without a kind, a target the recipe's own job does not read has no baseline; with
        # one, the baseline is `compile --target` of the recipe itself.
        if not strict and target not in emitted_targets(recipe, program):
            return frozenset()
        if target not in own:
            own[target] = _warnings(recipe, target, strict) or frozenset()
        return own[target]

    def variant_runs(variant: Plan) -> bool:
        if program is not None and refusal(variant, program) is not None:
            return False
        for target in kind_targets(variant, program):
            found = _warnings(variant, target, strict)
            if found is None or found - own_warnings(target):
                return False
        return True

    return variant_runs
