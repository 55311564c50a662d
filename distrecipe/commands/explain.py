"""`distrecipe explain CODE`: the documentation of a finding code, from its one source.

Lint rules are documented by their own docstrings; the DR2xx mapping codes by the
equivalence table the emitters report them from. Nothing is written twice.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import click

from distrecipe.engines import ENGINES
from distrecipe.errors import DistrecipeError
from distrecipe.keys import did_you_mean
from distrecipe.lint.rules import RULES
from distrecipe.translator.codes import CODES
from distrecipe.translator.equivalence import TABLE

TOPICS = ("config",)
"""What `explain` documents besides codes: `config` is lint's pyproject.toml settings."""


def explain(*, code: str | None, list_all: bool = False) -> int:
    """Print one code's explanation, or (`list_all`) one line per known code."""
    if list_all or code is None:
        for known in sorted(set(RULES) | set(CODES)):
            click.echo(f"{known}  {_severity(known):7}  {_summary(known)}")
        return 0
    if code.lower() == "config":
        click.echo(_config_help())
        return 0
    code = code.upper()
    if code in RULES:
        rule = RULES[code]
        kinds = ", ".join(sorted(rule.kinds))
        click.echo(f"{code} ({rule.name}; {rule.severity} by default; lint: {kinds})\n")
        click.echo(rule.explanation)
        click.echo("\n" + _levels(code, rule.severity))
    elif code in CODES:
        click.echo(f"{code} ({CODES[code].severity}; reported by compile)\n")
        click.echo(CODES[code].summary[0].upper() + CODES[code].summary[1:] + ".")
    else:
        codes = sorted(set(RULES) | set(CODES))
        raise DistrecipeError(f"unknown code {code!r}{did_you_mean(code, codes)} "
                              "(distrecipe explain --list; explain config for lint's settings)")
    rows = [row.recipe for row in TABLE for engine in ENGINES if row.cell(engine).code == code]
    if rows:
        click.echo("\nEquivalence table rows: " + "; ".join(dict.fromkeys(rows)) + ".")
    return 0


def _levels(code: str, default: str) -> str:
    """How a team changes `code`'s level, and what this project's pyproject.toml sets."""
    lines = [
        f"Level: {default} by default. A project sets it in pyproject.toml:",
        "    [tool.distrecipe.lint]",
        f'    rules = {{ {code} = "error" }}    # error, warning, info or off',
        f'    per_file_ignores = {{ "legacy/*" = ["{code}"] }}',
        f"On one line: `# distrecipe: ignore[{code}]` (YAML, overrides, scripts); in a JSON",
        f'file: `"//distrecipe-ignore": ["{code}"]`. `lint --fail-on warning` fails on warnings',
        "too, `--min-severity warning` hides infos; `distrecipe explain config` for every setting.",
    ]
    project = _project_level(code, default)
    if project:
        lines.append(project)
    return "\n".join(lines)


def _project_level(code: str, default: str) -> str | None:
    """The level the working directory's project gives `code`, when it is not the default."""
    from distrecipe.lint.config import find_pyproject, load_config
    from distrecipe.lint.formats import FORMATS

    pyproject = find_pyproject(Path.cwd())
    try:
        config = load_config(pyproject, frozenset(RULES), frozenset(FORMATS) | {"auto"})
    except DistrecipeError:
        return None  # lint reports a malformed pyproject.toml; explain is not the place
    level = config.level(code, default)  # type: ignore[arg-type]
    return f"This project ({pyproject}) sets it to {level}." if level != default else None


def _config_help() -> str:
    from distrecipe.lint import config

    doc = inspect.cleandoc(config.__doc__ or "")
    return ("Lint's settings, in the nearest pyproject.toml (`lint --fail-on`, `--min-severity` "
            "override them for one run):\n\n" + doc.split("\n", 1)[1].strip("\n"))


def _severity(code: str) -> str:
    return RULES[code].severity if code in RULES else CODES[code].severity


def _summary(code: str) -> str:
    return RULES[code].summary if code in RULES else CODES[code].summary


@click.command("explain")
@click.argument("code", required=False, metavar="CODE|config")
@click.option("--list", "list_all", is_flag=True, help="List every code with its one-line summary.")
def command(code: str | None, list_all: bool) -> int:
    """Explain a finding code (DR101, DR311, ...): why it matters, examples, the fix, its level;
    `explain config` documents lint's pyproject.toml settings."""
    return explain(code=code, list_all=list_all)
