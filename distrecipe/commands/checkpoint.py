"""`distrecipe checkpoint`: read a checkpoint, check a job against it, convert it.

`show PATH` prints the layout read from the engine's files (a save dir: every checkpoint
in it, and which one `resume: auto` takes); `check RECIPE` gives the verdict for the
recipe's job and its `checkpoint.resume` (or `--checkpoint PATH`); `convert` runs the
converter the verdict names. Bad input is one positioned line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import click

from distrecipe.checkpoints.layout import CheckpointError, candidates, latest_complete, read
from distrecipe.commands.options import overrides_option, recipe_argument
from distrecipe.errors import Position
from distrecipe.recipe import ProgramKind


def _at(path: Path, exc: CheckpointError) -> CheckpointError:
    """The error placed at the path it is about, when it has no recipe position."""
    if exc.where is not None:
        return exc
    return CheckpointError(exc.message, Position(str(path), 1, 1))


@click.group("checkpoint")
def command() -> None:
    """Read checkpoints, check that a job can resume from one, convert them."""


@command.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def show(path: Path, fmt: str) -> None:
    """The checkpoint at PATH (or every one in a save dir), as its engine's files say
    (DeepSpeed's pickled model states included: the ranks and stage stored there)."""
    from distrecipe.checkpoints.inspect import deepen

    try:
        found = candidates(path) if path.is_dir() else []
        listed = [deepen(item) if item.complete else item for item in found]
        chosen = latest_complete(path, deepen) if path.is_dir() else None
        layouts = listed or [deepen(read(path))]
        if not listed:
            chosen = layouts[0] if layouts[0].complete else None
    except CheckpointError as exc:
        raise _at(path, exc) from None
    if fmt == "json":
        rows = [{"path": str(item.path), "kind": item.kind, "step": item.step, "complete": item.complete,
                 "partial": item.partial, "dp": item.dp, "tp": item.tp, "pp": item.pp, "stage": item.stage,
                 "world": item.world, "chosen": chosen is not None and item.path == chosen.path}
                for item in layouts]
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for item in layouts:
        mark = "*" if chosen is not None and item.path == chosen.path else " "
        click.echo(f"{mark} {item.path}: {item.describe()}")
    if chosen is None:
        click.echo("no complete checkpoint: resume auto starts from scratch")


@command.command("check")
@recipe_argument
@overrides_option
@click.option("--checkpoint", "given", type=click.Path(path_type=str), default=None,
              help="The checkpoint to check (default: the recipe's checkpoint.resume).")
@click.option("--program-kind", type=click.Choice(get_args(ProgramKind)),
              default=None, help="How the script loads (default: launch.program_kind, else the backend's).")
def check(recipe: str, overrides: tuple[str, ...], given: str | None, program_kind: str | None) -> int:
    """Whether RECIPE's job resumes from its checkpoint: as is, after a conversion (the exact
    command), or not at all. Exit 0 as is, 1 after a conversion, 2 cannot."""
    from distrecipe.api import plan_of_recipe
    from distrecipe.checkpoints.check import resume_of
    from distrecipe.checkpoints.verdict import stated_kind
    from distrecipe.translator.load import read_recipe

    _, declared = read_recipe(recipe, overrides)
    plan = plan_of_recipe(declared)
    kind = program_kind or stated_kind(plan)
    found = resume_of(plan, kind, cwd=Path.cwd(), deep=True, path=given)
    if found is None:
        raise CheckpointError("nothing to check: the recipe states no checkpoint.resume; give "
                              "--checkpoint PATH", plan.recipe.at("checkpoint"))
    click.echo(found.said)
    if found.verdict is not None:
        for warning in found.verdict.warnings:
            click.echo(f"warning: {warning}")
        return 1 if found.verdict.outcome == "resumes after a conversion" else 0
    return 0


@command.command("convert")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--to", "to", required=True, type=click.Choice(["universal", "fp32", "torch", "dcp", "merged"]),
              help="universal: ds_to_universal; fp32: zero_to_fp32 weights from_pretrained loads; "
                   "torch / dcp: dcp_to_torch_save / torch_save_to_dcp; merged: Accelerate's merge-weights.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Where to write (default: beside PATH, e.g. TAG_universal).")
@click.option("--hf-config", type=click.Path(path_type=Path), default=None,
              help="--to fp32 / merged: the model's config.json, copied beside the weights "
                   "for from_pretrained.")
def convert(path: Path, to: str, out: Path | None, hf_config: Path | None) -> None:
    """Convert the checkpoint at PATH with the engine's own converter, all or nothing."""
    from distrecipe.checkpoints.convert import Target
    from distrecipe.checkpoints.convert import convert as run

    target = next(t for t in get_args(Target) if t == to)
    try:
        written = run(path, target, out=out, hf_config=hf_config)
    except CheckpointError as exc:
        raise _at(path, exc) from None
    click.echo(f"distrecipe: wrote {written} (recorded in it: distrecipe-convert.json)")
