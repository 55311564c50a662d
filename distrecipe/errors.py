"""One root error type; every user-facing failure is a `DistrecipeError`.

The CLI turns these into one line (`file:line:col: message`) and exit code 2. Any
other exception escaping a command is a bug in distrecipe and is reported as such.
A refusal of a recipe is one type, `Refusal` (`RecipeError`): its message, the recipe
keys it is about as data (`keys`), and where the first of them was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Position:
    """Where in a source a value came from; 1-based like every editor and compiler."""

    file: str
    line: int
    col: int
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The dotted recipe keys this position was asked for (`Recipe.at`), the first written
    one being where it points: what a refusal made at it is about. Not part of equality."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class DistrecipeError(Exception):
    """A problem with the user's input or environment, never a bug in distrecipe."""

    exit_code = 2

    def __init__(self, message: str, where: Position | None = None,
                 keys: tuple[str, ...] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.keys: tuple[str, ...] = (where.keys if where is not None else ()) if keys is None else keys
        """The recipe keys the error is about, so a caller (lint, `plan --search`) can tell
        which without parsing the message: given, else those `where` was asked for."""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class RecipeError(DistrecipeError):
    """The recipe text, its schema or its arithmetic is wrong: the one refusal type.

    Raised where the recipe cannot run (`resolve`), returned as a value where a caller
    asks whether it could (`engines.heads.refusal`, `resolve.offload_refusal`), always
    with the keys it is about (`keys`)."""


Refusal = RecipeError
"""The name issue 17 gives the one refusal type (message, keys, position)."""


class StrictError(DistrecipeError):
    """`--strict` refused an inexact mapping to a target engine."""


class LaunchError(DistrecipeError):
    """The job could not be started (launcher missing, no GPUs found, ...)."""
