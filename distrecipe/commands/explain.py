"""`distrecipe explain CODE`: the documentation of a finding code, from its one source.

Lint rules are documented by their own docstrings; the DR2xx mapping codes by the
equivalence table the emitters report them from. Nothing is written twice.
"""

from __future__ import annotations

import click

from distrecipe.engines import ENGINES
from distrecipe.errors import DistrecipeError
from distrecipe.keys import did_you_mean
from distrecipe.lint.rules import RULES
from distrecipe.translator.equivalence import CODES, TABLE


def explain(*, code: str | None, list_all: bool = False) -> int:
    """Print one code's explanation, or (`list_all`) one line per known code."""
    if list_all or code is None:
        for known in sorted(set(RULES) | set(CODES)):
            click.echo(f"{known}  {_severity(known):7}  {_summary(known)}")
        return 0
    code = code.upper()
    if code in RULES:
        rule = RULES[code]
        click.echo(f"{code} ({rule.name}, {rule.severity}; lint: {', '.join(sorted(rule.kinds))})\n")
        click.echo(rule.explanation)
    elif code in CODES:
        click.echo(f"{code} ({CODES[code].severity}; reported by compile)\n")
        click.echo(CODES[code].summary[0].upper() + CODES[code].summary[1:] + ".")
    else:
        codes = sorted(set(RULES) | set(CODES))
        raise DistrecipeError(f"unknown code {code!r}{did_you_mean(code, codes)} (distrecipe explain --list)")
    rows = [row.recipe for row in TABLE for engine in ENGINES if row.cell(engine).code == code]
    if rows:
        click.echo("\nEquivalence table rows: " + "; ".join(dict.fromkeys(rows)) + ".")
    return 0


def _severity(code: str) -> str:
    return RULES[code].severity if code in RULES else CODES[code].severity


def _summary(code: str) -> str:
    return RULES[code].summary if code in RULES else CODES[code].summary


@click.command("explain")
@click.argument("code", required=False)
@click.option("--list", "list_all", is_flag=True, help="List every code with its one-line summary.")
def command(code: str | None, list_all: bool) -> int:
    """Explain a finding code (DR101, DR311, ...): why it matters, examples, the fix."""
    return explain(code=code, list_all=list_all)
