"""Project defaults for lint from `[tool.distrecipe]` in the nearest pyproject.toml.

    [tool.distrecipe]
    world = 32                      # ranks, when neither --world nor the file says
    disable = ["DR371"]             # rules not run at all
    severity = { DR311 = "warning" } # the engine, not the rule, decides severity
    format = "github"
    exclude = ["third_party/*"]     # glob patterns skipped when walking directories
    ds_config = "hf"                # who reads the ds_configs: "hf", "accelerate" or "raw"
    # or per glob: ds_config = { "configs/raw/*.json" = "raw", "*.json" = "hf" }

Command-line options win over these. A misspelt key is an error (exit 2), not a
silently ignored default: that is the very bug this linter exists to catch.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from distrecipe.errors import DistrecipeError, Position
from distrecipe.findings import SEVERITIES, Severity
from distrecipe.keys import did_you_mean
from distrecipe.schemas import recipe_schema, shown
from distrecipe.source import read_text

Consumer = Literal["hf", "accelerate", "raw"]
"""What reads a ds_config: the HF Trainer, Accelerate without it, or DeepSpeed as is."""
CONSUMERS: tuple[Consumer, ...] = get_args(Consumer)
_CLUSTER = recipe_schema()["properties"]["cluster"]["properties"]
MAX_WORLD: int = _CLUSTER["nodes"]["maximum"] * _CLUSTER["gpus_per_node"]["oneOf"][0]["maximum"]
"""The most ranks a world may have: the recipe schema's nodes × GPUs per node."""


class ConfigError(DistrecipeError):
    """`[tool.distrecipe]` is malformed."""


@dataclass(frozen=True)
class LintConfig:
    world: int | None = None
    disable: frozenset[str] = frozenset()
    severity: Mapping[str, Severity] = field(default_factory=dict)
    format: str | None = None
    exclude: tuple[str, ...] = ()
    ds_config: tuple[tuple[str, Consumer], ...] = ()
    """(glob, consumer) pairs in the order written; `"*"` when one consumer is given for all."""
    root: Path | None = None
    """The directory of the pyproject.toml the globs are relative to."""


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start`, as tools like ruff look for theirs."""
    for directory in (start.resolve(), *start.resolve().parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(pyproject: Path | None, codes: frozenset[str], formats: frozenset[str]) -> LintConfig:
    """Read and check `[tool.distrecipe]`; `codes` and `formats` are what is allowed.

    Every error points at `pyproject.toml:line:col`: TOML's own syntax errors carry
    their line and column, and a bad value is found by its key in the table's text.
    """
    if pyproject is None:
        return LintConfig()
    name = str(pyproject)
    text = read_text(pyproject)
    if "distrecipe" not in text:  # no table for us, however written: its TOML is its tools' to judge
        return LintConfig()
    if sys.version_info >= (3, 11):  # parsed only when it may hold one (compile reads it on every run)
        import tomllib
    else:  # pragma: no cover - Python 3.10: the tomli backport is a dependency there
        import tomli as tomllib
    try:
        table = tomllib.loads(text).get("tool", {}).get("distrecipe", {})
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        lines = text.splitlines() or [""]
        where = (Position(name, int(found[1]), int(found[2])) if found  # else "(at end of document)"
                 else Position(name, len(lines), len(lines[-1]) + 1))
        raise ConfigError(f"invalid TOML: {str(exc).split(' (at ')[0]}", where) from None
    except ValueError:  # Python's int-string limit
        raise ConfigError("a number with more digits than any setting needs", Position(name, 1, 1)) from None
    if not isinstance(table, dict):
        raise ConfigError("[tool.distrecipe] must be a table", Position(name, 1, 1))
    at = _Locator(name, text)
    allowed = ["world", "disable", "severity", "format", "exclude", "ds_config"]
    for key in table:
        if key not in allowed:
            raise ConfigError(f"[tool.distrecipe] unknown key {key!r}{did_you_mean(key, allowed)}",
                              at(key, value=False))
    return LintConfig(
        world=_world(table.get("world"), at("world")),
        disable=frozenset(_codes(table.get("disable", []), codes, "disable", at("disable"))),
        severity=_severity(table.get("severity", {}), codes, at),
        format=_choice(table.get("format"), sorted(formats), "format", at("format")),
        exclude=tuple(_strings(table.get("exclude", []), "exclude", at("exclude"))),
        ds_config=_consumers(table.get("ds_config", {}), at("ds_config")),
        root=pyproject.parent,
    )


class _Locator:
    """Where a key of `[tool.distrecipe]` is written: tomllib keeps no positions."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.lines = text.splitlines()
        header = next((i for i, line in enumerate(self.lines)
                       if re.match(r"\s*\[\s*tool\s*\.\s*distrecipe\s*\]", line)), None)
        self.start = 0 if header is None else header

    def __call__(self, key: str, *, value: bool = True) -> Position:
        pattern = re.compile(rf"^\s*(?:tool\.distrecipe\.)?[\"']?{re.escape(key)}[\"']?\s*(=)\s*")
        for number in range(self.start, len(self.lines)):
            line = self.lines[number]
            if number > self.start and line.lstrip().startswith("["):
                break
            found = pattern.match(line)
            if found:
                col = found.end() if value else len(line) - len(line.lstrip())
                return Position(self.file, number + 1, col + 1)
        return Position(self.file, self.start + 1, 1)


def _consumers(value: Any, where: Position) -> tuple[tuple[str, Consumer], ...]:
    if isinstance(value, str):
        value = {"*": value}
    if not isinstance(value, dict):
        raise ConfigError(f"[tool.distrecipe] ds_config must be one of {', '.join(CONSUMERS)} "
                          "or a table of glob = consumer", where)
    return tuple((str(glob), _choice(consumer, list(CONSUMERS), f"ds_config.{glob}", where))
                 for glob, consumer in value.items())


def _world(value: Any, where: Position) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_WORLD:
        raise ConfigError(f"[tool.distrecipe] world must be an integer from 1 to {MAX_WORLD:,}, "
                          f"got {shown(value)}", where)
    return value


def _strings(value: Any, key: str, where: Position) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[tool.distrecipe] {key} must be a list of strings, got {shown(value)}", where)
    return value


def _codes(value: Any, codes: frozenset[str], key: str, where: Position) -> list[str]:
    items = _strings(value, key, where)
    for code in items:
        _choice(code, sorted(codes), key, where)
    return items


def _severity(value: Any, codes: frozenset[str], at: _Locator) -> dict[str, Severity]:
    where = at("severity")
    if not isinstance(value, dict):
        raise ConfigError('[tool.distrecipe] severity must be a table of CODE = "error|warning|info"', where)
    out: dict[str, Severity] = {}
    for code, level in value.items():
        _choice(code, sorted(codes), "severity", where)
        out[code] = _choice(level, list(SEVERITIES), f"severity.{code}", where)
    return out


def _choice(value: Any, choices: list[str], key: str, where: Position) -> Any:
    if value is None or value in choices:
        return value
    hint = did_you_mean(str(value), choices)
    raise ConfigError(f"[tool.distrecipe] {key}: {shown(value)} is not one of {', '.join(choices)}{hint}",
                      where)
