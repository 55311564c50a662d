"""DeepSpeed as a judge, without processes: its config parser at any world size.

`DeepSpeedConfig` reads the data-parallel world from `deepspeed.comm`; patching the
two functions lets a test or `lint --engines` ask "would DeepSpeed accept this, and
what would it derive" for 32 ranks on a laptop.

A ds_config holding `"auto"` is a template for the HF Trainer (directly, or through
Accelerate, which hands it to the same `HfTrainerDeepSpeedConfig`): the Trainer fills
it from `TrainingArguments` first, refusing values that contradict them, and
DeepSpeed judges the filled dict. What DeepSpeed accepts but does not do as written
is a difference: an `"auto"` nobody fills, or a key DeepSpeed never reads (found by
recording which keys its parser looks at).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from distrecipe.judges import Note, Verdict, find_auto, first_line, patched, version
from distrecipe.judges import hf as hf_judge
from distrecipe.keys import dotted, integer
from distrecipe.source import KeyPath

READ_ELSEWHERE = frozenset({"optimizer", "scheduler", "activation_checkpointing", "aio", "flops_profiler",
                            "autotuning"})
"""Top-level sections read by DeepSpeed modules other than `DeepSpeedConfig` (at initialize)."""
HIDDEN_SIZE = 4096
"""The model width assumed for the Trainer's hidden-size-based fills (a 7B model's)."""
TRAINING_STEPS = 1000
"""Optimizer steps assumed for the Trainer's scheduler fills."""


@contextmanager
def world_of(size: int) -> Iterator[None]:
    """DeepSpeed's view of the process group: `size` ranks, this one rank 0."""
    import deepspeed.comm as deepspeed_comm

    with patched(deepspeed_comm, "get_world_size", return_value=size), \
            patched(deepspeed_comm, "get_rank", return_value=0):
        yield


def parse(config: Mapping[str, Any], world: int) -> Any:
    """DeepSpeed's own parsed config (raises what DeepSpeed raises)."""
    from deepspeed.runtime.config import DeepSpeedConfig

    with world_of(world):
        return DeepSpeedConfig(copy.deepcopy(dict(config)))


def refusals() -> tuple[type[BaseException], ...]:
    """The exceptions by which DeepSpeed's config parser refuses a config."""
    from deepspeed.runtime.config import DeepSpeedConfigError
    from pydantic import ValidationError

    return AssertionError, ValueError, TypeError, KeyError, DeepSpeedConfigError, ValidationError


def accepts(config: Mapping[str, Any], world: int) -> bool:
    try:
        parse(config, world)
    except refusals():
        return False
    return True


def hf_fill(config: Mapping[str, Any], values: Mapping[str, Any], world: int,
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ds_config the HF Trainer hands DeepSpeed, `"auto"` filled from `values`.

    What `TrainingArguments(deepspeed=...)` does (the Trainer's fill, then Accelerate's
    `DeepSpeedPlugin` fill from the launch environment `env`), then what the Trainer
    does once it has the model (`trainer_config_finalize`). Raises the Trainer's
    ValueError when a concrete value contradicts the arguments.
    """
    model = SimpleNamespace(config=SimpleNamespace(hidden_size=HIDDEN_SIZE))
    args = hf_judge.training_arguments(values, world, deepspeed=copy.deepcopy(dict(config)), env=env)
    with hf_judge.on_gpus(world):
        args.hf_deepspeed_config.trainer_config_finalize(args, model, TRAINING_STEPS)
    filled = dict(args.hf_deepspeed_config.config)
    return filled


def trainer_values(config: Mapping[str, Any], world: int) -> dict[str, Any]:
    """TrainingArguments that agree with every concrete value the file states.

    For a template judged without its training script: the Trainer's defaults,
    except where the file itself says what the run uses.
    """
    values: dict[str, Any] = {}

    def concrete(*path: str) -> Any:
        node: Any = config
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        return None if isinstance(node, str) or node is None else node

    pairs = {"per_device_train_batch_size": ("train_micro_batch_size_per_gpu",),
             "gradient_accumulation_steps": ("gradient_accumulation_steps",),
             "max_grad_norm": ("gradient_clipping",), "learning_rate": ("optimizer", "params", "lr"),
             "adam_epsilon": ("optimizer", "params", "eps"),
             "weight_decay": ("optimizer", "params", "weight_decay")}
    for name, path in pairs.items():
        if (value := concrete(*path)) is not None:
            values[name] = value
    if isinstance(betas := concrete("optimizer", "params", "betas"), list) and len(betas) == 2:
        values["adam_beta1"], values["adam_beta2"] = betas
    for name in ("fp16", "bf16"):
        if isinstance(enabled := concrete(name, "enabled"), bool):
            values[name] = enabled
    total = concrete("train_batch_size")
    if isinstance(total, int) and "per_device_train_batch_size" not in values:
        per_rank = world * values.get("gradient_accumulation_steps", 1)
        if total % per_rank == 0:
            values["per_device_train_batch_size"] = total // per_rank
    return values


@dataclass
class _Reads:
    """Which keys of which (sub)mapping DeepSpeed's parser looked at."""

    read: dict[KeyPath, set[str]] = field(default_factory=dict)

    def mark(self, path: KeyPath, key: object) -> None:
        self.read.setdefault(path, set()).add(str(key))


class _Recording(dict[str, Any]):
    """A dict that records every key looked up, in place of a ds_config (sub)section.

    Iterating a section (as `Model(**section)` does) counts as reading every key: a
    pydantic section that forbids extra keys refuses unknown ones itself. Iterating the
    top level does not: `DeepSpeedConfig` only scans it for removed keys.
    """

    def __init__(self, data: Mapping[str, Any], path: KeyPath, reads: _Reads) -> None:
        super().__init__({key: _wrap(value, (*path, key), reads) for key, value in data.items()})
        self._path = path
        self._reads = reads
        reads.read.setdefault(path, set())

    def _all(self) -> None:
        if not self._path:
            return
        for key in dict.__iter__(self):
            self._reads.mark(self._path, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._reads.mark(self._path, key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._reads.mark(self._path, key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._reads.mark(self._path, key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def items(self) -> Any:
        self._all()
        return super().items()

    def values(self) -> Any:
        self._all()
        return super().values()

    def __reduce_ex__(self, protocol: Any) -> Any:
        # DeepSpeedConfig copies the top level; the copy must keep recording into `reads`.
        return _Recording, (dict(super().items()), self._path, self._reads)


def _wrap(value: Any, path: KeyPath, reads: _Reads) -> Any:
    return _Recording(value, path, reads) if isinstance(value, dict) else value


def ignored_keys(config: Mapping[str, Any], world: int) -> list[KeyPath]:
    """Keys DeepSpeed's parser never looks at, in sections it reads key by key.

    A section no key of which is looked at is handed on whole (an optimizer's params)
    and is not judged; top-level sections other modules read are not counted, nor
    comment-style keys (`_comment`, `//...`), which say nothing to ignore.
    """
    from deepspeed.runtime.config import DeepSpeedConfig

    reads = _Reads()
    with world_of(world):
        DeepSpeedConfig(_Recording(copy.deepcopy(dict(config)), (), reads))
    ignored = []
    for path, seen in reads.read.items():
        if not seen:
            continue
        node: Any = config
        for part in path:
            node = node[part]
        for key in node:
            if key in seen or key.startswith(("_", "//", "#")) or (not path and key in READ_ELSEWHERE):
                continue
            ignored.append((*path, key))
    return ignored


def refusal_notes(exc: BaseException, config: Mapping[str, Any]) -> tuple[Note, ...]:
    """Where DeepSpeed's refusal points in the file: pydantic's error locations, or the
    first top-level key its message quotes; the file's top when it names none."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        notes = []
        for error in exc.errors():
            loc = tuple(str(part) for part in error["loc"])
            path = _locate(config, loc) or loc
            notes.append(Note(path, f"{dotted(path)}: {error['msg']}"))
        return tuple(notes)
    for key in config:
        if f"'{key}'" in str(exc) or f'"{key}"' in str(exc):
            return (Note((key,), first_line(exc)),)
    return (Note((), first_line(exc)),)


def _locate(config: Any, loc: tuple[str, ...], path: KeyPath = ()) -> KeyPath | None:
    """The first key path in `config` that ends with `loc` (pydantic locates within a section)."""
    if not isinstance(config, Mapping):
        return None
    node: Any = config
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            break
        node = node[part]
    else:
        return (*path, *loc)
    for key, value in config.items():
        if (found := _locate(value, loc, (*path, key))) is not None:
            return found
    return None


def implied_world(config: Mapping[str, Any]) -> tuple[int, str]:
    """The world a ds_config runs at, and where that comes from.

    All three batch numbers state it; otherwise one node of 8 is assumed, or, when the
    file's numbers cannot be met on 8, the largest world below 8 that meets them.
    """
    total, micro, accumulation = (integer(config.get(key)) for key in (
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))
    if (total and micro and accumulation and total % (micro * accumulation) == 0
            and total // (micro * accumulation) >= 1):
        return total // (micro * accumulation), "the file's three batch numbers"
    if total and micro:
        for world in range(hf_judge.WORLD_DEFAULT, 0, -1):
            if total % (micro * world) == 0:
                largest = ", the largest up to 8 its batch numbers allow"
                return world, "assumed" + ("" if world == hf_judge.WORLD_DEFAULT else largest)
    return hf_judge.WORLD_DEFAULT, "assumed"


def judge(config: Mapping[str, Any], world: int = hf_judge.WORLD_DEFAULT, *,
          trainer: Mapping[str, Any] | None = None, trainer_from: str = "",
          env: Mapping[str, str] | None = None) -> Verdict:
    """DeepSpeed's verdict on a ds_config at `world` ranks (see the module docstring).

    `trainer`: the TrainingArguments values of the script that uses the file, when
    known; a file holding `"auto"` without one is filled from `trainer_values`.
    """
    engine = version("deepspeed")
    context = f"world {world}"
    autos = find_auto(config)
    filled = dict(config)
    if trainer is not None or autos:
        engine = f"{version('transformers')} + {engine}"
        values = dict(trainer) if trainer is not None else trainer_values(config, world)
        context += "; TrainingArguments " + (trainer_from or "defaults + the file's concrete values") + ": " \
            + (", ".join(f"{k}={values[k]}" for k in sorted(values)) or "defaults")
        try:
            filled = hf_fill(config, values, world, env)
        except ValueError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            notes = tuple(Note(tuple(line.split(" ", 1)[0].removeprefix("-").split(".")), line)
                          for line in lines[1:-1] if line.startswith("-"))
            return Verdict("refuses", engine, first_line(exc), notes, context)
    unfilled = find_auto(filled)
    try:
        parse(filled, world)
    except refusals() as exc:
        notes = refusal_notes(exc, filled)
        message = first_line(exc)
        if message != notes[0].message:
            message += f": {notes[0].message}"
        return Verdict("refuses", engine, message, notes, context)
    differs = [Note(path, f"{dotted(path)}: \"auto\" that nothing fills reaches DeepSpeed as the string "
                          f"\"auto\"") for path in unfilled]
    differs += [Note(path, f"{dotted(path)}: DeepSpeed never reads this key")
                for path in ignored_keys(filled, world)]
    if differs:
        summary = "; ".join(note.message for note in differs)
        return Verdict("differs", engine, summary, tuple(differs), context)
    return Verdict("accepts", engine, "", (), context)
