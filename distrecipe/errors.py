"""One root error type; every user-facing failure is a `DistrecipeError`.

The CLI turns these into one line (`file:line:col: message`) and exit code 2. Any
other exception escaping a command is a bug in distrecipe and is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """Where in a source a value came from; 1-based like every editor and compiler."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class DistrecipeError(Exception):
    """A problem with the user's input or environment, never a bug in distrecipe."""

    exit_code = 2

    def __init__(self, message: str, where: Position | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class RecipeError(DistrecipeError):
    """The recipe text, its schema or its arithmetic is wrong."""


class StrictError(DistrecipeError):
    """`--strict` refused an inexact mapping to a target engine."""


class LaunchError(DistrecipeError):
    """The job could not be started (launcher missing, no GPUs found, ...)."""
