"""Inline suppressions, written where the reviewer sees them.

YAML and override files use a comment on the reported line, or alone on the line
above it (`# distrecipe: ignore[DR104]`, several codes comma-separated, no list = every
code); `# distrecipe: ignore-file[DR311]` anywhere covers the whole file. JSON has no
comments, so the top-level object may hold `"//distrecipe-ignore": ["DR311"]`, which
covers the whole file. Only the top level: DeepSpeed ignores unknown top-level keys,
but its ZeRO blocks refuse them (a list there is reported as DR313).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distrecipe.engines.deepspeed import IGNORE_KEY
from distrecipe.source import Document

_COMMENT = re.compile(r"#\s*distrecipe:\s*ignore(-file)?(?:\[([A-Za-z0-9_,\s]*)\])?")
EVERY = "*"


@dataclass(frozen=True)
class Suppressions:
    """Which codes are silenced on which lines, or in the whole file."""

    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    file: frozenset[str] = frozenset()

    def covers(self, code: str, line: int) -> bool:
        on_line = self.lines.get(line, frozenset())
        return any(code in codes or EVERY in codes for codes in (self.file, on_line))


def suppressions(doc: Document) -> Suppressions:
    """Collect a document's suppression comments and `//distrecipe-ignore` lists."""
    lines: dict[int, frozenset[str]] = {}
    whole: set[str] = set()
    for number, text in enumerate(doc.lines, start=1):
        if "distrecipe" not in text:
            continue
        for match in _COMMENT.finditer(text):
            codes = frozenset(c.strip() for c in (match.group(2) or EVERY).split(",") if c.strip())
            if match.group(1):
                whole |= codes
                continue
            lines[number] = lines.get(number, frozenset()) | codes
            if text[: match.start()].strip() == "":  # a comment alone covers the next line
                lines[number + 1] = lines.get(number + 1, frozenset()) | codes
    listed = doc.data.get(IGNORE_KEY) if isinstance(doc.data, dict) else None
    if isinstance(listed, list):
        whole |= {str(code) for code in listed}
    return Suppressions(lines, frozenset(whole))
