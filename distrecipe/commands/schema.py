"""`distrecipe schema`: the recipe JSON Schema, for editors (yaml-language-server)."""

from __future__ import annotations

import json

import click

from distrecipe.schemas import recipe_schema


@click.command("schema")
def command() -> int:
    """Print the recipe format's JSON Schema (draft 2020-12)."""
    click.echo(json.dumps(recipe_schema(), indent=2, ensure_ascii=False))
    return 0
