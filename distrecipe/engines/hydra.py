"""Hydra's override grammar, both ways: reading `key=value` lines (verl launch
scripts and override files) into a nested mapping with positions, and writing a
value so that Hydra reads it back the same. A launch script's `key=$VAR` values are
expanded from the script's own assignments by `script_overrides`, as the shell would.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from distrecipe.engines.shell_variables import Value, unfixed, variables_at, word_value
from distrecipe.engines.verl import VERL_ROOTS
from distrecipe.errors import Position
from distrecipe.source import Document, KeyPath

_SHELL_WORD = (r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'"""  # a quoted part
               r"|\$\(\((?:[^()]|\([^()]*\))*\)\)|\$\((?:[^()]|\([^()]*\))*\)"  # $((...)), $(...)
               r"|\\.|\S)+")
"""One shell word as written: quoted parts, `$(...)` and `$((...))` keep their spaces
(`$((a + b))` is one word), so a value is the whole word the shell passes."""
_OVERRIDE = re.compile(rf"(?:^|(?<=\s))([+~]{{0,2}})([A-Za-z_][\w.\-]*)=({_SHELL_WORD})")


def read_overrides(text: str, file: str) -> Document:
    """Hydra `key=value` overrides (one per line, or in a shell launch command) as a mapping.

    Only keys under verl's top-level groups are read, so the script name, `python3 -m`
    and shell variables around them are left alone.
    """
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): Position(file, 1, 1)}
    key_positions: dict[KeyPath, Position] = {}
    lines = tuple(text.splitlines())
    for number, match in override_matches(lines):
        prefix, dotted, raw = match.groups()
        path = tuple(dotted.split("."))
        if prefix == "~":
            continue
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            positions.setdefault(path[: depth + 1], Position(file, number, match.start(2) + 1))
            node = child
        else:
            node[path[-1]] = parse_value(raw.rstrip("\\"))
            key_positions[path] = Position(file, number, match.start(2) + 1)
            positions[path] = Position(file, number, match.start(3) + 1)
    return Document(data, file, positions, key_positions, lines)


def override_matches(lines: Iterable[str]) -> Iterator[tuple[int, re.Match[str]]]:
    """Each `[+~]key=value` under one of verl's top-level groups, with its 1-based line
    number: the Hydra overrides of an override file or a launch script, comments skipped."""
    for number, line in enumerate(lines, start=1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        for match in _OVERRIDE.finditer(code):
            if match.group(2).split(".", 1)[0] in VERL_ROOTS:
                yield number, match


def parse_value(raw: str) -> Any:
    """A value in Hydra's override grammar: scalars, `[a,b]` lists, `{k:v}` mappings."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        # Hydra's QUOTED_VALUE: backslashes before a quote (or the closing one) are halved.
        return re.sub(rf"(\\*)({raw[0]}|\Z)", lambda m: m.group(1)[: len(m.group(1)) // 2] + m.group(2),
                      raw[1:-1])
    if raw.startswith("[") and raw.endswith("]"):
        return [parse_value(part) for part in _split(raw[1:-1])]
    if raw.startswith("{") and raw.endswith("}"):
        pairs = (part.partition(":") for part in _split(raw[1:-1]))
        return {key.strip(): parse_value(value) for key, _, value in pairs}
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none", ""):
        return None
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    return raw


def _split(body: str) -> list[str]:
    """Split on commas outside brackets and quotes; an empty body is an empty list."""
    parts, depth, current, quote, escaped = [], 0, "", "", False
    for char in body:
        if quote:
            quote = "" if char == quote and not escaped else quote
            escaped = char == "\\" and not escaped
        elif char in "\"'":
            quote = char
        else:
            depth += char in "[{"
            depth -= char in "]}"
        if char == "," and depth == 0 and not quote:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def format_value(value: Any) -> str:
    """A value in Hydra's override grammar, read back by Hydra as the same value: a
    string that Hydra would read as something else (`8`, `true`, `a b`, `x,y`, `[a]`) is
    single-quoted, as Hydra's own `QuotedString.with_quotes` writes it. `${...}` stays an
    interpolation (OmegaConf resolves it in quotes too); a caller carrying it as text
    escapes it first (`literal_text`). A value with a space cannot go through
    `$(cat verl_overrides.txt)`, which splits on spaces, only through an argument list."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "inf" if value == float("inf") else repr(value)
    if isinstance(value, list):
        return "[" + ",".join(format_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{format_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str) and not (_PLAIN.fullmatch(value) and parse_value(value) == value):
        return _quoted(value)
    return str(value)


_PLAIN = re.compile(r"[A-Za-z0-9_/\-+.$%*@?|]+")
"""Characters Hydra's lexer reads as part of an unquoted string (ID, digits, `UNQUOTED_CHAR`)."""


def _quoted(text: str) -> str:
    """`text` in single quotes: a quote, and the backslashes just before one (or before
    the closing quote), escaped so Hydra's QUOTED_VALUE reads `text` back."""
    return "'" + re.sub(r"(\\*)('|\Z)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text) + "'"


def literal_text(text: str) -> str:
    """`text` as a string OmegaConf leaves as it is: each `${` escaped (`\\${`, with the
    backslashes before it doubled), so a shell's `${HOME}` is not read as an interpolation."""
    return re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)


@dataclass(frozen=True, slots=True)
class ScriptOverrides:
    """A launch script's overrides with its own shell variables expanded (`shell_variables`)."""

    data: dict[str, Any]
    """The overrides as verl receives them where every variable is known."""
    taken: dict[KeyPath, tuple[str, Value]]
    """Key → the value as written (`$BS`) and what the shell makes of it."""
    unknown: dict[KeyPath, tuple[str, Value]]
    """Key → the value as written and why the script does not fix it. `data` holds it as
    verl would read it at run time where that is only the environment's (`$HOME` →
    `${oc.env:HOME}`, listed in `environment`), and otherwise as written, as text
    (`literal_text`: a shell's `${X}` is not an OmegaConf interpolation)."""
    environment: frozenset[KeyPath]
    """The keys of `unknown` whose value verl takes from the environment, as the script does."""


def script_overrides(doc: Document) -> ScriptOverrides:
    """`doc` (read by `read_overrides` from a `.sh` launch script) with each `$VAR` value
    the script itself fixes replaced by its value, parsed as Hydra parses it."""
    data = copy.deepcopy(doc.data)
    taken: dict[KeyPath, tuple[str, Value]] = {}
    unknown: dict[KeyPath, tuple[str, Value]] = {}
    environment: set[KeyPath] = set()
    last = {tuple(match.group(2).split(".")): (number, match) for number, match in override_matches(doc.lines)
            if match.group(1) != "~"}  # the override that wins, as in `read_overrides`
    written = [(number, match) for number, match in last.values() if "$" in match.group(3)]
    tables = variables_at("\n".join(doc.lines), doc.file, (number for number, _ in written))
    for number, match in written:
        raw = match.group(3).rstrip("\\")
        path = tuple(match.group(2).split("."))
        table = tables[number]
        value = word_value(raw, table, doc.file, number)
        if value.text is None:
            unknown[path] = (raw, value)
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        if value.text is not None:
            node[path[-1]] = parse_value(value.text)
            taken[path] = (raw, value)
            continue
        names = unfixed(raw, table)
        if names and all(names.values()):
            stand_ins = {name: Value(f"${{oc.env:{name}}}", ()) for name in names}
            at_run_time = word_value(raw, {**table, **stand_ins}, doc.file, number)
            if at_run_time.text is not None:
                node[path[-1]] = parse_value(at_run_time.text)
                environment.add(path)
                continue
        node[path[-1]] = _as_text(node[path[-1]])
    return ScriptOverrides(data, taken, unknown, frozenset(environment))


def _as_text(value: Any) -> Any:
    """A value read from a shell word, with every string made `literal_text`."""
    if isinstance(value, str):
        return literal_text(value)
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_text(item) for key, item in value.items()}
    return value
