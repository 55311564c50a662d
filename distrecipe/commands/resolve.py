"""`distrecipe resolve`: every resolved value and where it came from."""

from __future__ import annotations

from collections.abc import Sequence

import click

from distrecipe.api import load_plan
from distrecipe.commands.options import overrides_option, recipe_argument
from distrecipe.output import to_json


def resolve_recipe(*, recipe: str, fmt: str, overrides: Sequence[str] = ()) -> int:
    rows = load_plan(recipe, overrides).explain()
    if fmt == "json":
        data = {key: {"value": value, "from": source} for key, value, source in rows}
        click.echo(to_json(data), nl=False)
        return 0
    width = max(len(key) for key, _, _ in rows)
    vwidth = max(len(_text(value)) for _, value, _ in rows)
    for key, value, source in rows:
        click.echo(f"{key:<{width}}  {_text(value):<{vwidth}}  {source}")
    return 0


def _text(value: object) -> str:
    return "-" if value is None else str(value)


@click.command("resolve")
@recipe_argument
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@overrides_option
def command(recipe: str, fmt: str, overrides: tuple[str, ...]) -> int:
    """Show every resolved value of RECIPE and where it came from."""
    return resolve_recipe(recipe=recipe, fmt=fmt, overrides=overrides)
