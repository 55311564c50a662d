"""Plan → a TRL config (`trl grpo` / `trl sft --config FILE`) and the Accelerate config
that starts it at the recipe's world.

TRL's trainers are the HF Trainer with a config that extends `TrainingArguments`, so the
config holds the Trainer's kwargs (`translator.hf.emit`, the same batch, precision and
schedule) and, for a recipe with `rl`, GRPO's: `num_generations` is `rl.rollout_n`, and
GRPOConfig's generation batch holds `rl.prompts_per_step` whole groups, verl's prompts per
step (`generation_batch_size`, written where it is not TRL's default, the global batch).
`rl.rollout_mode` is `vllm_mode`; colocated, `rl.rollout_memory` is vLLM's fraction
(`vllm_gpu_memory_utilization`) and `rl.free_rollout_memory` its sleep mode, which a
server's config cannot say (named, DR222). TRL's shipped Accelerate configs say
`num_processes: 8` whatever the job has; the one written here says the recipe's world
(`translator.accelerate`), and `compile` lints both files with TRL's and Accelerate's
tables before writing them. Under ZeRO that config is Accelerate's DeepSpeed plugin with the
ds_config the TRL config names, whatever launcher the recipe states (`accelerate_plan`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import yaml

from distrecipe.engines import trl as trl_engine
from distrecipe.engines.accelerate import CONFIG_FILE as ACCELERATE_FILE
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import one_line
from distrecipe.translator import accelerate, carry, hf
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import refuse_errors
from distrecipe.translator.native import merge
from distrecipe.translator.resolve import nearest_multiples
from distrecipe.translator.targets import EmitOptions, Output

TARGET = "trl"
GRPO_FILE = "grpo_config.yaml"
SFT_FILE = "sft_config.yaml"


def command(plan: Plan) -> str:
    """The TRL command that reads the config: `grpo` for a recipe with `rl`, else `sft`."""
    return "grpo" if plan.recipe.rl is not None else "sft"


def emit(plan: Plan) -> dict[str, Any]:
    """The config's keys: the Trainer's kwargs (its `deepspeed` key names the ds_config the
    Accelerate config names too, `native.hf` merged in), GRPO's for a recipe with `rl`, and
    the recipe's `native.trl` (TRL's own keys) merged in last."""
    native = plan.recipe.native.trl
    written = merge({**hf.emit(plan), **grpo(plan)}, native)
    if native.get("steps_per_generation") is not None and "generation_batch_size" not in native:
        # The same generation batch in steps (held to the recipe at resolve): GRPOConfig
        # refuses both keys together.
        written.pop("generation_batch_size", None)
    return dict(sorted(written.items()))


def grpo(plan: Plan) -> dict[str, Any]:
    """GRPOConfig's keys the recipe's `rl` decides (none without `rl`): the config's, and
    the flags `launch` hands a TRL GRPO script."""
    kwargs: dict[str, Any] = {}
    rl = plan.recipe.rl
    if rl is not None:
        kwargs["num_generations"] = rl.rollout_n
        generation = rl.prompts_per_step * rl.rollout_n
        if generation != plan.batch.global_:
            kwargs["generation_batch_size"] = generation
        mode = vllm_mode(plan)
        if mode is not None:
            kwargs.update(use_vllm=True, vllm_mode=mode)
        if mode == "colocate" and rl.rollout_memory is not None:
            kwargs["vllm_gpu_memory_utilization"] = rl.rollout_memory
        if mode == "colocate" and rl.free_rollout_memory is not None:
            kwargs["vllm_enable_sleep_mode"] = rl.free_rollout_memory
    return kwargs


def vllm_mode(plan: Plan) -> str | None:
    """GRPOConfig's `vllm_mode` for the plan (`engines.trl.vllm_mode`)."""
    return trl_engine.vllm_mode(plan.recipe.rl)


def generation_refusal(plan: Plan) -> str | None:
    """GRPOConfig's `__post_init__` rule for the generation batch (`rl.prompts_per_step ×
    rl.rollout_n` sequences): a whole number of per-device batches over the world, with the
    nearest prompts per step that are; None when it holds. Its other rule, whole groups of
    `num_generations`, holds by construction."""
    rl = plan.recipe.rl
    if rl is None:
        return None
    generation, per_step = rl.prompts_per_step * rl.rollout_n, plan.batch.micro * plan.dims.world
    if generation % per_step == 0:
        return None
    step = math.lcm(per_step, rl.rollout_n) // rl.rollout_n
    nearest = nearest_multiples(rl.prompts_per_step, step)
    return (f"GRPOConfig's generation_batch_size = rl.prompts_per_step × rl.rollout_n = "
            f"{rl.prompts_per_step} × {rl.rollout_n} = {generation} must be divisible by "
            f"per_device_train_batch_size × world = "
            f"{plan.batch.micro} × {plan.dims.world} = {per_step}; nearest valid rl.prompts_per_step: "
            f"{' or '.join(str(p) for p in nearest)}")


def accelerate_plan(plan: Plan) -> Plan:
    """The plan TRL's Accelerate config is written for: under ZeRO, Accelerate's DeepSpeed
    plugin (`accelerate-deepspeed`) whatever `launch.backend` says. `trl` starts only under
    `accelerate launch`, and the TRL config's `deepspeed` key (the Trainer's) makes
    `TrainingArguments` build a `DeepSpeedPlugin` whatever Accelerate's config says, so an
    FSDP or DDP config beside it would name an engine that does not run (DR238's FSDP2)."""
    if plan.recipe.strategy == "zero" and plan.backend != "accelerate-deepspeed":
        return replace(plan, backend="accelerate-deepspeed")
    return plan


def launcher_findings(plan: Plan, *, launched: bool) -> list[Finding]:
    """A stated `launch.backend` the TRL files do not follow under ZeRO (`accelerate_plan`),
    named: `compile` writes DeepSpeed's plugin config, not the launcher the recipe says."""
    stated = "launch.backend" in plan.recipe.where
    if launched or not stated or accelerate_plan(plan) is plan:
        return []
    return [finding("DR234", TARGET, f"launch.backend {plan.backend}{carry.as_written('launch.backend')}: "
                                     "`trl` starts under `accelerate launch`, and the config's deepspeed key "
                                     "runs DeepSpeed, so accelerate_config.yaml is its DeepSpeed plugin "
                                     "(launch.backend accelerate-deepspeed)")]


def findings(plan: Plan, *, launched: bool = False) -> list[Finding]:
    """The Trainer's (a TRL trainer is one) and the Accelerate config's rules, what neither
    the TRL config nor the Accelerate config (nor the ds_config under ZeRO) carries (the carry
    table over the files written together), and GRPO's own refusal: a group of one has no
    advantage (`GRPOConfig.__post_init__`), where verl's PPO takes `rollout.n` 1."""
    columns: tuple[carry.Column, ...] = ("trl", "accelerate", "deepspeed") if plan.recipe.strategy == "zero" \
        else ("trl", "accelerate")
    return (hf.findings(plan, launched=launched, carried=False)
            + accelerate.findings(accelerate_plan(plan), launched=launched, carried=False)
            + carry.findings(plan, columns, TARGET, launched=launched) + grpo_findings(plan)
            + launcher_findings(plan, launched=launched))


def grpo_findings(plan: Plan) -> list[Finding]:
    """What GRPOConfig refuses of the recipe's `rl` (a group of one, a generation batch not in
    whole per-device batches over the world), and what a vLLM server's config cannot say."""
    found: list[Finding] = []
    rl = plan.recipe.rl
    if rl is not None and rl.rollout_n < 2:
        found.append(finding("DR208", TARGET, f"TRL's GRPO needs at least 2 generations per prompt; "
                                              f"rl.rollout_n is {rl.rollout_n}"))
    if rl is not None and (refused := generation_refusal(plan)) is not None:
        found.append(finding("DR208", TARGET, refused))
    if rl is not None and vllm_mode(plan) == "server":
        unsaid = [name for name, value in (("rl.rollout_memory", rl.rollout_memory),
                                           ("rl.free_rollout_memory", rl.free_rollout_memory))
                  if value is not None]
        if unsaid:
            found.append(finding("DR222", TARGET, f"{', '.join(unsaid)}: a vLLM server's memory is "
                                                  "`trl vllm-serve`'s (--gpu_memory_utilization), not the "
                                                  "config's"))
    return found


def text(plan: Plan) -> str:
    name = GRPO_FILE if plan.recipe.rl is not None else SFT_FILE
    header = (f"# distrecipe: {one_line(plan.recipe.name)}. trl {command(plan)} --config {name} "
              f"--accelerate_config {ACCELERATE_FILE}\n")
    return header + yaml.safe_dump(emit(plan), sort_keys=True, default_flow_style=False)


def render(plan: Plan, options: EmitOptions) -> Output:
    """The TRL config and `accelerate_config.yaml` (with the ds_config it names under ZeRO)."""
    found = findings(plan, launched=options.launched)
    refuse_errors(found)
    files = dict(accelerate.render(accelerate_plan(plan), options).files)
    files[GRPO_FILE if plan.recipe.rl is not None else SFT_FILE] = text(plan)
    return Output(files=files, findings=tuple(found))
