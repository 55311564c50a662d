"""`distrecipe explain CODE|FIELD`: the documentation of a finding code or a recipe field,
from its one source.

Lint rules are documented by their own docstrings; the DR2xx mapping codes by the
equivalence table the emitters report them from; a recipe field by its docstring in the
`Recipe` dataclasses (through the schema generated from them), its default there, and the
carry table's row (`translator/carry.py`). Nothing is written twice.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import click

from distrecipe.engines import ENGINES
from distrecipe.errors import DistrecipeError
from distrecipe.keys import did_you_mean
from distrecipe.lint.rules import RULES
from distrecipe.recipe import AUTO, field_defaults
from distrecipe.schemas import describe, recipe_fields, required
from distrecipe.translator.carry import COLUMN_ORDER, COLUMNS, FIELDS, cell_text
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
    if code in recipe_fields():
        click.echo(_field_help(code), nl=False)
        return 0
    if not re.fullmatch(r"DR\d*", code, re.IGNORECASE):
        names = [*recipe_fields(), *sorted(set(RULES) | set(CODES))]
        raise DistrecipeError(f"unknown recipe field or code {code!r}{did_you_mean(code, names)} "
                              "(distrecipe explain --list for codes; distrecipe schema for every field)")
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


def _field_help(key: str) -> str:
    """A recipe field: its description, type and default; a section: its description and fields.
    Then, where the carry table has the field, what each file distrecipe writes does with it."""
    schema = recipe_fields()[key]
    section = schema.get("type") == "object" and "properties" in schema
    lines = [f"{key} (recipe {'section' if section else 'field'})", "", schema.get("description", ""), ""]
    if section:
        depth = key.count(".") + 1
        children = [name for name in recipe_fields()
                    if name.startswith(f"{key}.") and name.count(".") == depth]
        lines.append(f"Fields: {', '.join(children)}")
    else:
        lines.append(f"Type: {describe(schema)}")
        default = _default(key)
        if default is not None:
            lines.append(f"Default: {default}")
    if key in FIELDS:
        lines += ["", "In each file distrecipe writes (docs/equivalence.md):"]
        width = max(map(len, COLUMNS.values()))
        lines += [f"  {COLUMNS[column].ljust(width)}  {cell_text(FIELDS[key].cell(column))}"
                  for column in COLUMN_ORDER]
    return "\n".join(lines) + "\n"


def _default(key: str) -> str | None:
    """A field's default as a recipe would write it; None where there is none to show."""
    if required(key):
        return "none: a recipe must state it"
    defaults = field_defaults()
    if key not in defaults:
        return None
    value: Any = defaults[key]
    if value == AUTO:
        return "auto (resolve decides it; `distrecipe resolve` shows the value and why)"
    if value is None:
        return "unset"
    if isinstance(value, str):
        return value
    return json.dumps(list(value) if isinstance(value, tuple) else value)


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
@click.argument("code", required=False, metavar="CODE|FIELD|config")
@click.option("--list", "list_all", is_flag=True, help="List every code with its one-line summary.")
def command(code: str | None, list_all: bool) -> int:
    """Explain a finding code (DR101, DR311, ...): why it matters, examples, the fix, its level;
    a recipe field (batch.micro, stage, ...): what it means, its type and default, and the
    native keys it becomes; `explain config` documents lint's pyproject.toml settings."""
    return explain(code=code, list_all=list_all)
