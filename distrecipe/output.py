"""Writing results: all files or none, each replaced atomically.

A compile that fails half-way must not leave a new ds_config.json beside a stale
accelerate config, so everything is rendered in memory first and written last, each
file through a temporary name and `os.replace`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distrecipe.errors import DistrecipeError


def to_json(data: Any) -> str:
    """Stable JSON text: indented, UTF-8 as is, one trailing newline.

    Every JSON distrecipe writes or prints (configs, reports, run records) goes through
    here, so the same data always gives the same bytes.
    """
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_files(directory: str | Path, files: Mapping[str, str]) -> list[Path]:
    """Write `files` into `directory` (created if needed); returns the paths written."""
    out = Path(directory)
    staged: list[tuple[str, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            # The pid makes the name ours alone while we live; a leftover of a dead
            # process with the same pid is simply overwritten (tempfile costs 5 ms to import).
            tmp = str(out / f".{name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            staged.append((tmp, out / name))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise DistrecipeError(f"cannot write into {out}: {exc.strerror or exc}") from None
    return [final for _, final in staged]
