"""What a rule sees (`Source`), what it yields (`Problem`) and what it is (`Rule`).

A rule never decides its own position or severity: it names the key path it is about
and the engine turns that into `file:line:col` through the document, and takes the
severity from the registry or from `[tool.distrecipe]` (as yamllint does).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrecipe.engines import Kind
from distrecipe.errors import DistrecipeError, Position
from distrecipe.findings import Severity
from distrecipe.keys import get, section
from distrecipe.source import Document, KeyPath

if TYPE_CHECKING:
    from distrecipe.job import Plan
    from distrecipe.lint.workspace import Workspace
    from distrecipe.lint.world import World

@dataclass(frozen=True, slots=True)
class Problem:
    """One violation: the key path it is about and a one-line message with the numbers."""

    path: KeyPath
    message: str
    key: bool = False
    """Point at the key itself (an unknown or misplaced key) rather than its value."""
    where: Position | None = None
    """An exact position known otherwise (a resolution error's), instead of `path`'s."""


@dataclass(frozen=True)
class Source:
    """A config to lint: its document, its kind, and the world size it runs at."""

    doc: Document
    kind: Kind
    workspace: Workspace
    worlds: tuple[World, ...] = ()
    """Every statement of the world this file runs at, in precedence order (`lint.world`)."""
    plan: Plan | None = field(default=None, compare=False)
    """The resolved Plan, for recipes that resolve (plan-based rules need it)."""
    error: DistrecipeError | None = field(default=None, compare=False)
    """Why a recipe did not resolve."""
    within: KeyPath = ()
    """Where this config sits inside its file when it is a section of another (a recipe's
    `native.deepspeed`); rules read it as a whole file, positions are the file's."""

    @property
    def world(self) -> World | None:
        """The world the file is checked at: the first of `worlds`."""
        return self.worlds[0] if self.worlds else None

    @property
    def ranks(self) -> int | None:
        """The number of ranks of `world`, None when unknown."""
        return self.worlds[0].ranks if self.worlds else None

    @property
    def path(self) -> Path:
        return Path(self.doc.file)

    @property
    def data(self) -> dict[str, Any]:
        return self.doc.data if isinstance(self.doc.data, dict) else {}

    def get(self, *path: str | int, default: Any = None) -> Any:
        """The value at `path`, or `default` when a section or the key is missing."""
        return get(self.data, *path, default=default)

    def section(self, *path: str | int) -> dict[str, Any]:
        """The mapping at `path`, or an empty one when it is missing or not a mapping."""
        return section(self.data, *path)


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
