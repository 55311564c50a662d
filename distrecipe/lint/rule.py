"""What a rule yields (`Problem`) and what it is (`Rule`); what it sees is a
`workspace.Source`.

A rule never decides its own position or severity: it names the key path it is about
and the engine turns that into `file:line:col` through the document, and takes the
severity from the registry or from `[tool.distrecipe]` (as yamllint does).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from distrecipe.engines import Kind
from distrecipe.errors import Position
from distrecipe.findings import Severity
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath


@dataclass(frozen=True, slots=True)
class Problem:
    """One violation: the key path it is about and a one-line message with the numbers."""

    path: KeyPath
    message: str
    key: bool = False
    """Point at the key itself (an unknown or misplaced key) rather than its value."""
    where: Position | None = None
    """An exact position known otherwise (a resolution error's), instead of `path`'s."""


Check = Callable[[Source], Iterable[Problem]]


@dataclass(frozen=True, slots=True)
class Rule:
    """A registered rule: stable code, short name, default severity, the kinds it reads.

    The engine calls `check` only on sources of `kinds`, so a check need not test `src.kind`.
    """

    code: str
    name: str
    severity: Severity
    kinds: frozenset[Kind]
    check: Check
    section: bool = False
    """The rule judges keys where they stand, so it also runs over a recipe's `native`
    sections (`lint/native.py`); whole-file rules (batch, world, companions) do not."""
    pair: bool = False
    """The rule judges the file together with another (the ds_config it names, the launch
    script or Accelerate config that uses it), so when only one of the two is named (a
    pre-commit hook given the changed files), it also runs on the other."""

    @property
    def explanation(self) -> str:
        """The check's docstring: `distrecipe explain CODE` prints exactly this."""
        return inspect.cleandoc(self.check.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.explanation.split("\n", 1)[0]
