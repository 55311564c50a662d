"""`distrecipe schema`: the recipe JSON Schema, for editors (yaml-language-server)."""

from __future__ import annotations

import click

from distrecipe.output import to_json
from distrecipe.schemas import recipe_schema


@click.command("schema")
def command() -> int:
    """Print the recipe format's JSON Schema (draft 2020-12)."""
    click.echo(to_json(recipe_schema()), nl=False)
    return 0
