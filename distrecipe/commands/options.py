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
