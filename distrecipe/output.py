"""Writing results: all files or none, each replaced atomically.

A compile that fails half-way must not leave a new ds_config.json beside a stale
accelerate config, so everything is rendered in memory first and written last, each
file through an exclusively created temporary and `os.replace`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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


_BREAKS = {ord(c): c.encode("unicode_escape").decode("ascii")
           for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\x00\x1b"}
_BREAKS.update({code: f"\\x{code - 0xDC00:02x}" for code in range(0xDC80, 0xDD00)})
"""Also the lone surrogates Python gives a byte that is not UTF-8 (in an argument or a file
name): shown as the byte, `\\xff`."""


def one_line(text: str) -> str:
    """`text` with every line break and terminal escape written as its escape sequence,
    and a byte that is not UTF-8 as `\\xNN`.

    An error is one line, whatever file name or value from the input it quotes.
    """
    return text.translate(_BREAKS)


def shell_word(text: str) -> str:
    """One shell word, quoted by `shlex.quote`, for a line that must stay one line
    (an `#SBATCH` directive ends at the line break whatever quotes surround it)."""
    import shlex

    if text != one_line(text):
        raise DistrecipeError(f"{text!r} cannot be written on one shell line")
    return shlex.quote(text)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
"""What formats inline Markdown (emphasis, code, links, HTML, table cells, strike-through).
Line-start syntax (`#`, `-`, `1.`) cannot arise: a value never starts a line."""


def markdown_text(text: str) -> str:
    """Literal text in Markdown: every character Markdown gives a meaning backslash-escaped,
    line breaks written as escapes, so a value can neither format nor end a line."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text))


def markdown_code(text: str, *, cell: bool = False) -> str:
    """An inline code span holding `text` literally: the fence is longer than any run of
    backticks inside. In a table `cell`, `|` (which ends the cell even inside a code span)
    is escaped; GFM drops that backslash when it splits the row, while anywhere else a
    code span would show it, so only a cell gets it."""
    body = one_line(text).replace("|", "\\|") if cell else one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    # A span that starts or ends with a backtick, or with a space at both ends, loses one
    # space each side when read: padding keeps those characters.
    edges = body[:1] + body[-1:]
    pad = " " if "`" in edges or (edges == "  " and body.strip(" ")) else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def write_files(directory: str | Path, files: Mapping[str, str], *, private: bool = False) -> list[Path]:
    """Write `files` into `directory` (created if needed), all or nothing; returns the paths.

    `private` makes `directory` 0700 and each file 0600 whatever the umask: a run
    directory holds the configs a job reads, where a secret it needs stands as written
    (`native.deepspeed.comet.api_key`), and argv, environment and recipe, whose
    redaction goes by names and shapes that a secret need not have. `compile` writes
    where the user says, for them to share, so its files take the umask.

    Every destination is checked before anything is written (a directory in the way,
    a parent that is a file); each file is written to a fresh temporary beside it,
    created exclusively (`O_EXCL | O_NOFOLLOW`, a random name: a planted symlink cannot
    redirect it), and only when all are written are they renamed into place. On any
    error the temporaries are removed and a directory created here is removed again,
    so the destination is as it was.
    """
    out = Path(directory)
    finals = [out / name for name in files]
    for final in finals:
        if final.is_dir() and not final.is_symlink():
            raise DistrecipeError(f"cannot write {final}: a directory is in the way")
    created = [p for p in (out, *out.parents) if not p.exists()]
    staged: list[tuple[str, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        if private:
            out.chmod(0o700)  # also a --run-dir that exists already (empty)
        for final, text in zip(finals, files.values(), strict=True):
            fd, tmp = _exclusive(final, 0o600 if private else 0o644)
            staged.append((tmp, final))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        for made in created:  # innermost first; only what this call created
            with contextlib.suppress(OSError):
                made.rmdir()
        raise DistrecipeError(f"cannot write into {out}: {exc.strerror or exc}") from None
    return finals


def _exclusive(final: Path, mode: int) -> tuple[int, str]:
    """A new file beside `final` that did not exist before, opened for writing.

    Like `tempfile.mkstemp` (whose import costs more than compile's own work): a random
    name, created with `O_EXCL | O_NOFOLLOW`, `mode` less the umask (kept by the rename).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = str(final.parent / f".{final.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {final}")
