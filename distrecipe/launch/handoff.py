"""How the recipe reaches each kind of program, and what a user's own arguments may change.

Every kind gets the run's files in the environment (`DISTRECIPE_RUN_DIR`,
`DISTRECIPE_PLAN`, `DISTRECIPE_DS_CONFIG` when a ds_config is written, and
`DISTRECIPE_METRICS`, the file its measurements go to: `launch.metrics`); beyond that:

* `hf` (Trainer): the TrainingArguments flags the recipe decides, and
  `--deepspeed ds_config.json` or `--fsdp --fsdp_config {...}`; with `rl`, a TRL GRPO
  script's `--num_generations` and generation batch (`translator.trl.grpo`);
* `deepspeed` (raw): `--deepspeed_config ds_config.json`, DeepSpeed's own flag;
* `verl`: the emitted Hydra overrides, before the user's;
* `openrlhf`: the options the recipe decides (`translator.openrlhf.decided`), before the
  user's, who must name the models and the prompts (the emitted script's `$ACTOR`,
  `$REWARD`, `$PROMPTS`); the user's options are read as OpenRLHF's parser reads them
  (abbreviations, `=`), and one it does not have is refused before the start;
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

from distrecipe.engines import openrlhf as openrlhf_parser
from distrecipe.engines.argv import read_flags
from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.engines.hf_argv import flag_value, flag_words, same_value
from distrecipe.engines.hydra import parse_value
from distrecipe.engines.verl import OVERRIDES_FILE
from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.keys import did_you_mean
from distrecipe.launch.metrics import METRICS, METRICS_FILE
from distrecipe.launch.rundir import PLAN_FILE
from distrecipe.overrides import split_override
from distrecipe.recipe import ProgramKind
from distrecipe.translator import hf, openrlhf, trl
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


def merge_openrlhf(plan: Plan, user: Sequence[str], *, allow_override: bool) -> Handoff:
    """The options the recipe decides, then the user's; a user option that sets one of them
    differently is checked, one OpenRLHF's parser does not have is refused, and the models
    and prompts only the user can name must be there."""
    refuse_errors(openrlhf.findings(plan))
    parser = openrlhf_parser.entry(openrlhf.ENTRY)
    judging = openrlhf_parser.judging()
    if parser is None:
        raise LaunchError(f"{judging} has no {openrlhf.ENTRY}")
    given = openrlhf_parser.read_argv(parser, user)
    for unknown in given:
        if unknown.option is None and not unknown.written.startswith("-"):
            raise LaunchError(f"program argument {unknown.written} is no option: {judging}'s "
                              f"{openrlhf.ENTRY} takes options only, and launch.backend openrlhf runs "
                              "that module itself")
        if unknown.option is None:
            raise LaunchError(f"program argument {unknown.written} is not an option of {judging}'s "
                              f"{openrlhf.ENTRY}{_openrlhf_near(parser, unknown.written)}")
    last = {item.option: item for item in given if item.option is not None}  # argparse: the last wins
    decided = openrlhf.decided(plan)
    overridden: list[Overridden] = []
    for option, value, key in decided:
        item = last.get(option)
        if item is None or value is None or openrlhf_parser.same_value(parser.options[option], item.value,
                                                                        value):
            continue  # a switch the recipe sets is only ever set again
        shown = "(no value)" if item.value is None else item.value
        if not allow_override:
            raise _refuse(item.written, shown, value, key)
        overridden.append(Overridden(item.written, value, shown, key))
    needed = [(option, *openrlhf.STANDS_IN.get(option, ())) for option, _placeholder in openrlhf.USER]
    missing = [names[0] + (f" (or {', '.join(names[1:])})" if names[1:] else "")
               for names in needed if not any(name in last for name in names)]
    if missing:
        raise LaunchError(f"OpenRLHF's {openrlhf.ENTRY} needs {' and '.join(missing)} after `--` (the "
                          "recipe leaves the models and the prompts to you)")
    ours = [word for option, value, _key in decided if option not in last
            for word in openrlhf.words(option, value)]
    return Handoff(tuple([*ours, *user]), {}, tuple(overridden))


def _openrlhf_near(parser: openrlhf_parser.Entry, written: str) -> str:
    """Another release's name for the option (`--micro_train_batch_size`), else the nearest."""
    history = openrlhf_parser.option_history(parser.module, written)
    if history is not None:
        said, now = history
        return f" ({said}{f'; here {now}' if now else ''})"
    return did_you_mean(written, sorted(parser.options))


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
    elif kind == "openrlhf":
        merged = merge_openrlhf(plan, user_args, allow_override=allow_override)
    else:
        merged = Handoff(tuple(user_args), {})
    return Handoff(merged.args, env, merged.overridden)
