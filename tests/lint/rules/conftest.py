"""`findings(tmp_path, name, text, code)`: lint one file, the findings of one rule as `(line, col, message)`."""

from __future__ import annotations

from pathlib import Path

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint


def findings(tmp_path: Path, name: str, text: str, code: str, **config: object) -> list[tuple[int, int, str]]:
    (tmp_path / name).write_text(text)
    report = lint([tmp_path / name], config=LintConfig(**config))  # type: ignore[arg-type]
    return [(f.where.line, f.where.col, f.message) for f in report.findings if f.code == code and f.where]
