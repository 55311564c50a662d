"""Hydra's override line, the one reading every command shares: `key=value`, `+key=value`
(add), `++key=value` (add or set), `~key` and `~key=value` (delete).

A recipe's `native.verl` lines, a launch script's verl arguments, an override file and
the launch merge all split a line here, so they never disagree on what `~` means. The
grammar is Hydra's (`hydra/core/override_parser/OverrideParser.g4`); the values are read
by `engines.hydra.parse_value`. It sits below `recipe`, whose schema holds the pattern.
"""

from __future__ import annotations

import re
from typing import NamedTuple

KEY = r"[A-Za-z_][A-Za-z0-9_.@/-]*"
"""A key as Hydra's override grammar spells one: a dotted path (`trainer.nnodes`, `a.0.b`),
a config group (`hydra/launcher`) or a group with its package (`model@actor`)."""
OVERRIDE_PATTERN = rf"^(?:~{KEY}(?:=.*)?|\+{{0,2}}{KEY}=.*)$"
"""One override, whole, as a regex JSON Schema reads too (the recipe's `native.verl` lines)."""
_PREFIXED_KEY = re.compile(rf"(\+{{1,2}}|~|)({KEY})")


class OverrideText(NamedTuple):
    """One override split as Hydra's grammar splits it, before its value is parsed."""

    prefix: str
    """`""` (set a key verl's config has), `+` (add one), `++` (add or set) or `~` (delete)."""
    key: str
    value: str | None
    """The text after the first `=` (`""` for `key=`, which Hydra reads as an empty
    string); None for `~key` alone, which deletes whatever the value is."""


def split_override(text: str) -> OverrideText | None:
    """`[+|++]key=value`, `~key` or `~key=value` split into its prefix, key and value text,
    the one reading of an override every caller shares; None where Hydra's grammar
    (`override_parser/OverrideParser.g4`) refuses the text as an override: a key without
    `=` and without `~` (`a.b`, `+a.b`), two prefixes (`~~a`, `+~a`), a space around the key.

    `~key=value` deletes too (only where the key holds that value), so callers treat
    `~` as deletion whether or not a value follows."""
    written, equals, value = text.partition("=")
    match = _PREFIXED_KEY.fullmatch(written)
    if match is None or not (equals or match[1] == "~"):
        return None
    return OverrideText(match[1], match[2], value if equals else None)


def split_key(written: str) -> tuple[str, str]:
    """(prefix, key) of a key written with its prefix (`++a.b` → `++`, `a.b`), as
    `split_override` splits a whole override; a key it cannot read is its own key."""
    match = _PREFIXED_KEY.fullmatch(written)
    return (match[1], match[2]) if match is not None else ("", written)
