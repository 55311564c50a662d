"""What several commands print the same way, written once so they cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable

import click

from distrecipe.findings import Finding
from distrecipe.job import Plan, derived_name_note
from distrecipe.lint.engine import Report
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


def lint_refusal(report: Report, *, outcome: str) -> str | None:
    """Print `report`'s findings (lint's lines); when one is an error, the refusal to raise
    or print, saying `outcome` ("nothing written", "nothing launched"), else None.

    compile and launch judge a recipe and the files it becomes with lint's own checks, so
    neither runs what `lint` refuses on the same files.
    """
    for problem in report.unusable:  # an emitted file lint cannot read: a bug, said as such
        click.echo(one_line(f"{problem.where}: error: distrecipe cannot read back what it "
                            f"would write: {problem.message}"), err=True)
    for finding in report.findings:
        click.echo(one_line(str(finding)), err=True)
    errors = [f for f in report.findings if f.severity == "error"]
    if not errors and not report.unusable:
        return None
    count = len(errors) + len(report.unusable)
    codes = ", ".join(sorted({f.code for f in errors})) or "unreadable output"
    return (f"{outcome}: lint reports {count} error{'s' if count != 1 else ''} ({codes}); fix "
            f"{'it' if count == 1 else 'them'}, or silence a code as for lint (`# distrecipe: ignore[CODE]` "
            "in the recipe, [tool.distrecipe] disable)")
