"""TrainingArguments written as a launch script's flags, or a value HfArgumentParser refuses.

A launch script passes TrainingArguments on the command line
(`torchrun train.py --per_device_train_batch_size 4 ...`); `engines.argv` reads them
as HfArgumentParser does, from the installed transformers' own parser
(`tables.training_flags`), so a flag is judged exactly as the same key in a
TrainingArguments JSON.
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.argv import Launch, launches, refused_flags, trainer_launch
from distrecipe.engines.hf import REMOVED, field_release
from distrecipe.engines.shell import is_script
from distrecipe.engines.tables import label, training_arguments, training_flags
from distrecipe.keys import did_you_mean
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def _launches(src: Source) -> list[Launch]:
    """The launch commands of the script `src` is (none for a JSON or YAML file)."""
    if not is_script(src.path) or src.within:
        return []
    return launches("\n".join(src.doc.lines), src.doc.file)


def removed_flag(src: Source) -> Iterator[Problem]:
    """A launch script passes a TrainingArguments flag the installed transformers removed.

    `HfArgumentParser` refuses an argument no dataclass of the program takes ("Some
    specified arguments are not used by the HfArgumentParser"), at start-up on every
    rank; where the program's own dataclass still takes the name, the Trainer never
    reads it, so what it asks for does not happen (`--evaluation_strategy steps` leaves
    `eval_strategy` at `no`: no evaluation runs). Checked on commands that run a Trainer
    (they pass `--per_device_train_batch_size`, or `--deepspeed` a file). The fields are
    the judging release's: a project that runs another transformers says so
    (`[tool.distrecipe] engines = { transformers = "4.46" }`, `--engine-version`), and a
    field that release still has is not reported; one only a later release has is.

    Fails: hf
    ```sh
    torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4 --evaluation_strategy steps
    ```

    Passes: hf
    ```sh
    torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4 --eval_strategy steps
    ```

    Fix: the replacing flag the message names, or delete it.
    """
    fields = training_arguments()
    for launch in _launches(src):
        if not trainer_launch(launch):
            continue
        for name, (flag, _) in launch.flags.items():
            field = name.replace("-", "_")
            if field in fields:
                continue
            when = field_release(field)
            if field not in REMOVED and when is None:
                continue  # the program's own argument, as far as any release here knows
            instead = REMOVED.get(field)
            use = f"use --{instead}" if instead and " " not in instead else (
                f"use {instead}" if instead else "nothing replaces it")
            said = "; ".join(part for part in (when or "removed", use if field in REMOVED else "") if part)
            yield Problem((), f"--{name} is no TrainingArguments field in {label('hf')} ({said}): "
                              "HfArgumentParser refuses it, and where the program's own dataclass takes it "
                              "the Trainer never reads it", where=flag.where)


def value_refused(src: Source) -> Iterator[Problem]:
    """A TrainingArguments value the installed transformers refuses at start-up.

    An enum field (`optim`, `lr_scheduler_type`, `eval_strategy`, `save_strategy`,
    `logging_strategy`, `hub_strategy`) takes only the installed release's names:
    `TrainingArguments.__post_init__` raises on `"optim": "adamw_hf"` (removed in
    transformers 5) in a JSON or YAML file, and on the command line argparse refuses
    any value outside a field's choices, a number that is not one (`--learning_rate
    ...`, a template's placeholder), or a boolean that is neither true nor false. The
    names and types are read from the installed `HfArgumentParser`.

    Fails: hf
    ```json
    {"output_dir": "out", "per_device_train_batch_size": 4, "optim": "adamw_hf"}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "per_device_train_batch_size": 4, "optim": "adamw_torch"}
    ```

    Fix: one of the values the message lists.
    """
    flags = training_flags()
    if not is_script(src.path) or src.within:
        for key, value in src.data.items():
            entry = flags.get(key)
            if entry is None or entry["type"] != "enum" or not isinstance(value, str):
                continue
            choices = list(map(str, entry["choices"]))
            if value not in choices:
                yield Problem((key,), f"{key} {value!r} is not one of {label('hf')}'s: TrainingArguments "
                                      f"refuses it at start-up ({_listed(value, choices)})")
        return
    for launch in _launches(src):
        if not trainer_launch(launch):
            continue
        for flag, value, field, accepts in refused_flags(launch):
            shown = "no value" if value is None else repr(value.value)
            named = flags[field].get("choices")
            if named is not None and value is not None and value.value is not None:
                accepts = _listed(value.value, list(map(str, named)))
            yield Problem((), f"--{field} {shown}: HfArgumentParser ({label('hf')}) refuses it at start-up; "
                              f"it takes {accepts}", where=(value or flag).where)


def _listed(value: str, choices: list[str]) -> str:
    """The choices, or for a long list their number and the closest one."""
    if len(choices) <= 12:
        return "one of " + ", ".join(choices)
    return f"one of {len(choices)} names{did_you_mean(value, choices)}"
