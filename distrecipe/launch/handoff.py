"""How the recipe reaches each kind of program, and what a user's own arguments may change.

Every kind gets the run's files in the environment (`DISTRECIPE_RUN_DIR`,
`DISTRECIPE_PLAN`, `DISTRECIPE_DS_CONFIG` when a ds_config is written, and
`DISTRECIPE_METRICS`, the file its measurements go to: `launch.metrics`); beyond that:

* `hf` (Trainer): the TrainingArguments flags the recipe decides, and
  `--deepspeed ds_config.json` or `--fsdp --fsdp_config {...}`; with `rl`, a TRL GRPO
  script's `--num_generations` and generation batch (`translator.trl.grpo`);
* `deepspeed` (raw): `--deepspeed_config ds_config.json`, DeepSpeed's own flag;
* `verl`: the emitted Hydra overrides, before the user's;
* `accelerate` and `torchrun`: nothing more (the launcher's config file, or the
  environment and `distrecipe.api`).

A user argument after `--` that sets one of those values differently is refused,
naming both values, unless `allow_override`; then the user's value replaces the
recipe's (the recipe's word is dropped, so no "last one wins" rule decides) and the
run directory records it. Arguments the recipe does not decide pass untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrecipe.engines.argv import read_flags
from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.engines.hf_argv import flag_value, flag_words, same_value
from distrecipe.engines.hydra import parse_value
from distrecipe.engines.verl import OVERRIDES_FILE
from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.launch.metrics import METRICS, METRICS_FILE
from distrecipe.launch.rundir import PLAN_FILE
from distrecipe.overrides import split_override
from distrecipe.recipe import ProgramKind
from distrecipe.translator import hf, trl
from distrecipe.translator.equivalence import refuse_errors

HF_RECIPE_KEYS = {
    "per_device_train_batch_size": "batch.micro",
    "gradient_accumulation_steps": "batch.accumulation",
    "bf16": "precision",
    "fp16": "precision",
    "learning_rate": "optimizer.lr",
    "weight_decay": "optimizer.weight_decay",
    "optim": "optimizer.name",
    "adam_beta1": "optimizer.betas",
    "adam_beta2": "optimizer.betas",
    "adam_epsilon": "optimizer.eps",
    "max_grad_norm": "grad_clip",
    "use_cpu": "cluster.device",
    "gradient_checkpointing": "activation_checkpointing",
    "deepspeed": "strategy/stage/offload (the ds_config)",
    "fsdp": "strategy",
    "fsdp_config": "stage/offload/activation_checkpointing (FSDP2)",
    "num_generations": "rl.rollout_n",
    "generation_batch_size": "rl.prompts_per_step × rl.rollout_n",
    "use_vllm": "rl.rollout_mode / rl.rollout_memory",
    "vllm_mode": "rl.rollout_mode / rl.rollout_memory",
    "vllm_gpu_memory_utilization": "rl.rollout_memory",
    "vllm_enable_sleep_mode": "rl.free_rollout_memory",
}
"""Each TrainingArguments field distrecipe sets → the recipe key that decided it."""


@dataclass(frozen=True, slots=True)
class Overridden:
    """A recipe value a user argument replaced under `--allow-override`."""

    argument: str
    recipe: str
    given: str
    key: str


@dataclass(frozen=True, slots=True)
class Handoff:
    args: tuple[str, ...]
    """The program's arguments: the user's and the recipe's, merged."""
    env: dict[str, str]
    overridden: tuple[Overridden, ...] = ()


def run_files_env(run_dir: Path, configs: Mapping[str, str]) -> dict[str, str]:
    """The documented variables naming the run's plan and ds_config (read by `distrecipe.api`)
    and the file a program appends its measurements to (`launch.metrics`)."""
    env = {"DISTRECIPE_PLAN": str(run_dir / PLAN_FILE), METRICS: str(run_dir / METRICS_FILE)}
    if CONFIG_FILE in configs:
        env["DISTRECIPE_DS_CONFIG"] = str(run_dir / CONFIG_FILE)
    return env


def hf_decided(plan: Plan, run_dir: Path) -> dict[str, Any]:
    """The TrainingArguments the recipe decides; None marks a field it decides to leave unset.

    A recipe the Trainer cannot express (Megatron, pipeline stages, …) is refused here,
    as `compile --target hf` refuses it.
    """
    refuse_errors(hf.findings(plan) + trl.grpo_findings(plan))
    decided: dict[str, Any] = {"deepspeed": None, "fsdp": None, "fsdp_config": None}
    decided.update(hf.emit(plan))
    decided.update(trl.grpo(plan))  # with `rl`, a TRL GRPO script: its group and generation batch
    if decided["deepspeed"] is not None:
        decided["deepspeed"] = str(run_dir / CONFIG_FILE)
    return decided


def _refuse(argument: str, given: str, recipe: str, key: str) -> LaunchError:
    return LaunchError(f"program argument {argument} {given} contradicts the recipe's {recipe} ({key}); "
                       "drop it, change the recipe (--set), or pass --allow-override")


def merge_flags(decided: Mapping[str, Any], user: Sequence[str], *, allow_override: bool,
                keys: Mapping[str, str]) -> Handoff:
    """The user's argv, then `--name value` for each decided value the user did not set.

    The user's argv is read as HfArgumentParser reads it (`argv.read_flags`, the last
    occurrence winning; `--a-b` is the field `a_b`); a flag given alone says true."""
    given = {name: "true" if flag.value is None else flag.value
             for flag in read_flags(user) if (name := flag.name.replace("-", "_")) in decided}
    overridden: list[Overridden] = []
    for name, text in given.items():
        value = decided[name]
        recipe = "no value" if value is None else flag_value(value)
        if value is not None and same_value(text, value):
            continue
        if not allow_override:
            raise _refuse(f"--{name}", text, recipe, keys.get(name, name))
        overridden.append(Overridden(f"--{name}", recipe, text, keys.get(name, name)))
    ours = [word for name, value in decided.items() if value is not None and name not in given
            for word in flag_words(name, value)]
    return Handoff(tuple([*user, *ours]), {}, tuple(overridden))


def merge_verl(emitted: Sequence[str], user: Sequence[str], *, allow_override: bool) -> Handoff:
    """The emitted overrides then the user's; one that sets an emitted key differently, or
    deletes it (`~key`, with or without a value), is checked."""
    recipe = {item.key: item.value for item in map(split_override, emitted)
              if item is not None and item.value is not None and item.prefix != "~"}
    overridden: list[Overridden] = []
    replaced: set[str] = set()
    for word in user:
        item = split_override(word)
        if item is None or item.key not in recipe:
            continue
        replaced.add(item.key)
        if item.prefix == "~" or item.value is None:
            argument, given = f"~{item.key}", "(deletes it)"
        elif parse_value(item.value) == parse_value(recipe[item.key]):
            continue
        else:
            argument, given = item.key, item.value
        if not allow_override:
            raise _refuse(argument, given, recipe[item.key], "verl override")
        overridden.append(Overridden(argument, recipe[item.key], given, "verl override"))
    ours = [word for word in emitted if (item := split_override(word)) is None or item.key not in replaced]
    return Handoff(tuple([*ours, *user]), {}, tuple(overridden))


def handoff(kind: ProgramKind, plan: Plan, *, user_args: Sequence[str], run_dir: Path,
            configs: Mapping[str, str], allow_override: bool = False) -> Handoff:
    """The program's arguments and added environment for `kind`."""
    env = run_files_env(run_dir, configs)
    if kind == "hf":
        merged = merge_flags(hf_decided(plan, run_dir), user_args, allow_override=allow_override,
                             keys=HF_RECIPE_KEYS)
    elif kind == "deepspeed":
        if CONFIG_FILE not in configs:
            raise LaunchError(f"a raw DeepSpeed program needs a ds_config; launch.backend "
                              f"{plan.backend} with strategy {plan.recipe.strategy} writes none")
        merged = merge_flags({"deepspeed_config": str(run_dir / CONFIG_FILE)}, user_args,
                             allow_override=allow_override, keys={"deepspeed_config": "the ds_config"})
    elif kind == "verl":
        if OVERRIDES_FILE not in configs:
            raise LaunchError(f"verl needs the emitted {OVERRIDES_FILE}; the verl emitter gave none")
        merged = merge_verl(configs[OVERRIDES_FILE].splitlines(), user_args, allow_override=allow_override)
    else:
        merged = Handoff(tuple(user_args), {})
    return Handoff(merged.args, env, merged.overridden)
