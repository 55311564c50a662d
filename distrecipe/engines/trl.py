"""TRL as facts: which dataclasses read a config file, and GRPO's batch rules.

`trl NAME --config FILE.yaml` (and a script built on `TrlParser`, as open-r1's are) reads
the YAML with `TrlParser.parse_args_and_config`: each key becomes the default of the
argument of that name in the command's dataclasses (`ScriptArguments`, the trainer's
`XConfig`, which extends transformers' `TrainingArguments`, `ModelConfig`,
`DatasetMixtureConfig`), `env:` sets environment variables, and a key none of them has
is refused ("Unknown arguments from config file"; under `trl NAME` it is handed to
`accelerate launch`, whose parser refuses it). Each release's dataclasses and fields are
in `tables/trl/RELEASE.json` (`scripts/engine_tables.py`); TrainingArguments' come from
the judging transformers table.

A YAML does not say which command reads it: the command is the one whose dataclasses
accept the most of its keys (`command_of`). GRPO's batch arithmetic is
`GRPOConfig.__post_init__`'s (`grpo_batch`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from distrecipe.engines.argv import read_flags
from distrecipe.engines.hf import SCRIPT_FIELDS
from distrecipe.engines.shell import Word, commands_with_origin
from distrecipe.engines.tables import release, releases, table, table_of, training_arguments
from distrecipe.errors import Position
from distrecipe.recipe import RL
from distrecipe.source import Document, KeyPath

SHARED = ("ScriptArguments", "ModelConfig", "DatasetMixtureConfig", "GRPOScriptArguments",
          "RLOOScriptArguments")
"""The dataclasses several commands share: their fields do not tell the command."""
RESERVED = frozenset({"env"})
"""Keys `TrlParser` reads itself (`env:` sets environment variables)."""
ORDER = ("sft", "grpo", "dpo", "reward", "kto", "rloo", "distillation")
"""Which command a file whose keys fit several equally is judged as (the common first)."""


@cache
def _markers(versions: tuple[str, ...], transformers: str) -> frozenset[str]:
    shared: set[str] = set()
    own: set[str] = set()
    for version in versions:
        found = table_of("trl", version)
        for name, entry in found["dataclasses"].items():
            (shared if name in SHARED else own).update(entry["fields"])
    trainer = set(table_of("hf", transformers)["training_arguments"])
    return frozenset(own - shared - trainer - SCRIPT_FIELDS)


def markers() -> frozenset[str]:
    """Keys only a TRL trainer config has, in any release here (`packing`, `num_generations`,
    `beta`, `max_prompt_length`): a YAML holding one is TRL's, not a plain Trainer script's."""
    return _markers(releases("trl"), release("hf").table)


FIT = 0.75
"""The share of a file's keys that one TRL command (in any release here, TrainingArguments'
removed fields included) must accept for a file holding a marker to be TRL's: generation
settings (`temperature`, `top_k`) or `max_length` alone also mark other tools' dumps."""


def is_trl(keys: Iterable[object]) -> bool:
    words = set(map(str, keys))
    if not words & markers():
        return False
    fits = max(len(words & accepted) for accepted in _any_release(releases("trl"), release("hf").table))
    return fits >= FIT * len(words)


@cache
def _any_release(versions: tuple[str, ...], transformers: str) -> tuple[frozenset[str], ...]:
    """Per command name, every key any release here accepts for it."""
    from distrecipe.engines.hf import REMOVED

    by_name: dict[str, set[str]] = {}
    for version in versions:
        for name, command in _commands(version, transformers).items():
            by_name.setdefault(name, set(REMOVED)).update(command.accepted)
    return tuple(frozenset(keys) for _, keys in sorted(by_name.items()))


@dataclass(frozen=True, slots=True)
class Command:
    """One TRL command as the judging release has it: its name and dataclasses, and
    every key its parser accepts (TrainingArguments' from the judging transformers)."""

    name: str
    dataclasses: tuple[str, ...]
    accepted: frozenset[str]
    config: str
    """The trainer's config dataclass (`GRPOConfig`)."""

    def owner(self, key: str) -> str | None:
        """The dataclass that declares `key` (the config for a TrainingArguments field)."""
        found = table("trl")["dataclasses"]
        for name in self.dataclasses:
            if key in found[name]["fields"]:
                return name
        return self.config if key in training_arguments() else None

    def field(self, key: str) -> dict[str, Any] | None:
        """The table's entry of `key` (types, choices, default), None for TrainingArguments'."""
        found = table("trl")["dataclasses"]
        for name in self.dataclasses:
            if key in found[name]["fields"]:
                entry: dict[str, Any] = found[name]["fields"][key]
                return entry
        return None

    def default(self, key: str) -> Any:
        entry = self.field(key)
        if entry is not None and "default" in entry:
            return entry["default"]
        from distrecipe.engines.tables import training_defaults

        return training_defaults().get(key)


def commands() -> dict[str, Command]:
    """The judging release's commands by name."""
    return _commands(release("trl").table, release("hf").table)


@cache
def _commands(version: str, transformers: str) -> dict[str, Command]:
    found = table_of("trl", version)
    trainer = frozenset(table_of("hf", transformers)["training_arguments"])
    out: dict[str, Command] = {}
    for name, classes in found["commands"].items():
        keys: set[str] = set(RESERVED)
        config = next((c for c in classes if c not in SHARED), classes[0])
        for dataclass_name in classes:
            entry = found["dataclasses"][dataclass_name]
            keys.update(entry["fields"])
            if "TrainingArguments" in entry["extends"]:
                keys.update(trainer)
        out[name] = Command(name, tuple(classes), frozenset(keys), config)
    return out


def command_of(keys: Iterable[object], named: str | None = None) -> Command:
    """The command that reads a file with `keys`: `named` when given and known, else the
    one whose dataclasses accept the most of them, then the one whose own config declares
    the most, then `ORDER`."""
    found = commands()
    if named is not None and named in found:
        return found[named]
    words = set(map(str, keys))
    table_now = table("trl")["dataclasses"]

    def score(command: Command) -> tuple[int, int, int]:
        own = set(table_now[command.config]["fields"])
        rank = ORDER.index(command.name) if command.name in ORDER else len(ORDER)
        return (len(words & command.accepted), len(words & own), -rank)

    return max(found.values(), key=score)


def renamed(key: str) -> str | None:
    """The field a TRL release's help names as replacing `key` (`max_seq_length` → `max_length`)."""
    for version in reversed(releases("trl")):
        for entry in table_of("trl", version)["dataclasses"].values():
            replaced = entry["fields"].get(key, {}).get("replaced_by")
            if replaced:
                return str(replaced)
    return None


@dataclass(frozen=True, slots=True)
class GrpoBatch:
    """GRPO's batch numbers as `GRPOConfig.__post_init__` derives them (TRL ≥ 0.18)."""

    per_device: int
    """`per_device_train_batch_size`: completions per rank per step (not prompts)."""
    world: int
    accumulation: int
    generations: int
    generation_batch: int | None
    steps_per_generation: int | None


@dataclass(frozen=True, slots=True)
class GrpoViolation:
    rule: str
    key: str
    message: str


def grpo_violations(b: GrpoBatch) -> list[GrpoViolation]:
    """What `GRPOConfig.__post_init__` refuses, in its order: both `generation_batch_size`
    and `steps_per_generation` set; a generation batch not a multiple of the global batch
    (per_device × world); a generation batch not a multiple of `num_generations` (whole
    prompt groups); fewer than 2 generations."""
    global_batch = b.per_device * b.world
    if b.generation_batch is not None and b.steps_per_generation is not None:
        return [GrpoViolation("both", "steps_per_generation",
                              "'generation_batch_size' and 'steps_per_generation' can not be both configured "
                              "at the same time")]
    if b.generation_batch is not None:
        if global_batch and b.generation_batch % global_batch:
            lower = b.generation_batch // global_batch * global_batch
            near = sorted({n for n in (lower, lower + global_batch) if n > 0})
            return [GrpoViolation(
                "global", "generation_batch_size",
                f"generation_batch_size ({b.generation_batch}) must be divisible by the global batch size "
                f"(per_device_train_batch_size {b.per_device} × {b.world} processes = {global_batch}): "
                f"nearest valid {' or '.join(map(str, near))}")]
        generation_batch = b.generation_batch
        source = f"generation_batch_size {generation_batch}"
    else:
        steps = b.steps_per_generation if b.steps_per_generation is not None else b.accumulation
        generation_batch = global_batch * steps
        said = (f"steps_per_generation {steps}" if b.steps_per_generation is not None
                else f"gradient_accumulation_steps {steps}")
        source = (f"per_device_train_batch_size {b.per_device} × {b.world} processes × {said} = "
                  f"{generation_batch}")
    out: list[GrpoViolation] = []
    if b.generations and generation_batch % b.generations:
        valid = [n for n in range(2, generation_batch + 1) if generation_batch % n == 0]
        near = sorted(sorted(valid, key=lambda n: (abs(n - b.generations), n))[:2])
        fixes = [f"num_generations {' or '.join(map(str, near))}"] if near else []
        if b.generation_batch is None:
            steps = generation_batch // global_batch if global_batch else 1
            bigger = next((p for p in range(b.per_device + 1, b.per_device + b.generations + 1)
                           if (p * b.world * steps) % b.generations == 0), None)
            if bigger is not None:
                fixes.append(f"per_device_train_batch_size {bigger}")
        else:
            fixes.append(f"generation_batch_size {_multiple(generation_batch, b.generations, global_batch)}")
        out.append(GrpoViolation("groups", "num_generations",
                                 f"generation batch ({source}) must be divisible by num_generations "
                                 f"({b.generations}): each prompt's group of completions must be whole; "
                                 f"nearest valid: {', or '.join(fixes)}"))
    if b.generations < 2:
        out.append(GrpoViolation("two", "num_generations",
                                 "GRPO requires at least 2 generations per prompt to calculate the "
                                 f"advantages; num_generations is {b.generations}"))
    return out


def _multiple(value: int, generations: int, global_batch: int) -> int:
    """The smallest generation batch ≥ `value` that is a multiple of both the group size and
    the global batch."""
    from math import lcm

    step = lcm(generations, max(global_batch, 1))
    return -(-value // step) * step


COMMAND_KEY = re.compile(r"trl (\w+)")
"""A TRL command line's document is `{"trl NAME": {argument: value}}` (`read_command`)."""


def read_command(text: str, file: str) -> Document | None:
    """A launch script's first `trl NAME ...` training command as a document: each
    `--name value` argument as written (its value's text, None where the script leaves it
    to a variable, True for a flag given alone), with positions."""
    names = set(commands()) | set(ORDER)
    for words, _raw in commands_with_origin(text, file):
        for index, word in enumerate(words[:-1]):
            if (word.value or "").rsplit("/", 1)[-1] == "trl" and words[index + 1].value in names:
                return _document(f"trl {words[index + 1].value}", words[index + 2:], text, file)
    return None


def _document(key: str, words: list[Word], text: str, file: str) -> Document:
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): words[0].where if words else Position(file, 1, 1)}
    key_positions: dict[KeyPath, Position] = {}
    for flag in read_flags([word.value for word in words]):
        separate = flag.value_at is not None and flag.value_at != flag.at
        at = words[flag.value_at] if separate and flag.value_at is not None else words[flag.at]
        data[flag.name] = True if flag.value_at is None and flag.value is None else flag.value
        key_positions[(key, flag.name)] = words[flag.at].where
        positions[(key, flag.name)] = at.where
    positions[(key,)] = key_positions[(key,)] = positions[()]
    return Document({key: data}, file, positions, key_positions, tuple(text.splitlines()))


def is_command(data: object) -> bool:
    """Whether a document is a TRL command line (`read_command`'s shape)."""
    if not isinstance(data, dict) or len(data) != 1:
        return False
    key, value = next(iter(data.items()))
    return isinstance(key, str) and COMMAND_KEY.fullmatch(key) is not None and isinstance(value, dict)


def launch_options() -> frozenset[str]:
    """What `trl NAME` hands `accelerate launch` rather than its dataclasses: Accelerate's
    launch options (the judging Accelerate's) and `accelerate_config`, which TRL resolves."""
    from distrecipe.engines.tables import table as judging

    return frozenset(judging("accelerate")["launch_options"]) | {"accelerate_config"}


def shipped_world(name: str) -> int | None:
    """The processes TRL's shipped Accelerate config `name` starts (`zero2`: 8 — every one
    of them says 8 but `single_gpu`, a one-process config), None for a name it lacks."""
    found = table("trl").get("accelerate_configs", {}).get(name)
    if found is None:
        return None
    if found.get("distributed_type") == "NO":
        return 1
    processes = found.get("num_processes")
    return processes if isinstance(processes, int) else None


def trainer_names() -> frozenset[str]:
    """The names a script uses to run one of TRL's trainers: each command's config class of
    every release here (`GRPOConfig`) and its trainer (`GRPOTrainer`)."""
    return _trainer_names(releases("trl"))


@cache
def _trainer_names(versions: tuple[str, ...]) -> frozenset[str]:
    configs = {classes[1] for version in versions
               for classes in table_of("trl", version)["commands"].values() if len(classes) > 1}
    return frozenset(configs | {name.removesuffix("Config") + "Trainer" for name in configs})


def vllm_mode(rl: RL | None) -> str | None:
    """GRPOConfig's `vllm_mode` for a recipe's `rl`: its `rollout_mode`, else colocate where it
    states vLLM's memory; None (TRL generates with the trained model) otherwise."""
    if rl is None:
        return None
    if rl.rollout_mode is not None:
        return rl.rollout_mode
    return "colocate" if rl.rollout_memory is not None else None


def runs_trl(backend: str, rl: object) -> bool:
    """Whether a recipe's RL job is TRL's: `rl` under `accelerate launch` (what `compile
    --target trl` writes and `import` reads back); under `launch.backend: verl` it is verl's."""
    return rl is not None and backend in ("accelerate", "accelerate-deepspeed")


@dataclass(frozen=True, slots=True)
class VllmDefaults:
    """GRPOConfig's colocated vLLM as the judging release leaves it."""

    memory: float
    """`vllm_gpu_memory_utilization`."""
    sleep: bool
    """`vllm_enable_sleep_mode`: whether vLLM gives its memory back while the model trains."""
    tensor: int
    """`vllm_tensor_parallel_size`."""


def vllm_defaults() -> VllmDefaults:
    fields = table("trl")["dataclasses"]["GRPOConfig"]["fields"]
    return VllmDefaults(float(fields["vllm_gpu_memory_utilization"]["default"]),
                        bool(fields["vllm_enable_sleep_mode"]["default"]),
                        int(fields["vllm_tensor_parallel_size"]["default"]))
