"""Resume at launch: check the checkpoint before any rank starts, then hand it over.

`checkpoint.resume` (auto, none or a path) is checked against the job about to start
(`checkpoints.check`): a checkpoint that is missing, partial, or that this job cannot
load, or can load only after a conversion, stops the launch with one line naming why
(and the conversion's exact command). One that loads as is goes to the program in its
kind's own way:

* the HF Trainer: `--resume_from_checkpoint PATH` (what its example scripts pass to
  `trainer.train`);
* every other script: `DISTRECIPE_RESUME=PATH`, with `DISTRECIPE_CHECKPOINT_DIR`,
  `DISTRECIPE_SAVE_EVERY` and `DISTRECIPE_CHECKPOINT_KEEP` from the recipe
  (`api.resume_from()`, `api.checkpoint_dir()`, `api.prune_checkpoints()`);
* a DeepSpeed universal checkpoint also turns on the ds_config's
  `checkpoint.load_universal`, which DeepSpeed needs to read one;
* verl: its own `trainer.resume_mode` / `resume_from_path` (compiled from the recipe);
* OpenRLHF: `--ckpt.load_enable` (compiled from the recipe) loads the tag `latest` names in
  `checkpoint.dir/_actor`, the one checked (`checkpoints.check`); a universal one adds
  `--ds.use_universal_ckpt`, which turns on DeepSpeed's `load_universal` in the ds_config
  OpenRLHF builds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from distrecipe.checkpoints.check import Resume, resume_of
from distrecipe.checkpoints.layout import CheckpointError
from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.errors import Position
from distrecipe.job import Plan
from distrecipe.launch.spec import Program
from distrecipe.output import to_json

RESUME_ENV = "DISTRECIPE_RESUME"
CHECKPOINT_DIR_ENV = "DISTRECIPE_CHECKPOINT_DIR"
SAVE_EVERY_ENV = "DISTRECIPE_SAVE_EVERY"
KEEP_ENV = "DISTRECIPE_CHECKPOINT_KEEP"
"""`checkpoint.keep`: a raw script prunes with `api.prune_checkpoints(saved)` after each save
(the Trainer and verl get their own `save_total_limit` / `max_actor_ckpt_to_keep`)."""
TRAINER_FLAG = "--resume_from_checkpoint"
UNIVERSAL_FLAG = "--ds.use_universal_ckpt"
"""OpenRLHF's switch for DeepSpeed's `checkpoint.load_universal` (`train_ppo_ray`)."""


@dataclass(frozen=True, slots=True)
class Resumed:
    program: Program
    configs: dict[str, str]
    record: dict[str, object] = field(default_factory=dict)
    """What run.json says about the checkpoint used (null path: from scratch)."""
    said: str = ""


def check(plan: Plan, kind: str, user_args: tuple[str, ...], *, cwd: Path, deep: bool) -> Resume | None:
    """The checkpoint the job resumes from, checked before anything is printed or written:
    raises `CheckpointError` (exit 2) for one this job cannot take as is, and for a
    Trainer flag the user gave that says otherwise. `deep` opens the pickled states
    (a launch here); `launch --slurm` checks names and JSON, each node's launch the rest."""
    found = resume_of(plan, kind, cwd=cwd, deep=deep)
    if found is None or found.layout is None or found.verdict is None:
        return found
    if found.verdict.outcome != "resumes as is":
        where = plan.recipe.at("checkpoint.resume", "checkpoint")
        raise CheckpointError(found.verdict.line(found.layout), where)
    if kind == "hf":
        _trainer_flag(user_args, "", _written(plan), plan.recipe.at("checkpoint.resume"))
    return found


def _written(plan: Plan) -> str | None:
    return plan.recipe.checkpoint.resume if plan.recipe.checkpoint is not None else None


def resume(plan: Plan, kind: str, program: Program, configs: Mapping[str, str], *, cwd: Path,
           found: Resume | None) -> Resumed:
    """`program` and `configs` with the checkpoint `check` found handed over, or as they
    were when the recipe says nothing about checkpoints."""
    checkpoint = plan.recipe.checkpoint
    env = dict(program.env)
    if checkpoint is not None and checkpoint.dir is not None:
        env[CHECKPOINT_DIR_ENV] = os.path.abspath(cwd / checkpoint.dir)
    if checkpoint is not None and checkpoint.every is not None:
        env[SAVE_EVERY_ENV] = str(checkpoint.every)
    if checkpoint is not None and checkpoint.keep is not None:
        env[KEEP_ENV] = str(checkpoint.keep)
    files = dict(configs)
    if found is None or found.layout is None or found.verdict is None:
        said = found.said if found is not None else ""
        return Resumed(replace(program, env=env), files, {"path": None, "said": said} if found else {}, said)
    layout, verdict = found.layout, found.verdict
    path = os.path.abspath(layout.path)
    args = program.args
    if kind == "hf":
        args = _trainer_flag(args, path, _written(plan), plan.recipe.at("checkpoint.resume"))
    if kind == "openrlhf" and verdict.universal and UNIVERSAL_FLAG not in args:
        args = (*args, UNIVERSAL_FLAG)
    env[RESUME_ENV] = path
    if verdict.universal and CONFIG_FILE in files:
        config = json.loads(files[CONFIG_FILE])
        config["checkpoint"] = {**config.get("checkpoint", {}), "load_universal": True}
        files[CONFIG_FILE] = to_json(config)
    record: dict[str, object] = {"path": path, "kind": layout.kind, "step": layout.step,
                                 "verdict": verdict.outcome, "rules": list(verdict.rules),
                                 "warnings": list(verdict.warnings), "load_universal": verdict.universal}
    return Resumed(replace(program, args=args, env=env), files, record, found.said)


def _trainer_flag(args: tuple[str, ...], path: str, written: str | None, where: Position) -> tuple[str, ...]:
    """The Trainer's arguments with `--resume_from_checkpoint PATH`: the recipe's path, which
    the hand-off already wrote as given (TrainingArguments' `resume_from_checkpoint`), is
    replaced by the checked one; one the user gave otherwise is refused (say it once)."""
    out: list[str] = []
    given = iter(args)
    for word in given:
        value = None
        if word == TRAINER_FLAG:
            value = next(given, "")
        elif word.startswith(TRAINER_FLAG + "="):
            value = word.split("=", 1)[1]
        if value is None:
            out.append(word)
        elif value != written:
            raise CheckpointError(f"{TRAINER_FLAG} {value} is given to the program and checkpoint.resume "
                                  f"{written} is stated: give one", where)
    return (*out, TRAINER_FLAG, path)


