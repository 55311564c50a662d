"""TRL config YAMLs (`trl NAME --config FILE`, scripts built on `TrlParser`), judged by the
dataclasses of the command that reads them and by `GRPOConfig.__post_init__`."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from distrecipe.engines.hf import REMOVED, field_release
from distrecipe.engines.tables import history, label, training_flags
from distrecipe.engines.trl import Command, GrpoBatch, command_of, commands, grpo_violations, renamed
from distrecipe.keys import did_you_mean, integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


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
    for key, other, command in _unknown(src):
        if other is None:
            continue
        replacing = renamed(str(key)) or REMOVED.get(str(key))
        use = f"; use {replacing}" if replacing else ""
        yield Problem((key,), f"{_refused(key, command)}; {other}{use}", key=True)


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
    for key, other, command in _unknown(src):
        if other is None:
            yield Problem((key,), _refused(key, command) + did_you_mean(str(key), sorted(command.accepted)),
                          key=True)


def _refused(key: object, command: Command) -> str:
    return (f"{key!r} is no field of {label('trl')}'s `trl {command.name}` dataclasses "
            f"({', '.join(command.dataclasses)}; {label('hf')}'s TrainingArguments): TrlParser refuses "
            f"the file (\"Unknown arguments from config file\")")


def _unknown(src: Source) -> Iterator[tuple[str | int, str | None, Command]]:
    """Each key the command does not accept, with where else it exists (another command
    of this release, another TRL release, a removed TrainingArguments field), or None."""
    command = command_of(src.data)
    others = sorted(name for name in commands() if name != command.name)
    for key in src.data:
        name = str(key)
        if name in command.accepted:
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
    command = command_of(src.data)
    flags = training_flags()
    for key, value in src.data.items():
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
        yield Problem((key,), f"{key}: {value!r} is no {wanted} ({label('trl')}'s {command.owner(name)}): "
                              f"TrlParser's argparse refuses it (\"invalid {wanted} value: {value!r}\")")


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
    command = command_of(src.data)
    if command.name != "grpo":
        return
    generations = integer(src.data.get("num_generations", command.default("num_generations")))
    per_device = integer(src.data.get("per_device_train_batch_size",
                                      command.default("per_device_train_batch_size")))
    accumulation = integer(src.data.get("gradient_accumulation_steps",
                                        command.default("gradient_accumulation_steps")))
    if generations is None or per_device is None or accumulation is None:
        return
    batch = GrpoBatch(per_device=per_device, world=src.ranks or 1, accumulation=accumulation,
                      generations=generations,
                      generation_batch=integer(src.data.get("generation_batch_size")),
                      steps_per_generation=integer(src.data.get("steps_per_generation")))
    for violation in grpo_violations(batch):
        if src.ranks is None and violation.rule not in ("both", "two"):
            continue
        key = violation.key if violation.key in src.data else next(
            (k for k in ("per_device_train_batch_size", "num_generations") if k in src.data), None)
        where = f" ({label('trl')}, world {src.world})" if src.world is not None else f" ({label('trl')})"
        yield Problem((key,) if key else (), violation.message + where, key=False)
