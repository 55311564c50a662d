"""The check `launch`, `lint RECIPE` and `distrecipe checkpoint check` share: which
checkpoint the recipe resumes from, and the verdict for this job.

`deep=False` (lint) reads names and JSON only; `deep=True` (launch, checkpoint) also
opens DeepSpeed's pickled states for the stage and batch stored inside (`inspect`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distrecipe.checkpoints.layout import DS_LATEST, DS_LATEST_UNIVERSAL, CheckpointError, Layout, read
from distrecipe.checkpoints.verdict import Verdict, job_of, resolve_resume, verdict
from distrecipe.engines.openrlhf import ACTOR_CHECKPOINTS, CRITIC_CHECKPOINTS
from distrecipe.errors import Position
from distrecipe.job import Plan
from distrecipe.translator.openrlhf import resume_refusal


@dataclass(frozen=True, slots=True)
class Resume:
    """The checkpoint a launch resumes from and its verdict; `layout` None: from scratch."""

    layout: Layout | None
    verdict: Verdict | None
    said: str
    """One line for the user: what was chosen and why."""


def resume_of(plan: Plan, kind: str, *, cwd: Path, deep: bool, path: str | None = None) -> Resume | None:
    """The recipe's `checkpoint.resume` (or `path`, given on the command line) checked
    against `plan`; None when neither says to resume. Raises `CheckpointError` at the
    recipe's key for a path that is missing, not a checkpoint or partial, and for `auto`
    without `checkpoint.dir`."""
    checkpoint = plan.recipe.checkpoint
    stated = (("checkpoint.dir", checkpoint.dir if checkpoint else None),
              ("checkpoint.resume", checkpoint.resume if checkpoint else None), ("checkpoint.resume", path))
    for key, value in stated:
        if value is not None and "\0" in value:  # no file system takes it; the schema admits any text
            raise CheckpointError(f"{key} holds a NUL character, which no path can", plan.recipe.at(key))
    resume = path if path is not None else (checkpoint.resume if checkpoint is not None else None)
    if resume is None:
        return None
    where = plan.recipe.at("checkpoint.resume", "checkpoint")
    directory = checkpoint.dir if checkpoint is not None else None
    if kind == "openrlhf":
        return _openrlhf(plan, resume, directory, cwd=cwd, deep=deep)
    if resume == "auto" and directory is None:
        raise CheckpointError("checkpoint.resume auto looks for the latest complete checkpoint in "
                              "checkpoint.dir, which the recipe does not state", where)
    refine: Callable[[Layout], Layout] | None = None
    if deep:
        from distrecipe.checkpoints.inspect import deepen

        refine = deepen
    try:
        chosen = resolve_resume(resume, directory, cwd, refine)
    except CheckpointError as exc:
        raise CheckpointError(exc.message, where) from None
    if chosen is None:
        said = ("checkpoint.resume none: starting from scratch" if resume == "none" else
                f"checkpoint.resume auto: no complete checkpoint in {directory} yet; starting from scratch")
        return Resume(None, None, said)
    try:
        layout = read(chosen)
        if deep:
            from distrecipe.checkpoints.inspect import deepen

            layout = deepen(layout)
    except CheckpointError as exc:
        raise CheckpointError(exc.message, where) from None
    return _judged(plan, kind, layout)


def _judged(plan: Plan, kind: str, layout: Layout) -> Resume:
    """The verdict on a chosen checkpoint for `plan` run as `kind`; raises for a partial one
    and for one this job cannot load."""
    where = plan.recipe.at("checkpoint.resume", "checkpoint")
    if not layout.complete:
        raise CheckpointError(f"checkpoint {layout.path} is partial ({layout.partial}): it cannot be resumed "
                              "from; give an earlier one or resume auto", where)
    found = verdict(layout, job_of(plan, kind))
    if found.outcome == "cannot":
        raise CheckpointError(found.line(layout), where)
    return Resume(layout, found, found.line(layout))


def _openrlhf(plan: Plan, resume: str, directory: str | None, *, cwd: Path, deep: bool) -> Resume | None:
    """What OpenRLHF's `--ckpt.load_enable` loads: the tag `latest` (`latest_universal` for a
    universal one) names in `checkpoint.dir/_actor`, and nothing else (`translator.openrlhf.
    resume_refusal`): a partial tag there stops the launch (DeepSpeed would fail loading it,
    OpenRLHF cannot be pointed at an earlier one), a path that is not that tag is refused. A
    critic's save in `_critic` must be the same step with the same verdict: with
    `--ds.use_universal_ckpt` DeepSpeed reads `latest_universal` there too and raises where
    there is none (`load_checkpoint`), after Ray and the models have started."""
    where = plan.recipe.at("checkpoint.resume", "checkpoint")
    refused = resume_refusal(directory, resume)
    if refused is not None:
        raise CheckpointError(refused, where)
    if resume == "none":
        return Resume(None, None, "checkpoint.resume none: starting from scratch")
    assert directory is not None
    actor = cwd / directory / ACTOR_CHECKPOINTS
    layout = _marked(actor, deep=deep, where=where)
    if layout is None:
        if resume != "auto":
            raise CheckpointError(f"checkpoint.resume {resume}: {actor} holds no DeepSpeed `latest`, so "
                                  "OpenRLHF would load nothing", where)
        return Resume(None, None, f"checkpoint.resume auto: no checkpoint in {actor} yet (no `latest`); "
                                  "starting from scratch")
    given = (cwd / resume).resolve() if resume != "auto" else None
    if given is not None and given not in (actor.resolve(), actor.parent.resolve(), layout.path.resolve()):
        raise CheckpointError(f"checkpoint.resume {resume}: OpenRLHF loads the tag `latest` names in {actor} "
                              f"({layout.path.name}), not another one", where)
    found = _judged(plan, "openrlhf", layout)
    critic = _marked(actor.parent / CRITIC_CHECKPOINTS, deep=deep, where=where)
    if critic is not None:  # a critic's save loads beside the actor's, the same way
        theirs = _judged(plan, "openrlhf", critic)
        assert found.verdict is not None and theirs.verdict is not None
        if (critic.step, theirs.verdict.outcome, theirs.verdict.universal) != (
                layout.step, found.verdict.outcome, found.verdict.universal):
            raise CheckpointError(f"OpenRLHF loads the critic's checkpoint beside the actor's: "
                                  f"{theirs.said}, where the actor's is {layout.path.name} "
                                  f"({found.verdict.outcome}); save, or convert, both alike", where)
    return found


def _marked(folder: Path, *, deep: bool, where: Position) -> Layout | None:
    """The DeepSpeed checkpoint a save dir's `latest` (or `latest_universal`) names, as
    OpenRLHF's `load_ckpt(model, folder)` loads it (no tag); None where neither marker is."""
    try:
        markers = (folder / name for name in (DS_LATEST, DS_LATEST_UNIVERSAL))
        if not (folder.is_dir() and any(marker.is_file() for marker in markers)):
            return None
        layout = read(folder)
        if deep:
            from distrecipe.checkpoints.inspect import deepen

            layout = deepen(layout)
    except (CheckpointError, OSError) as exc:
        message = exc.message if isinstance(exc, CheckpointError) else str(exc)
        raise CheckpointError(message, where) from None
    return layout
