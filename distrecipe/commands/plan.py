"""`distrecipe plan`: per-GPU memory, traffic, fit and advice before booking a cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import click

from distrecipe.api import load_plan
from distrecipe.commands.options import overrides_option, recipe_argument
from distrecipe.output import to_json
from distrecipe.plan import calibration, host, render
from distrecipe.plan.advice import advise
from distrecipe.plan.report import Estimate, compare, estimate
from distrecipe.recipe import ProgramKind

KINDS: tuple[ProgramKind, ...] = get_args(ProgramKind)


def calibrated(est: Estimate, path: str | None) -> calibration.Calibrated | None:
    """The plan's cluster's calibration (`plan.calibration`), from `path` or the project's
    default file; None when there is none."""
    found = Path(path) if path is not None else calibration.default_path(Path.cwd())
    if path is None and not found.exists():
        return None
    gpu = calibration.cluster_of(est.plan)["gpu"]
    return calibration.apply(est, calibration.load(found, gpu))


def plan_recipe(*, recipe: str, overrides: Sequence[str] = (), compare_all: bool = False,
                output_format: str = "text", plot_path: str | None = None,
                calibration_path: str | None = None) -> int:
    """Print the estimate (and with `compare_all` every strategy side by side).

    Exit code 1 when the plan says "fits? no" (calibrated, where a calibration gives the
    memory; the GPU, or with offload the host's `cluster.cpu_memory`), so a script can
    gate a booking on it; 0 when it fits or cannot say (no `cluster.gpu_memory`)."""
    plan = load_plan(recipe, overrides)
    current = estimate(plan)
    advice = advise(plan)
    rows = compare(plan) if compare_all or plot_path else []
    got = calibrated(current, calibration_path)
    if output_format == "json":
        data = render.as_json(current, advice)
        if compare_all:
            data["compare"] = [render.as_json(row) for row in rows]
        if got is not None:
            data["calibration"] = calibration.as_json(got)
        click.echo(to_json(data), nl=False)
    else:
        click.echo(render.text(current, advice), nl=False)
        if got is not None:
            click.echo(calibration.text(current, got), nl=False)
        if compare_all:
            click.echo("\n" + render.compare_text(rows), nl=False)
    if plot_path:
        from distrecipe.plan.plot import plot

        click.echo(f"wrote {plot(rows, plot_path, current=current.label)}", err=True)
    fits = current.fits if got is None or got.needed is None else got.fits(plan.gpu_memory)
    return 1 if fits is False or host.fits(current) is False else 0


@click.command("plan")
@recipe_argument
@overrides_option
@click.option("--compare", "compare_all", is_flag=True,
              help="Also show DDP / ZeRO-1 / ZeRO-2 / ZeRO-3 / Megatron side by side: those the "
                   "recipe's engine runs.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Text in GB (10⁹ bytes), or JSON in bytes.")
@click.option("--search", "search_all", is_flag=True,
              help="Rank every valid recipe for this model, cluster and global batch that fits.")
@click.option("--write", "write_path", type=click.Path(dir_okay=False), default=None,
              help="With --search: write the fastest as a recipe file.")
@click.option("--top", "top", type=click.IntRange(1, 10_000), default=None,
              help="With --search: how many candidates to show (text) or list (json); default 5.")
@click.option("--program-kind", type=click.Choice(KINDS), default=None,
              help="With --search: offer only what this kind of program runs (written as "
                   "launch.program_kind).")
@click.option("--script", type=click.Path(dir_okay=False), default=None,
              help="With --search: the training script, read for its kind as launch reads it.")
@click.option("--calibration", "calibration_path", type=click.Path(dir_okay=False), default=None,
              help="The calibration file distrecipe calibrate wrote (default: .distrecipe/calibration.json "
                   "beside pyproject.toml, when it exists).")
@click.option("--measure", "measure", type=click.IntRange(1, 100), default=None,
              help="With --search: launch the K fastest for a few steps each (the recipe's model "
                   "shape, random weights, synthetic tokens, the global batch fixed) and rank by what "
                   "was measured.")
@click.option("--measure-steps", type=click.IntRange(2, 1000), default=4, show_default=True,
              help="With --measure: optimizer steps per trial (the first is warm-up, left out of "
                   "the median).")
@click.option("--runs-root", type=click.Path(file_okay=False), default="runs", show_default=True,
              help="With --measure: where the trials' run directories go.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write stacked per-GPU memory bars (svg/png/pdf); needs distrecipe[plot].")
def command(recipe: str, overrides: tuple[str, ...], compare_all: bool, search_all: bool,
            write_path: str | None, top: int | None, output_format: str, plot_path: str | None,
            program_kind: str | None, script: str | None, calibration_path: str | None,
            measure: int | None, measure_steps: int, runs_root: str) -> int:
    """Per-GPU memory (formula and engine views), activations, traffic, fit and advice."""
    if write_path and not search_all:
        raise click.UsageError("--write needs --search")
    if top is not None and not search_all:
        raise click.UsageError("--top needs --search")
    if measure is not None and not search_all:
        raise click.UsageError("--measure needs --search")
    for flag, given in (("--program-kind", program_kind), ("--script", script)):
        if given is not None and not search_all:
            raise click.UsageError(f"{flag} needs --search")
    if program_kind is not None and script is not None:
        raise click.UsageError("give --program-kind or --script, not both")
    if search_all:
        from distrecipe.commands.search import TOP, search_recipe

        kind = next((k for k in KINDS if k == program_kind), None)  # click checked the choice
        return search_recipe(recipe=recipe, overrides=overrides, write=write_path, top=top or TOP,
                             output_format=output_format, program_kind=kind, script=script,
                             measure=measure, measure_steps=measure_steps, runs_root=runs_root)
    return plan_recipe(recipe=recipe, overrides=overrides, compare_all=compare_all,
                       output_format=output_format, plot_path=plot_path, calibration_path=calibration_path)
