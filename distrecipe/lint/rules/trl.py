"""TRL config YAMLs (`trl NAME --config FILE`, scripts built on `TrlParser`), judged by the
dataclasses of the command that reads them and by `GRPOConfig.__post_init__`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from distrecipe.engines.hf import REMOVED, field_release
from distrecipe.engines.tables import history, label, training_flags
from distrecipe.engines.trl import (
    Command,
    GrpoBatch,
    command_of,
    commands,
    grpo_violations,
    is_command,
    launch_options,
    renamed,
    shipped_world,
)
from distrecipe.keys import did_you_mean, integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath


@dataclass(frozen=True)
class View:
    """What a TRL rule judges: a config file's keys, or a `trl NAME` command line's arguments."""

    values: dict[Any, Any]
    prefix: KeyPath
    """Where `values` sit in the document: `()` for a config, `("trl NAME",)` for a command."""
    command: Command
    line: bool
    """A command line: its arguments are strings, and `accelerate launch` takes the
    Accelerate options among them."""

    def path(self, key: str | int) -> KeyPath:
        return (*self.prefix, key)

    @property
    def accepted(self) -> frozenset[str]:
        return self.command.accepted | (launch_options() | {"config"} if self.line else frozenset())


def view(src: Source) -> View:
    data = src.data
    if is_command(data):
        key = next(iter(data))
        name = key.split(" ", 1)[1]
        values = data[key]
        return View(values, (key,), command_of(values, name), True)
    return View(data, (), command_of(data), False)


def removed_key(src: Source) -> Iterator[Problem]:
    """A key of another TRL release, or a TrainingArguments field transformers removed: refused.

    `trl NAME --config FILE.yaml` and scripts built on `TrlParser` make each key the
    default of the argument of that name in the command's dataclasses (ScriptArguments,
    the trainer's config over transformers' TrainingArguments, ModelConfig,
    DatasetMixtureConfig); a key none has stops the run ("Unknown arguments from config
    file"; under `trl NAME` it reaches `accelerate launch`, which refuses it too). A key
    another TRL release has (`max_seq_length`, renamed `max_length` in 0.20) or one
    transformers removed (`evaluation_strategy`) was written for another release, and the
    message names the release and the replacing field. The command is the one whose
    dataclasses take the most of the file's keys.

    Fails: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    dataset_name: trl-lib/Capybara
    packing: true
    max_seq_length: 1024
    output_dir: out
    ```

    Passes: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    dataset_name: trl-lib/Capybara
    packing: true
    max_length: 1024
    output_dir: out
    ```

    Fix: the field the message names, or delete the key; for a key of another release,
    run that release (`--engine-version trl=RELEASE` judges by it).
    """
    seen = view(src)
    for key, other, command in _unknown(seen):
        if other is None:
            continue
        replacing = renamed(str(key)) or REMOVED.get(str(key))
        use = f"; use {replacing}" if replacing else ""
        yield Problem(seen.path(key), f"{_refused(key, command, seen.line)}; {other}{use}", key=True)


def unknown_key(src: Source) -> Iterator[Problem]:
    """A key no dataclass of the TRL command has, in any release: `trl NAME` refuses it.

    `TrlParser` refuses a key none of the command's dataclasses has ("Unknown arguments
    from config file"). A script built on it with dataclasses of its own (open-r1's,
    alignment-handbook's `ScriptArguments`) reads more keys than `trl NAME` does, and lint
    cannot see that script's fields, so this is a warning, with the nearest field.

    Fails: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
    use_vllm: true
    num_generations: 8
    max_completion_lenght: 256
    ```

    Passes: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
    use_vllm: true
    num_generations: 8
    max_completion_length: 256
    ```

    Fix: the field the message suggests, or delete the key; a key the script's own
    dataclasses read can be suppressed (`# distrecipe: ignore[DR403]`).
    """
    seen = view(src)
    if seen.line:
        return  # `trl NAME` itself refuses it: DR404
    for key, other, command in _unknown(seen):
        if other is None:
            yield Problem(seen.path(key), _refused(key, command, seen.line) + did_you_mean(str(key), sorted(
                seen.accepted)), key=True)


def unknown_argument(src: Source) -> Iterator[Problem]:
    """An argument of a `trl NAME` command line that neither TRL nor Accelerate takes: refused.

    `trl NAME ARGS` parses ARGS with the command's dataclasses and hands what they leave to
    `accelerate launch` (`--num_processes`, `--config_file`; `--accelerate_config zero2`
    becomes TRL's shipped config), whose parser refuses anything else before any process
    starts. Unlike a YAML read by a script of one's own, no other dataclass can take it.

    Fails: trl
    ```sh
    trl grpo --model_name_or_path Qwen/Qwen2.5-0.5B --dataset_name trl-lib/tldr \\
        --num_generations 8 --max_completion_lenght 256
    ```

    Passes: trl
    ```sh
    trl grpo --model_name_or_path Qwen/Qwen2.5-0.5B --dataset_name trl-lib/tldr \\
        --num_generations 8 --max_completion_length 256
    ```

    Fix: the argument the message suggests, or delete it.
    """
    seen = view(src)
    if not seen.line:
        return
    for key, other, command in _unknown(seen):
        if other is None:
            yield Problem(seen.path(key), _refused(key, command, True) + did_you_mean(str(key), sorted(
                seen.accepted)), key=True)


def _refused(key: object, command: Command, line: bool = False) -> str:
    if line:
        return (f"--{key} is no field of {label('trl')}'s `trl {command.name}` dataclasses "
                f"({', '.join(command.dataclasses)}; {label('hf')}'s TrainingArguments) nor an option of "
                f"`accelerate launch`, to which `trl {command.name}` hands the rest: it refuses it")
    return (f"{key!r} is no field of {label('trl')}'s `trl {command.name}` dataclasses "
            f"({', '.join(command.dataclasses)}; {label('hf')}'s TrainingArguments): TrlParser refuses "
            f"the file (\"Unknown arguments from config file\")")


def _unknown(seen: View) -> Iterator[tuple[str | int, str | None, Command]]:
    """Each key the command does not accept, with where else it exists (another command
    of this release, another TRL release, a removed TrainingArguments field), or None."""
    command = seen.command
    others = sorted(name for name in commands() if name != command.name)
    for key in seen.values:
        name = str(key)
        if name in seen.accepted:
            continue
        elsewhere = [other for other in others if name in commands()[other].accepted]
        other: str | None
        if elsewhere:
            config = commands()[elsewhere[0]].config
            other = f"a field of `trl {elsewhere[0]}` ({config}), which this file's other keys do not fit"
        else:
            other = history("trl", partial(_declares, name=name))
            if other is None and name in REMOVED:
                other = field_release(name)
        yield (key if isinstance(key, str | int) else name), other, command


def _declares(found: dict[str, Any], name: str) -> bool:
    """Whether a TRL table's dataclasses declare `name`."""
    return any(name in entry["fields"] for entry in found["dataclasses"].values())


_CONVERT = {"int": int, "float": float}
_BOOLS = ("true", "false", "yes", "no", "t", "f", "y", "n", "1", "0")


def wrong_type(src: Source) -> Iterator[Problem]:
    """A value TrlParser cannot convert to its field's type: the run stops at start.

    TrlParser sets each key as its argument's default; argparse converts a default that
    is a string with the argument's type (`int`, `float`, `string_to_bool`), so a quoted
    or unparsable number (`learning_rate: 2e-5x`, `num_generations: "eight"`) is refused
    ("invalid int value"). (PyYAML reads `2e-5` as a string, which converts; a number
    of the wrong kind is not converted, and not judged here.)

    Fails: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    num_generations: eight
    use_vllm: true
    ```

    Passes: trl
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    num_generations: 8
    use_vllm: true
    ```

    Fix: write the number (or `true`/`false`) the field takes.
    """
    seen = view(src)
    command = seen.command
    flags = training_flags()
    for key, value in seen.values.items():
        if not isinstance(value, str):
            continue
        name = str(key)
        entry = command.field(name)
        if entry is not None:
            types = set(entry.get("types", ()))
            if "str" in types or "other" in types or "list" in types or "dict" in types:
                continue
            wanted = next((t for t in ("int", "float", "bool") if t in types), None)
        else:
            flag = flags.get(name)
            wanted = flag.get("type") if flag is not None else None
        if wanted is None or _converts(wanted, value):
            continue
        yield Problem(seen.path(key), f"{key}: {value!r} is no {wanted} ({label('trl')}'s "
                                      f"{command.owner(name)}): TrlParser's argparse refuses it "
                                      f"(\"invalid {wanted} value: {value!r}\")")


def _converts(wanted: str, value: str) -> bool:
    if wanted == "bool":
        return value.lower() in _BOOLS
    convert = _CONVERT.get(wanted)
    if convert is None:
        return True
    try:
        convert(value)
    except ValueError:
        return False
    return True


def grpo_batch(src: Source) -> Iterator[Problem]:
    """A GRPO batch `GRPOConfig.__post_init__` refuses, before any model loads.

    `per_device_train_batch_size` counts completions, not prompts. With p =
    `per_device_train_batch_size`, N processes, a = `gradient_accumulation_steps`, G =
    `num_generations` (default 8): the generation batch is `generation_batch_size`, else p
    × N × `steps_per_generation` (default a); it must be a multiple of p × N, and of G so
    that every prompt's group of completions is whole; G ≥ 2; the two knobs are not both
    set. open-r1's 8-GPU recipe runs vLLM on one GPU and trains on 7: p = 1 × 7 is no
    multiple of G = 8.

    Fails: trl --world 7
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    per_device_train_batch_size: 1
    num_generations: 8
    use_vllm: true
    ```

    Passes: trl --world 7
    ```yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B
    per_device_train_batch_size: 8
    num_generations: 7
    use_vllm: true
    ```

    Without a world (`--world`, a launch script or an Accelerate config that starts the
    file) only the rules that need none are checked.

    Fix: the message names every factor and the nearest valid values.
    """
    seen = view(src)
    command = seen.command
    if command.name != "grpo":
        return
    values = {**_config_of(src, seen), **seen.values} if seen.line else seen.values

    def number(key: str) -> int | None:
        value = values.get(key, command.default(key))
        if isinstance(value, str) and value.isdigit():
            return int(value)
        return integer(value)

    generations, per_device = number("num_generations"), number("per_device_train_batch_size")
    accumulation = number("gradient_accumulation_steps")
    if generations is None or per_device is None or accumulation is None:
        return
    ranks, said = _world(src, seen)
    batch = GrpoBatch(per_device=per_device, world=ranks or 1, accumulation=accumulation,
                      generations=generations, generation_batch=number("generation_batch_size"),
                      steps_per_generation=number("steps_per_generation"))
    for violation in grpo_violations(batch):
        if ranks is None and violation.rule not in ("both", "two"):
            continue
        key = violation.key if violation.key in seen.values else next(
            (k for k in ("per_device_train_batch_size", "num_generations") if k in seen.values), None)
        where = f" ({label('trl')}, world {ranks} from {said})" if ranks is not None else f" ({label('trl')})"
        yield Problem(seen.path(key) if key else seen.prefix, violation.message + where, key=False)


def _config_of(src: Source, seen: View) -> dict[str, Any]:
    """The YAML a command line's `--config` names, read from beside the script or the
    directories above it (scripts run from their repository's root); {} when not found."""
    name = seen.values.get("config")
    if not isinstance(name, str):
        return {}
    from distrecipe.source import parse_text

    here = Path(src.doc.file).resolve().parent
    for folder in (here, *here.parents[:3]):
        path = folder / name
        if path.is_file():
            try:
                data = parse_text(path.read_text(encoding="utf-8"), str(path)).data
            except Exception:  # a file lint reports on its own; here it only lends numbers
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def _world(src: Source, seen: View) -> tuple[int | None, str]:
    """The processes a `trl NAME` command starts: `--num_processes`, else its
    `--accelerate_config` (TRL's shipped ones say 8), else the world lint was given."""
    if seen.line:
        processes = seen.values.get("num_processes")
        if isinstance(processes, str) and processes.isdigit():
            return int(processes), "--num_processes"
        config = seen.values.get("accelerate_config")
        if isinstance(config, str) and (shipped := shipped_world(config)) is not None:
            return shipped, (f"--accelerate_config {config}: TRL's shipped config says num_processes: "
                             f"{shipped}, whatever GPUs the job has")
    return src.ranks, str(src.world.source) if src.world is not None else ""
