"""`distrecipe lint`: recipes and native configs checked before a cluster is booked."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import click

from distrecipe.commands.options import engine_version_option
from distrecipe.engines import KINDS, Kind, tables
from distrecipe.engines.tables import TableEngine
from distrecipe.findings import SEVERITIES, Severity
from distrecipe.lint.config import CONSUMERS, Consumer, LintConfig, find_pyproject, load_config
from distrecipe.lint.engine import lint
from distrecipe.lint.formats import FORMATS, pick
from distrecipe.lint.rules import RULES
from distrecipe.output import one_line


def project_config(project: Path | None = None,
                   engine_versions: Sequence[tuple[TableEngine, str]] = ()) -> LintConfig:
    """`[tool.distrecipe]` of the nearest pyproject.toml: what lint, compile and launch obey.

    Also states, for this run, the engine releases whose tables judge: `--engine-version`
    over `[tool.distrecipe] engines`, the engines named in neither staying the installed ones.
    """
    formats = frozenset(FORMATS) | {"auto"}
    config = load_config(find_pyproject(project or Path.cwd()), frozenset(RULES), formats)
    if engine_versions:
        named = {engine for engine, _ in engine_versions}
        config = dataclasses.replace(config, engines=(
            *(entry for entry in config.engines if entry[0] not in named),
            *((engine, release, "--engine-version") for engine, release in engine_versions)))
    stated = config.releases()
    tables.state(stated)
    for engine in sorted(stated):
        note = tables.release(engine).note
        if note is not None:
            click.echo(f"distrecipe: note: {note}", err=True)
    return config


def lint_paths(
    *,
    paths: Sequence[str],
    world: int | None = None,
    kind: Kind | None = None,
    output_format: str | None = None,
    project: Path | None = None,
    ignore_unknown: bool = False,
    consumer: Consumer | None = None,
    engines: bool = False,
    fail_on: Severity | None = None,
    min_severity: Severity | None = None,
    engine_versions: Sequence[tuple[TableEngine, str]] = (),
) -> int:
    """Lint `paths`, print the findings, return 0 (clean), 1 (a finding at `fail_on` or
    above, default error) or 2 (unusable input).

    `project` is where to look for pyproject.toml (default: the working directory).
    `engines` also runs the installed engines' own validators (DR900, DR901).
    `min_severity` leaves less severe findings out of the output (never a failing one).
    """
    config = project_config(project, engine_versions)
    report = lint(paths, config=config, world=world, kind=kind, ignore_unknown=ignore_unknown,
                  consumer=consumer, engines=engines, fail_on=fail_on)
    for problem in report.unusable:
        click.echo(one_line(f"{problem.where}: error: {problem.message}"), err=True)
    shown = report.shown(min_severity or config.min_severity)
    click.echo(pick(output_format or config.format or "auto")(shown), nl=False)
    return report.exit_code


@click.command("lint")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--world", type=click.IntRange(min=1), default=None,
              help="Ranks the configs run on (else: the file, [tool.distrecipe] world, "
                   "or a sibling accelerate config).")
@click.option("--kind", type=click.Choice(KINDS), default=None,
              help="Skip detection: every file is this kind.")
@click.option("--format", "output_format", type=click.Choice([*sorted(FORMATS), "auto"]), default=None,
              help="Output format (default: [tool.distrecipe] format, else auto: "
                   "github inside GitHub Actions, text elsewhere).")
@click.option("--ignore-unknown", is_flag=True,
              help="Skip named files that are no config distrecipe knows (for pre-commit).")
@click.option("--ds-config-consumer", "consumer", type=click.Choice(CONSUMERS), default=None,
              help='Who reads the ds_configs, so which "auto" values get filled (else: '
                   "[tool.distrecipe] ds_config, or the files and launch scripts that name them).")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
              help="Exit 1 on a finding at this level or above (default: [tool.distrecipe.lint] "
                   "fail_on, else error).")
@click.option("--min-severity", type=click.Choice(SEVERITIES), default=None,
              help="Print only findings at this level or above; failing ones are always printed "
                   "(default: [tool.distrecipe.lint] min_severity, else info).")
@click.option("--engines", is_flag=True,
              help="Also run the installed engines' own validators in-process (DeepSpeed, the HF "
                   "Trainer, Accelerate, verl): slow, imports torch; DR900-DR902.")
@engine_version_option
def command(paths: tuple[str, ...], world: int | None, kind: Kind | None, output_format: str | None,
            ignore_unknown: bool, consumer: Consumer | None, fail_on: Severity | None,
            min_severity: Severity | None, engines: bool,
            engine_versions: tuple[tuple[TableEngine, str], ...]) -> int:
    """Check recipes, ds_configs, accelerate/verl configs, TrainingArguments, Axolotl and
    LLaMA-Factory YAMLs, and launch scripts.

    Levels per code, per-path ignores and the defaults of --fail-on and --min-severity
    are set in pyproject.toml: `distrecipe explain config`.
    """
    return lint_paths(paths=paths, world=world, kind=kind, output_format=output_format,
                      ignore_unknown=ignore_unknown, consumer=consumer, engines=engines,
                      fail_on=fail_on, min_severity=min_severity, engine_versions=engine_versions)
