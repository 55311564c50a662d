"""What several commands print the same way, written once so they cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable

import click

from distrecipe.findings import Finding
from distrecipe.job import Plan, derived_name_note
from distrecipe.output import one_line


def echo_name_note(plan: Plan) -> None:
    """The note for a name made a slug from the recipe file's name (`derived_name_note`)."""
    if (note := derived_name_note(plan)) is not None:
        click.echo(f"{one_line(plan.recipe.source)}: note: {note}: write `name:` in the recipe to choose "
                   "another",
                   err=True)


def echo_findings(source: str, findings: Iterable[Finding]) -> None:
    """One stderr line per finding, prefixed with the recipe it is about.

    Emitter findings carry no position of their own (they are about the recipe as a
    whole), so the recipe's path is what tells the user where to look.
    """
    for finding in findings:
        click.echo(f"{source}: {finding}", err=True)
