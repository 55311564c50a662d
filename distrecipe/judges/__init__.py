"""The engines' own verdicts on a native config, run in-process, on CPU.

A judge hands a config to the engine that will read it (DeepSpeed's `DeepSpeedConfig`,
the HF Trainer's `"auto"` fill, Accelerate's loader, launch environment and plugins,
verl's Hydra compose and `validate_config`) and reports what that engine makes of it:
it accepts the file as written, refuses it (with the engine's own message), or accepts
it but silently does something other than the file says. The tests use the judges as
oracles of lint, and `lint --engines` runs them for a user.

This package imports no engine at import time: each judge module imports its engine
when called, so lint's fast path stays torch-free (`tests/test_lint_fast_path.py`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal
from unittest import mock

from distrecipe.source import KeyPath

Outcome = Literal["accepts", "refuses", "differs", "not-judgeable", "unavailable"]
"""`differs`: the engine starts, but does something other than the file says;
`unavailable`: the judge itself could not run on the installed release."""


@dataclass(frozen=True, slots=True)
class Note:
    """One place the engine refuses or departs from the file: a key path and what happens."""

    path: KeyPath
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the engine makes of one config, and under which assumptions."""

    outcome: Outcome
    engine: str
    """The judging engines and their versions, e.g. `transformers 5.10.4 + deepspeed 0.19.8`."""
    message: str
    """The first line of the engine's own message (refusal), or a summary of the notes."""
    notes: tuple[Note, ...] = ()
    context: str = ""
    """What the judge assumed that the file does not say (world size, TrainingArguments)."""


@contextlib.contextmanager
def engine_output() -> Iterator[None]:
    """While a judge runs, what the engines print goes to stderr: stdout is the caller's
    report (`lint --format json`). DeepSpeed's logger writes `[WARNING] [real_accelerator.py
    ...]` to the stdout it saw at import, and verl's `validate_config` prints; a handler
    made here sees stderr, and one made before is pointed there."""
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
        for logger in loggers:
            for handler in getattr(logger, "handlers", ()):
                if isinstance(handler, logging.StreamHandler) and handler.stream is out:
                    handler.setStream(sys.stderr)


EXTRAS = {"transformers": "hf"}
"""The pyproject extra that installs a package, where its name is not the package's."""


class EngineMissing(Exception):
    """An engine a judge needs is not installed; the message names the pip extra."""


class JudgeUnavailable(Exception):
    """The judge cannot run on the installed release of its engine: a name it patches or
    calls is gone. The judge's own breakage, never a verdict on the user's file."""


def needed(owner: Any, name: str) -> Any:
    """`owner.name`, a private helper of the engine the judge calls; `JudgeUnavailable`
    when the installed release no longer has it."""
    if not hasattr(owner, name):
        where = getattr(owner, "__name__", type(owner).__name__)
        raise JudgeUnavailable(f"{where} has no {name!r}")
    return getattr(owner, name)


@contextlib.contextmanager
def patched(owner: Any, name: str, **how: Any) -> Iterator[None]:
    """`mock.patch.object(owner, name, **how)`, after checking that `owner` still has
    `name`: engines rename their private helpers between releases (Accelerate 1.16
    dropped `accelerate.utils.dataclasses.is_cuda_available`), and a patch of a missing
    name must say the judge cannot run, not look like the engine refusing the file."""
    needed(owner, name)
    with mock.patch.object(owner, name, **how):
        yield


def version(package: str) -> str:
    """`package VERSION` of an installed engine; `EngineMissing` when it is not installed."""
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        extra = EXTRAS.get(package, package)
        raise EngineMissing(f"{package} is not installed (pip install 'distrecipe[{extra}]')") from None


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, with its type when it has none."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def find_auto(data: object, path: KeyPath = ()) -> list[KeyPath]:
    """Key paths whose value is the string "auto" (any case), in document order."""
    if isinstance(data, dict):
        return [p for key, value in data.items() for p in find_auto(value, (*path, key))]
    if isinstance(data, list):
        return [p for index, value in enumerate(data) for p in find_auto(value, (*path, index))]
    return [path] if isinstance(data, str) and data.lower() == "auto" else []
