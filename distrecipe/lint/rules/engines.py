"""DR900/DR901/DR902: the engines' own verdicts, run in-process by `lint --engines`.

These rules run the judges of `distrecipe/judges/` (the same the oracle tests use):
DeepSpeed's `DeepSpeedConfig` after the HF Trainer's `"auto"` fill, Accelerate's
loader, launch environment and plugin, verl's Hydra compose, `validate_config` and
worker batch split, and `TrainingArguments`. They import torch and the engines, so
they run only when asked (`--engines`); without it they yield nothing and lint
stays fast and torch-free.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from distrecipe.errors import DistrecipeError
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source

if TYPE_CHECKING:
    from distrecipe.judges import Verdict


def engine_refuses(src: Source) -> Iterator[Problem]:
    """The engine that reads this file refuses it (`lint --engines` only).

    What the engine itself says when it starts on the file: DeepSpeed's config
    parser (after the HF Trainer's fill of `"auto"`), Accelerate's loader, `accelerate
    launch` and the worker's plugin, Hydra and verl's `validate_config` and batch
    split, `TrainingArguments`. The message is the engine's own, with its version;
    the position is the key it names, or the top of the file.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 8, "compile": {"disable": false}}
    ```
    (DeepSpeed 0.19 refuses an unknown key in a section that forbids extras.)

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 8, "compile": {"deepcompile": false}}
    ```

    Fix: what the engine's message says; `distrecipe explain` of the lint rule that
    reports the same problem without the engines, where there is one.
    """
    yield from _problems(src, "refuses")


def engine_differs(src: Source) -> Iterator[Problem]:
    """The engine accepts this file but does not do what it says (`lint --engines` only).

    DeepSpeed starts, but an `"auto"` that nothing fills reaches it as the string
    `"auto"` (its config models drop it and use their default), or a key sits where
    DeepSpeed never reads it; a ds_config that states no `gradient_accumulation_steps`
    runs with 1 under Accelerate's `DeepSpeedPlugin`.

    Fails: deepspeed --world 8
    ```json
    {"bfloat16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
     "zero_optimization": {"stage": 2}}
    ```
    (The Trainer fills `bf16.enabled`, not the old `bfloat16` spelling, so DeepSpeed
    reads `"auto"` as off.)

    Passes: deepspeed --world 8
    ```json
    {"bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
     "zero_optimization": {"stage": 2}}
    ```

    Fix: write the value, or move the key to where the engine reads it.
    """
    yield from _problems(src, "differs")


def engine_not_run(src: Source) -> Iterator[Problem]:
    """The engine's check could not run on the installed release (`lint --engines` only).

    The judge calls or patches a name of the engine that this release no longer has
    (Accelerate 1.16 dropped the private `is_cuda_available` the Accelerate judge
    patched), or the engine failed in a way that is no verdict on the file. That is
    distrecipe's breakage, never the file's: a warning naming the release and what
    was missing, and the file is still judged by lint's own rules.

    Fix: run the engine release distrecipe's judge supports (`distrecipe lint
    --engines` names it), or report the message; nothing in the file.
    """
    yield from _problems(src, "unavailable")


def _problems(src: Source, outcome: str) -> Iterator[Problem]:
    if not src.workspace.engines:
        return
    verdict = src.workspace.verdicts.get(src.doc.file)
    if verdict is None:
        verdict = src.workspace.verdicts[src.doc.file] = _judge(src)
    if verdict.outcome != outcome:
        return
    for note in verdict.notes or ():
        yield Problem(note.path, f"{verdict.engine}: {note.message}", key=bool(note.path))


def _judge(src: Source) -> Verdict:
    """The verdict of the engine that reads `src` (see `distrecipe/judges/`)."""
    from distrecipe.judges import EngineMissing, JudgeUnavailable, Note, Verdict, engine_output, first_line

    try:
        with warnings.catch_warnings(), engine_output():
            warnings.simplefilter("ignore")  # the engines' import-time chatter is not a finding
            verdict = _run(src)
    except EngineMissing as exc:
        raise DistrecipeError(f"lint --engines: {exc}") from None
    except JudgeUnavailable as exc:
        return _unavailable(src, str(exc))
    except Exception as exc:  # the judges catch every refusal; anything else is the judge's own failure
        return _unavailable(src, f"{type(exc).__name__}: {first_line(exc)}")
    if verdict.outcome in ("refuses", "differs") and not verdict.notes:
        return Verdict(verdict.outcome, verdict.engine, verdict.message, (Note((), verdict.message),),
                       verdict.context)
    return verdict


def _unavailable(src: Source, why: str) -> Verdict:
    from distrecipe.judges import Note, Verdict, version

    engine = version(_PACKAGES.get(src.kind, src.kind))
    message = f"could not run this release's check ({why}): distrecipe's judge, not the file; the engine " \
              "has not judged this file"
    return Verdict("unavailable", engine, message, (Note((), message),))


_PACKAGES = {"hf": "transformers"}
"""The installed package that judges a file of this kind, where its name is not the kind's."""


def _run(src: Source) -> Verdict:
    from distrecipe.judges import Verdict, version

    if src.kind == "deepspeed":
        from distrecipe.judges import deepspeed

        version("deepspeed")
        world = src.ranks if src.ranks is not None else deepspeed.implied_world(src.data)[0]
        return deepspeed.judge(src.data, world)
    if src.kind == "accelerate":
        from distrecipe.judges import accelerate

        version("accelerate")
        return accelerate.judge(src.path)
    if src.kind == "hf":
        from distrecipe.judges import hf

        version("transformers")
        return hf.judge(src.data)
    if src.kind == "verl":
        version("verl")
        return src.workspace.verl_verdict(src.path, _override_text(src))
    return Verdict("accepts", "", "")


def _override_text(src: Source) -> str:
    """The file as override lines: a script or override file as it is; a verl YAML
    flattened to the `key=value` lines it stands for."""
    from distrecipe.engines.hydra import format_value
    from distrecipe.engines.native import OVERRIDE_SUFFIXES
    from distrecipe.keys import joined

    if src.doc.lines and src.path.suffix.lower() in OVERRIDE_SUFFIXES:
        return "\n".join(src.doc.lines)

    def leaves(node: Any, path: tuple[str | int, ...]) -> Iterator[str]:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                yield from leaves(value, (*path, key))
        else:
            yield f"{joined(path)}={format_value(node)}"

    return "\n".join(leaves(src.data, ()))
