"""Project defaults for lint from `[tool.distrecipe]` in the nearest pyproject.toml.

    [tool.distrecipe]
    world = 32                      # ranks, when neither --world nor the file says
    format = "github"
    exclude = ["third_party/*"]     # glob patterns skipped when walking directories
    ds_config = "hf"                # who reads the ds_configs: "hf", "accelerate" or "raw"
    # or per glob: ds_config = { "configs/raw/*.json" = "raw", "*.json" = "hf" }
    transformers = "4.46"           # the release the project pins: judge removed fields by it
    engines = { deepspeed = "0.18.9", accelerate = "1.15" }   # the releases the project runs:
                                    # their tables judge (else the installed ones; `transformers`
                                    # above is `engines.transformers`)

    [tool.distrecipe.lint]
    fail_on = "error"               # exit 1 on findings at this level or above: error, warning, info
    min_severity = "info"           # print findings at this level or above (failing ones always)
    rules = { DR315 = "off", DR371 = "off", DR311 = "error" }   # a level per code: error, warning,
                                    # info or off; or { level = "...", ignore = ["legacy/*"] }
    per_file_ignores = { "third_party/*" = ["DR311", "DR315"], "old/*.json" = ["*"] }

Globs are relative to the pyproject.toml's directory (`*` crosses `/`, as in fnmatch),
or match the file's name. The older `disable = [...]` and `severity = {...}` of
`[tool.distrecipe]` still work (a code in both: `[tool.distrecipe.lint]` wins).
Command-line options win over these (`--fail-on`, `--min-severity`). A misspelt key is
an error (exit 2), not a silently ignored default: that is the very bug this linter
exists to catch.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from distrecipe.engines.tables import NAMES, RELEASE, TableEngine
from distrecipe.errors import DistrecipeError, Position
from distrecipe.findings import SEVERITIES, Severity
from distrecipe.keys import did_you_mean
from distrecipe.schemas import recipe_schema, shown
from distrecipe.source import read_text

Level = Literal["error", "warning", "info", "off"]
"""A rule's level as a team sets it: a severity, or `off` (not run)."""
LEVELS: tuple[Level, ...] = get_args(Level)
RANK: dict[str, int] = {severity: rank for rank, severity in enumerate(reversed(SEVERITIES))}
"""info 0, warning 1, error 2: `--fail-on` and `--min-severity` compare by this."""
LINT_KEYS = ("fail_on", "min_severity", "rules", "per_file_ignores")

Consumer = Literal["hf", "accelerate", "raw"]
"""What reads a ds_config: the HF Trainer, Accelerate without it, or DeepSpeed as is."""
CONSUMERS: tuple[Consumer, ...] = get_args(Consumer)
_CLUSTER = recipe_schema()["properties"]["cluster"]["properties"]
MAX_WORLD: int = _CLUSTER["nodes"]["maximum"] * _CLUSTER["gpus_per_node"]["oneOf"][0]["maximum"]
"""The most ranks a world may have: the recipe schema's nodes × GPUs per node."""


class ConfigError(DistrecipeError):
    """`[tool.distrecipe]` is malformed."""


def at_least(severity: str, threshold: str) -> bool:
    """Whether `severity` is `threshold` or more severe."""
    return RANK[severity] >= RANK[threshold]


@dataclass(frozen=True)
class LintConfig:
    world: int | None = None
    disable: frozenset[str] = frozenset()
    severity: Mapping[str, Severity] = field(default_factory=dict)
    levels: Mapping[str, Level] = field(default_factory=dict)
    """`[tool.distrecipe.lint] rules`: a level per code (over `disable` and `severity`)."""
    ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    """(glob, codes) pairs: codes not reported in files the glob matches (`*`: every code)."""
    fail_on: Severity = "error"
    min_severity: Severity = "info"
    format: str | None = None
    exclude: tuple[str, ...] = ()
    ds_config: tuple[tuple[str, Consumer], ...] = ()
    """(glob, consumer) pairs in the order written; `"*"` when one consumer is given for all."""
    root: Path | None = None
    """The directory of the pyproject.toml the globs are relative to."""
    transformers: str | None = None
    """The transformers release the project pins (`4.46`), when not the installed one."""
    engines: tuple[tuple[TableEngine, str, str], ...] = ()
    """(engine, release, who stated it): `[tool.distrecipe] engines` and `--engine-version`,
    the release of each engine the project runs, whose table judges its files."""

    def releases(self) -> dict[TableEngine, tuple[str, str]]:
        """engine → (release, who stated it), for `engines.tables.state`: `engines`, and
        `transformers` where `engines` does not name it."""
        stated: dict[TableEngine, tuple[str, str]] = {engine: (release, where)
                                                      for engine, release, where in self.engines}
        if self.transformers is not None:
            stated.setdefault("hf", (self.transformers, "[tool.distrecipe] transformers"))
        return stated

    def level(self, code: str, default: Severity) -> Level:
        """The level `code` runs at: `[tool.distrecipe.lint] rules`, else `disable` /
        `severity`, else the rule's default."""
        if code in self.levels:
            return self.levels[code]
        if code in self.disable:
            return "off"
        return self.severity.get(code, default)

    def ignored(self, code: str, file: str) -> bool:
        """Whether a per-path ignore silences `code` in `file`."""
        if not self.ignores:
            return False
        path = Path(file)
        names = [path.as_posix(), path.name]
        if self.root is not None:
            with contextlib.suppress(ValueError, OSError):
                names.append(path.resolve().relative_to(self.root.resolve()).as_posix())
        return any((code in codes or "*" in codes) and any(fnmatch.fnmatch(name, glob) for name in names)
                   for glob, codes in self.ignores)


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
    allowed = ["world", "disable", "severity", "format", "exclude", "ds_config", "lint", "transformers",
               "engines"]
    for key in table:
        if key not in allowed:
            raise ConfigError(f"[tool.distrecipe] unknown key {key!r}{did_you_mean(key, allowed)}",
                              at(key, value=False))
    lint = table.get("lint", {})
    if not isinstance(lint, dict):
        raise ConfigError("[tool.distrecipe] lint must be a table", at("lint"))
    lint_at = _Locator(name, text, "tool.distrecipe.lint")
    for key in lint:
        if key not in LINT_KEYS:
            hint = did_you_mean(key, list(LINT_KEYS))
            raise ConfigError(f"[tool.distrecipe.lint] unknown key {key!r}{hint}", lint_at(key, value=False))
    severities: list[str] = list(SEVERITIES)
    transformers = _release(table.get("transformers"), at("transformers"))
    engines = _engines(table.get("engines", {}), at)
    stated = {engine: release for engine, release, _ in engines}
    if transformers is not None and stated.get("hf", transformers) != transformers:
        raise ConfigError(f"[tool.distrecipe] transformers = {transformers!r} and engines.transformers = "
                          f"{stated['hf']!r} disagree: state the release once", at("transformers"))
    return LintConfig(
        world=_world(table.get("world"), at("world")),
        disable=frozenset(_codes(table.get("disable", []), codes, "disable", at("disable"))),
        severity=_severity(table.get("severity", {}), codes, at),
        format=_choice(table.get("format"), sorted(formats), "format", at("format")),
        exclude=tuple(_strings(table.get("exclude", []), "exclude", at("exclude"))),
        ds_config=_consumers(table.get("ds_config", {}), at("ds_config")),
        levels=_levels(lint.get("rules", {}), codes, lint_at),
        ignores=_ignores(lint, codes, lint_at),
        fail_on=_choice(lint.get("fail_on", "error"), severities, "lint.fail_on", lint_at("fail_on")),
        min_severity=_choice(lint.get("min_severity", "info"), severities, "lint.min_severity",
                             lint_at("min_severity")),
        root=pyproject.parent,
        transformers=transformers,
        engines=engines,
    )


class _Locator:
    """Where a key of `[tool.distrecipe]` (or a table below it) is written: tomllib keeps
    no positions. A key is looked for in the table's own section, else anywhere below
    `[tool.distrecipe...]` headers (a sub-table such as `[tool.distrecipe.lint.rules]`)."""

    def __init__(self, file: str, text: str, table: str = "tool.distrecipe") -> None:
        self.file = file
        self.lines = text.splitlines()
        parts = r"\s*\.\s*".join(map(re.escape, table.split(".")))
        header = next((i for i, line in enumerate(self.lines)
                       if re.match(rf"\s*\[\s*{parts}\s*\]", line)), None)
        if header is None:  # the table written inline, or dotted keys under [tool.distrecipe]
            header = next((i for i, line in enumerate(self.lines)
                           if re.match(r"\s*\[\s*tool\s*\.\s*distrecipe\b", line)), None)
        self.start = 0 if header is None else header

    def __call__(self, key: str, *, value: bool = True) -> Position:
        name = rf"[\"']?{re.escape(key)}[\"']?\s*(=)\s*"
        starts = re.compile(rf"^\s*(?:[\w.]+\.)?{name}")
        inline = re.compile(rf"(?<![\w.\"'-]){name}")  # a key inside an inline table
        for pattern in (starts, inline):
            for number in range(self.start, len(self.lines)):
                line = self.lines[number]
                if number > self.start and line.lstrip().startswith("[") and \
                        not re.match(r"\s*\[\s*tool\s*\.\s*distrecipe\b", line):
                    break
                found = pattern.search(line)
                if found:
                    col = found.end() if value else found.start() + len(found[0]) - len(found[0].lstrip())
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


def _release(value: Any, where: Position) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"\d+(\.\d+){0,2}", value):
        raise ConfigError(f"[tool.distrecipe] transformers must be a release number such as \"4.46\", "
                          f"not {value!r}", where)
    return value


def engine_release(name: object, value: object) -> tuple[TableEngine, str]:
    """`("transformers", "5.23")` → `("hf", "5.23")`; ValueError naming the accepted forms."""
    if not isinstance(name, str) or name.lower() not in NAMES:
        names = ", ".join(sorted(NAMES))
        hint = did_you_mean(str(name), list(NAMES))
        raise ValueError(f"unknown engine {shown(name)}: one of {names}{hint}")
    if not isinstance(value, str) or not RELEASE.fullmatch(value):
        raise ValueError(f"{name}: a release number such as \"1.15\" or \"0.19.8\", not {shown(value)}")
    return NAMES[name.lower()], value


def _engines(value: Any, at: _Locator) -> tuple[tuple[TableEngine, str, str], ...]:
    if not isinstance(value, dict):
        raise ConfigError("[tool.distrecipe] engines must be a table of engine = \"release\", "
                          "e.g. { deepspeed = \"0.19.8\" }", at("engines"))
    found = []
    for name, release in value.items():
        try:
            found.append((*engine_release(name, release), "[tool.distrecipe] engines"))
        except ValueError as exc:
            raise ConfigError(f"[tool.distrecipe] engines: {exc}", at(name)) from None
    return tuple(sorted(found))


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


def _levels(value: Any, codes: frozenset[str], at: _Locator) -> dict[str, Level]:
    """`rules = { CODE = LEVEL | { level = LEVEL, ignore = [GLOB, ...] } }`: the levels."""
    if not isinstance(value, dict):
        raise ConfigError('[tool.distrecipe.lint] rules must be a table of CODE = "error|warning|info|off"',
                          at("rules"))
    out: dict[str, Level] = {}
    for code, setting in value.items():
        where = at(code)
        _choice(code, sorted(codes), "lint.rules", where)
        if isinstance(setting, dict):
            for key in setting:
                if key not in ("level", "ignore"):
                    raise ConfigError(f"[tool.distrecipe.lint] rules.{code}: unknown key {key!r}"
                                      f"{did_you_mean(str(key), ['level', 'ignore'])}", where)
            _strings(setting.get("ignore", []), f"lint.rules.{code}.ignore", where)
            if "level" not in setting:
                continue
            setting = setting["level"]
        out[code] = _choice(setting, list(LEVELS), f"lint.rules.{code}", where)
    return out


def _ignores(lint: dict[str, Any], codes: frozenset[str],
             at: _Locator) -> tuple[tuple[str, frozenset[str]], ...]:
    """Per-path ignores: `per_file_ignores = { GLOB = [CODE, ...] }` (as ruff's), and each
    rule's `ignore = [GLOB, ...]` (as yamllint's), in the order written."""
    out: list[tuple[str, frozenset[str]]] = []
    per_file = lint.get("per_file_ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError("[tool.distrecipe.lint] per_file_ignores must be a table of GLOB = [CODE, ...]",
                          at("per_file_ignores"))
    for glob, listed in per_file.items():
        where = at(glob)
        items = _strings(listed, f"lint.per_file_ignores.{glob}", where)
        for code in items:
            if code != "*":
                _choice(code, sorted(codes), f"lint.per_file_ignores.{glob}", where)
        out.append((str(glob), frozenset(items)))
    rules = lint.get("rules", {})
    for code, setting in rules.items() if isinstance(rules, dict) else ():
        if isinstance(setting, dict):
            out.extend((glob, frozenset({code})) for glob in setting.get("ignore", []))
    return tuple(out)


def _choice(value: Any, choices: list[str], key: str, where: Position) -> Any:
    if value is None or value in choices:
        return value
    hint = did_you_mean(str(value), choices)
    raise ConfigError(f"[tool.distrecipe] {key}: {shown(value)} is not one of {', '.join(choices)}{hint}",
                      where)
