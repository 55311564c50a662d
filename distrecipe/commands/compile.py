"""`distrecipe compile`: recipe → native config files for one engine or all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from distrecipe.api import plan_of_recipe
from distrecipe.commands.echo import echo_findings, echo_name_note, lint_refusal
from distrecipe.commands.layouts import check_rollout_layout, check_split
from distrecipe.commands.lint import project_config
from distrecipe.commands.options import engine_version_option, overrides_option, recipe_argument
from distrecipe.engines.tables import TableEngine
from distrecipe.errors import StrictError
from distrecipe.findings import Severity
from distrecipe.lint.config import Consumer, at_least
from distrecipe.lint.engine import Report, check_recipe, check_written
from distrecipe.output import write_files
from distrecipe.translator.load import read_recipe
from distrecipe.translator.targets import TARGETS, EmitOptions, launch_world


def compile_recipe(
    *,
    recipe: str,
    target: str,
    output: str | None,
    overrides: Sequence[str] = (),
    hf_auto: bool = False,
    strict: bool = False,
    engine_versions: Sequence[tuple[TableEngine, str]] = (),
    quiet: bool = False,
) -> int:
    """Emit `target`'s files; print them when no output directory is given and there is one.

    Returns 0 when written, 1 when lint finds an error in the recipe or in a file to be
    written (each finding printed, nothing written: lint's exit code for the same files).
    The recipe is judged first, before any engine is asked (an engine's refusal would hide
    lint's reason), then the files. `--hf-auto` with `-t deepspeed` says the Trainer reads
    the ds_config, so its `"auto"` values are filled; else the files beside it say who reads it.
    `quiet` leaves info findings out of what is printed (warnings and errors still print).
    """
    least: Severity = "warning" if quiet else "info"
    document, declared = read_recipe(recipe, overrides)
    plan = plan_of_recipe(declared)
    check_split(declared, plan)
    if target == "verl":
        check_rollout_layout(declared, plan)
    echo_name_note(plan)
    config = project_config(engine_versions=engine_versions)
    # DR106 is about the job's checkpoint, not the files written: launch checks it where the job starts.
    said = [f for f in check_recipe(document, plan, config) if f.code != "DR106"]
    if _refused(Report(said).shown(least)):  # the recipe's own errors, before any engine is asked
        return 1
    result = TARGETS[target](plan, EmitOptions(hf_auto=hf_auto))
    echo_findings(recipe, [f for f in result.findings if at_least(f.severity, least)])
    if output is None and len(result.files) != 1:
        raise click.UsageError(f"--target {target} writes several files; give -o DIR")
    consumer: Consumer | None = "hf" if hf_auto and target == "deepspeed" else None
    written = check_written(result.files, recipe=document, said=said, config=config, world=launch_world(plan),
                            consumer=consumer, written_as=Path(output) if output is not None else None)
    if _refused(written.shown(least)):
        return 1
    inexact = [f for f in result.findings if f.severity != "info"]
    if strict and inexact:
        codes = ", ".join(sorted({f.code for f in inexact}))
        raise StrictError(f"--strict: {target} cannot express this recipe exactly ({codes})")
    if output is None:
        click.echo(next(iter(result.files.values())), nl=False)
        return 0
    existed = {name for name in result.files if (Path(output) / name).exists()}
    others = sorted(p.name for p in Path(output).iterdir() if p.name not in result.files) \
        if Path(output).is_dir() else []
    for path in write_files(output, result.files):
        click.echo(f"{'overwrote' if path.name in existed else 'wrote'} {path}", err=True)
    if others:
        click.echo(f"distrecipe: {output} also holds {', '.join(others)}, left as they were", err=True)
    return 0


def _refused(report: Report) -> bool:
    """Print `report`'s findings and, when one is an error, the refusal: True, so nothing
    is written and compile exits 1, as `lint` exits on the same files."""
    refused = lint_refusal(report, outcome="nothing written")
    if refused is not None:
        click.echo(f"distrecipe: error: {refused}", err=True)
    return refused is not None


@click.command("compile")
@recipe_argument
@click.option("--target", "-t", type=click.Choice(sorted(TARGETS)), default="deepspeed",
              show_default=True, help="Which engine's config to emit.")
@click.option("--output", "-o", type=click.Path(file_okay=False), default=None,
              help="Directory to write into (created). Without it, a single file goes to stdout.")
@overrides_option
@click.option("--hf-auto", is_flag=True,
              help='DeepSpeed: keep "auto" where the Hugging Face Trainer fills the value.')
@click.option("--strict", is_flag=True, help="Refuse inexact mappings instead of warning.")
@click.option("--quiet", "-q", is_flag=True, help="Print no info findings (warnings and errors still print).")
@engine_version_option
def command(recipe: str, target: str, output: str | None, overrides: tuple[str, ...],
            hf_auto: bool, strict: bool, engine_versions: tuple[tuple[TableEngine, str], ...],
            quiet: bool) -> int:
    """Emit the native config(s) equivalent to RECIPE.

    Lint's rules run on RECIPE and on every file before it is written. Exit 0: written;
    1: lint found an error (printed at its position; nothing written); 2: unusable input,
    a recipe that does not resolve, an engine's refusal or --strict. The files are judged
    by the tables of the releases the job runs (--engine-version, [tool.distrecipe] engines).
    """
    return compile_recipe(recipe=recipe, target=target, output=output, overrides=overrides,
                          hf_auto=hf_auto, strict=strict, engine_versions=engine_versions, quiet=quiet)
