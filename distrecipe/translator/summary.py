"""`--target all`: every engine's files from one Plan, plus `summary.md` for review.

A recipe rarely suits every engine (an SFT recipe has no `rl` for verl; a Megatron
one has no Accelerate form), so a target that cannot express the recipe is skipped
and named (DR200) rather than failing the whole compile. Files that two targets
both write (the ds_config beside the Accelerate and HF outputs) must be identical;
a difference would be a bug in an emitter, never the user's problem, but for TRL's
Accelerate config under ZeRO (`TRL`), which skips TRL.
"""

from __future__ import annotations

from distrecipe.engines import accelerate, deepspeed, hf, verl
from distrecipe.errors import DistrecipeError
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import markdown_code, markdown_text
from distrecipe.translator.codes import finding
from distrecipe.translator.targets import TARGETS, EmitOptions, Output

ALL = "all"
TRL = "trl"
"""TRL's target, whose Accelerate config under ZeRO is DeepSpeed's plugin (`translator.trl.
accelerate_plan`) where `--target accelerate` may run the recipe as FSDP2 (DR238): one
file name, two texts, so `all` skips TRL there and says so (DR200)."""

USAGE = {
    deepspeed.CONFIG_FILE: f"DeepSpeed: `deepspeed SCRIPT --deepspeed {deepspeed.CONFIG_FILE}`",
    accelerate.CONFIG_FILE: f"Accelerate: `accelerate launch --config_file {accelerate.CONFIG_FILE} SCRIPT`",
    verl.OVERRIDES_FILE: f"verl: `python3 -m verl.trainer.main_ppo $(cat {verl.OVERRIDES_FILE})`",
    verl.ACTOR_FILE: "verl: the same overrides as one YAML fragment",
    hf.CONFIG_FILE: "HF Trainer: `TrainingArguments(output_dir=..., **json.load(f))`",
}


def render_all(plan: Plan, options: EmitOptions) -> Output:
    """Every target's files and findings, and a `summary.md` of them."""
    files: dict[str, str] = {}
    found: list[Finding] = []
    written: list[str] = []
    for name, render in TARGETS.items():
        if name == ALL:
            continue
        try:
            output = render(plan, options)
        except DistrecipeError as exc:
            found.append(finding("DR200", name, exc.message))
            continue
        clash = [file for file, text in output.files.items() if files.get(file, text) != text]
        if clash == [accelerate.CONFIG_FILE] and name == TRL:
            theirs = accelerate.distributed_type(plan)
            found.append(finding("DR200", name, f"its {clash[0]} is Accelerate's DeepSpeed plugin (the "
                                 "TRL config's deepspeed key runs DeepSpeed), --target accelerate's is "
                                 f"{theirs} under launch.backend {plan.backend}: compile --target trl on its "
                                 "own, or state launch.backend accelerate-deepspeed"))
            continue
        if clash:
            raise AssertionError(f"bug: targets disagree on the text of {clash[0]}")
        written.append(name)
        for file, text in output.files.items():
            files.setdefault(file, text)
        found.extend(f for f in output.findings if f not in found)
    if not written:
        raise DistrecipeError("no target can express this recipe:\n" + "\n".join(map(str, found)))
    files["summary.md"] = markdown(plan, written, files, found)
    return Output(files=files, findings=tuple(found))


def markdown(plan: Plan, targets: list[str], files: dict[str, str], found: list[Finding]) -> str:
    """The resolved numbers, the files and every finding, readable in a pull request."""
    lines = [
        f"# {markdown_text(plan.recipe.name)}: compiled by distrecipe",
        "",
        f"Source: {markdown_code(plan.recipe.source)}. Targets: {', '.join(targets)}.",
        "",
        "## Batch",
        "",
        f"micro {plan.batch.micro} × accumulation {plan.batch.accumulation} × DP {plan.dims.dp} "
        f"= global {plan.batch.global_} per optimizer step "
        f"(world {plan.dims.world} = {plan.dims.nodes} nodes × {plan.dims.gpus_per_node}; "
        f"tensor {plan.dims.tensor} × pipeline {plan.dims.pipeline} × sequence {plan.dims.sequence}).",
    ]
    if plan.recipe.rl is not None:
        n = plan.recipe.rl.rollout_n
        lines.append(
            f"verl: {plan.recipe.rl.prompts_per_step} prompts × rollout.n {n} per RL step; "
            f"ppo_mini_batch_size {plan.batch.global_ // n} prompts = {plan.batch.global_} sequences."
        )
    lines += ["", "## Files", ""]
    lines += [f"- {markdown_code(file)}: {USAGE.get(file, '')}".rstrip(": ") for file in files]
    lines += ["- `summary.md`: this file", "", "## Findings", ""]
    if found:
        lines += [f"- **{f.severity}** `{f.code}` {markdown_text(f.message)}" for f in found]
    else:
        lines.append("None: every target expresses this recipe exactly.")
    lines += ["", "## Resolved plan", "", "| key | value | from |", "|---|---|---|"]
    lines += [f"| {markdown_code(key, cell=True)} | {markdown_text(str(value))} | {markdown_text(source)} |"
              for key, value, source in plan.explain()]
    return "\n".join(lines) + "\n"
