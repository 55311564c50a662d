"""Plan → a TRL config (`trl grpo` / `trl sft --config FILE`) and the Accelerate config
that starts it at the recipe's world.

TRL's trainers are the HF Trainer with a config that extends `TrainingArguments`, so the
config holds the Trainer's kwargs (`translator.hf.emit`, the same batch, precision and
schedule) and, for a recipe with `rl`, GRPO's: `num_generations` is `rl.rollout_n`, and
GRPOConfig's generation batch (micro × world × accumulation, `steps_per_generation`
left to its default, the accumulation) then holds `rl.prompts_per_step` whole groups,
verl's prompts per step. `rl.rollout_memory` is the colocated vLLM's fraction
(`use_vllm`, `vllm_mode: colocate`, `vllm_gpu_memory_utilization`), and
`rl.free_rollout_memory` its sleep mode. TRL's shipped Accelerate configs say
`num_processes: 8` whatever the job has; the one written here says the recipe's world
(`translator.accelerate`), and `compile` lints both files with TRL's and Accelerate's
tables before writing them.
"""

from __future__ import annotations

from typing import Any

import yaml

from distrecipe.engines.accelerate import CONFIG_FILE as ACCELERATE_FILE
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import one_line
from distrecipe.translator import accelerate, hf
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import refuse_errors
from distrecipe.translator.targets import EmitOptions, Output

TARGET = "trl"
GRPO_FILE = "grpo_config.yaml"
SFT_FILE = "sft_config.yaml"


def command(plan: Plan) -> str:
    """The TRL command that reads the config: `grpo` for a recipe with `rl`, else `sft`."""
    return "grpo" if plan.recipe.rl is not None else "sft"


def emit(plan: Plan) -> dict[str, Any]:
    """The config's keys: the Trainer's kwargs (its `deepspeed` key names the ds_config the
    Accelerate config names too), and GRPO's for a recipe with `rl`."""
    kwargs = dict(hf.emit(plan))
    rl = plan.recipe.rl
    if rl is not None:
        kwargs["num_generations"] = rl.rollout_n
        if rl.rollout_memory is not None:
            kwargs.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=rl.rollout_memory)
        if rl.free_rollout_memory is not None:
            kwargs["vllm_enable_sleep_mode"] = rl.free_rollout_memory
    return dict(sorted(kwargs.items()))


def findings(plan: Plan, *, launched: bool = False) -> list[Finding]:
    """The Trainer's (a TRL trainer is one) and the Accelerate config's, and GRPO's own
    refusal: a group of one has no advantage (`GRPOConfig.__post_init__`), where verl's PPO
    takes `rollout.n` 1."""
    found = hf.findings(plan, launched=launched) + accelerate.findings(plan, launched=launched)
    rl = plan.recipe.rl
    if rl is not None and rl.rollout_n < 2:
        found.append(finding("DR208", TARGET, f"TRL's GRPO needs at least 2 generations per prompt; "
                                              f"rl.rollout_n is {rl.rollout_n}"))
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
    files = dict(accelerate.render(plan, options).files)
    files[GRPO_FILE if plan.recipe.rl is not None else SFT_FILE] = text(plan)
    return Output(files=files, findings=tuple(found))
