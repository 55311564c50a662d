"""The HF Trainer as a judge: `TrainingArguments` as `HfArgumentParser` builds them.

Training scripts parse a recipe file (or command-line flags) into a *set* of
dataclasses, of which `TrainingArguments` is one; keys for the others (model, data,
LoRA, TRL's trainer configs) are not the Trainer's business. So a file is judged on
the `TrainingArguments` keys only, and the others are named in the context, never
called errors. A machine without a GPU must still judge `bf16: true`, so the GPU
probe is answered "yes" and the world size is the one the caller states.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast
from unittest import mock

from distrecipe.judges import Note, Verdict, first_line, patched, version

WORLD_DEFAULT = 8
"""Ranks assumed when nothing states the world size: one node of 8 GPUs."""


def field_names() -> frozenset[str]:
    from transformers import TrainingArguments

    return frozenset(f.name for f in dataclasses.fields(TrainingArguments) if f.init)


@contextlib.contextmanager
def on_gpus(world: int) -> Iterator[None]:
    """TrainingArguments as built on an Ampere GPU machine of `world` ranks: the bf16 and
    tf32 probes say yes (tf32 is not switched on in this process), the world is `world`."""
    from transformers import TrainingArguments, training_args

    with patched(training_args, "is_torch_bf16_gpu_available", return_value=True), \
            patched(training_args, "is_torch_tf32_available", return_value=True), \
            patched(training_args, "enable_tf32"), \
            patched(TrainingArguments, "world_size", new_callable=mock.PropertyMock, return_value=world):
        yield


def training_arguments(values: Mapping[str, Any], world: int, *, deepspeed: Any = None,
                       env: Mapping[str, str] | None = None) -> Any:
    """`TrainingArguments` from `values` (only its own fields), through `HfArgumentParser`.

    Raises what the parser or `TrainingArguments.__post_init__` raises. `deepspeed`
    replaces the file's own reference (a path the judge cannot follow); with it,
    `__post_init__` runs the Trainer's `"auto"` fill and builds Accelerate's
    `DeepSpeedPlugin`, which reads the environment `accelerate launch` exported:
    `env`, or none (a plain `deepspeed`/`torchrun` launch).
    """
    from transformers import HfArgumentParser, TrainingArguments

    own = field_names()
    kept = {key: value for key, value in values.items() if key in own and key != "deepspeed"}
    if deepspeed is not None:
        kept["deepspeed"] = deepspeed
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ACCELERATE_")}
    with tempfile.TemporaryDirectory() as tmp, on_gpus(world), \
            mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True):
        kept.setdefault("output_dir", tmp)
        kept.setdefault("report_to", "none")
        (args,) = HfArgumentParser(cast(Any, TrainingArguments)).parse_dict(kept, allow_extra_keys=False)
    return args


def flag_values(flags: Sequence[str]) -> dict[str, Any]:
    """Command-line `--name value` flags as the TrainingArguments values they parse to
    (argparse's types: `--bf16 True` is a bool), keyed by the names the flags give."""
    from transformers import HfArgumentParser, TrainingArguments

    names = [flag[2:].split("=", 1)[0] for flag in flags if flag.startswith("--")]
    parser = HfArgumentParser(cast(Any, TrainingArguments))
    parsed, _ = parser.parse_known_args([*flags, "--output_dir", "unused"])
    return {name: getattr(parsed, name) for name in names if hasattr(parsed, name)}


def judge(values: Mapping[str, Any], world: int = WORLD_DEFAULT) -> Verdict:
    """The Trainer's verdict on a TrainingArguments file (a dict of its keys)."""
    engine = version("transformers")
    others = sorted(key for key in values if key not in field_names())
    context = f"world {world}"
    if others:
        context += "; not TrainingArguments fields (the script's other dataclasses): " + ", ".join(others)
    try:
        training_arguments(values, world)
    except (ValueError, TypeError) as exc:
        return Verdict("refuses", engine, first_line(exc), (Note((), first_line(exc)),), context)
    return Verdict("accepts", engine, "", (), context)


def judge_flags(flags: Sequence[tuple[str, str | None]], world: int = WORLD_DEFAULT, *,
                own: Mapping[str, str] | None = None, keeps_remaining: bool = False) -> Verdict:
    """The Trainer's verdict on a launch command's `--name value` flags (`value` None for a
    bare flag), as a program's `HfArgumentParser((..., TrainingArguments))` parses them.

    Flags TrainingArguments does not have are taken as the program's other dataclasses'
    (`--model_name_or_path`), except a field transformers removed (`engines.hf.REMOVED`):
    HfArgumentParser refuses it ("Some specified arguments are not used"), unless the
    program declares it itself (`own`: field → where), when the Trainer still never reads
    it, or parses with `return_remaining_strings` (`keeps_remaining`), when it is dropped:
    both accepted but different from what the script says. `--deepspeed` and a file
    `--fsdp_config` are the files' own verdicts, left out here.
    """
    import io
    from contextlib import redirect_stderr

    from transformers import HfArgumentParser, TrainingArguments

    from distrecipe.engines.hf import REMOVED

    engine = version("transformers")
    own = own or {}
    argv: list[str] = []
    for name, value in flags:
        if name in ("deepspeed", "fsdp_config", "output_dir"):
            continue
        argv.extend([f"--{name}"] if value is None else [f"--{name}", value])
    context = f"world {world}"
    errors = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp, on_gpus(world), redirect_stderr(errors):
        try:
            _, rest = HfArgumentParser(cast(Any, TrainingArguments)).parse_args_into_dataclasses(
                args=[*argv, "--output_dir", tmp], return_remaining_strings=True)
        except SystemExit:
            message = next((line.split("error: ", 1)[1] for line in reversed(errors.getvalue().splitlines())
                            if "error: " in line), "HfArgumentParser refuses the arguments")
            return Verdict("refuses", engine, message, (Note((), message),), context)
        except (ValueError, TypeError) as exc:
            return Verdict("refuses", engine, first_line(exc), (Note((), first_line(exc)),), context)
    others = [word[2:] for word in rest if word.startswith("--")]
    if others:
        context += "; not TrainingArguments fields (the program's other dataclasses): " + ", ".join(
            sorted(others))
    removed = [name for name in others if name in REMOVED]
    unused = [name for name in removed if name not in own and not keeps_remaining]
    if unused:
        named = ["--" + name for name in unused]
        message = f"Some specified arguments are not used by the HfArgumentParser: {named}"
        return Verdict("refuses", engine, message, (Note((), message),), context)
    notes = tuple(Note((), f"--{name} is the program's own field ({own[name]}): the Trainer reads "
                           f"{REMOVED[name] or 'nothing in its place'}, left at its default")
                  if name in own else Note((), f"--{name} is dropped unread (the program parses with "
                                               "return_remaining_strings=True)") for name in removed)
    if notes:
        return Verdict("differs", engine, "; ".join(n.message for n in notes), notes, context)
    return Verdict("accepts", engine, "", (), context)
