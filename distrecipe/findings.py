"""A finding: something a user must know about a config, with a stable code.

Compile reports inexact mappings with these; lint reports rule violations with the
same type, so every output format (text, JSON, SARIF, GitHub) serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from distrecipe.errors import Position

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
"""Most severe first, the order reports count them in."""


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    """Stable identifier such as `DR101`; `distrecipe explain CODE` documents it."""
    message: str
    """One line, with the numbers that matter."""
    severity: Severity = "warning"
    where: Position | None = None

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.severity} {self.code}: {self.message}"
