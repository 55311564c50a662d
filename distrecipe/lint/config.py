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

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from distrecipe.errors import DistrecipeError
from distrecipe.findings import SEVERITIES, Severity
from distrecipe.keys import did_you_mean
from distrecipe.source import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the tomli backport is a dependency there
    import tomli as tomllib


Consumer = Literal["hf", "accelerate", "raw"]
"""What reads a ds_config: the HF Trainer, Accelerate without it, or DeepSpeed as is."""
CONSUMERS: tuple[Consumer, ...] = get_args(Consumer)


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
    """Read and check `[tool.distrecipe]`; `codes` and `formats` are what is allowed."""
    if pyproject is None:
        return LintConfig()
    try:
        table = tomllib.loads(read_text(pyproject)).get("tool", {}).get("distrecipe", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: cannot read [tool.distrecipe]: {exc}") from None
    where = f"{pyproject}: [tool.distrecipe]"
    allowed = ["world", "disable", "severity", "format", "exclude", "ds_config"]
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where} unknown key {key!r}{did_you_mean(key, allowed)}")
    return LintConfig(
        world=_world(table.get("world"), where),
        disable=frozenset(_codes(table.get("disable", []), codes, f"{where} disable")),
        severity=_severity(table.get("severity", {}), codes, where),
        format=_choice(table.get("format"), sorted(formats), f"{where} format"),
        exclude=tuple(_strings(table.get("exclude", []), f"{where} exclude")),
        ds_config=_consumers(table.get("ds_config", {}), f"{where} ds_config"),
        root=pyproject.parent,
    )


def _consumers(value: Any, where: str) -> tuple[tuple[str, Consumer], ...]:
    if isinstance(value, str):
        value = {"*": value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be one of {', '.join(CONSUMERS)} or a table of glob = consumer")
    return tuple((str(glob), _choice(consumer, list(CONSUMERS), f"{where}.{glob}"))
                 for glob, consumer in value.items())


def _world(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where} world must be a positive integer, got {value!r}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings, got {value!r}")
    return value


def _codes(value: Any, codes: frozenset[str], where: str) -> list[str]:
    items = _strings(value, where)
    for code in items:
        _choice(code, sorted(codes), where)
    return items


def _severity(value: Any, codes: frozenset[str], where: str) -> dict[str, Severity]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} severity must be a table of CODE = \"error|warning|info\"")
    out: dict[str, Severity] = {}
    for code, level in value.items():
        _choice(code, sorted(codes), f"{where} severity")
        out[code] = _choice(level, list(SEVERITIES), f"{where} severity.{code}")
    return out


def _choice(value: Any, choices: list[str], where: str) -> Any:
    if value is None or value in choices:
        return value
    hint = did_you_mean(str(value), choices)
    raise ConfigError(f"{where}: {value!r} is not one of {', '.join(choices)}{hint}")
