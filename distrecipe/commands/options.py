"""Options several commands share, declared once so they read the same everywhere."""

from __future__ import annotations

import click

recipe_argument = click.argument("recipe", type=click.Path(path_type=str))

overrides_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a recipe value before validation, e.g. --set batch.global=512 (repeatable).",
)


def _releases(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    from distrecipe.lint.config import engine_release

    stated = []
    for value in values:
        name, equals, release = value.partition("=")
        try:
            if not equals:
                raise ValueError("takes ENGINE=RELEASE, e.g. deepspeed=0.19.8")
            stated.append(engine_release(name.strip(), release.strip()))
        except ValueError as exc:
            raise click.BadParameter(f"{value!r}: {exc}") from None
    return tuple(stated)


engine_version_option = click.option(
    "--engine-version",
    "engine_versions",
    multiple=True,
    metavar="ENGINE=RELEASE",
    callback=_releases,
    help="The release of an engine the job runs, whose table judges (repeatable; e.g. "
         "--engine-version transformers=5.23). Else [tool.distrecipe] engines, else the installed one.",
)
