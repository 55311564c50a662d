"""The job's stdout and stderr, kept in the run directory as they reach the terminal.

The launcher's two streams (its own lines and every rank's, which the launchers pass
through) go through a pipe each; a thread per stream copies what arrives to the same
file descriptor distrecipe writes to (so a terminal, SLURM's `--output` or a caller's
redirection sees what it saw before) and appends it to `stdout.log` / `stderr.log` in
the run directory. The copies go by bytes, unbuffered, so nothing is held back when a
rank ends itself with `os._exit`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

STREAMS = {"stdout": 1, "stderr": 2}
"""Each stream's log file stem and the descriptor it is echoed to."""
DRAIN_SECONDS = 10.0
"""How long the copies may take after the job ended (a process it left may hold a pipe)."""


class Tee:
    """Started with the job's pipes; `join` once the job has ended."""

    def __init__(self, directory: Path, pipes: dict[str, IO[bytes] | None]) -> None:
        self.threads = []
        for name, pipe in pipes.items():
            if pipe is None:
                continue
            log = os.open(directory / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            thread = threading.Thread(target=_copy, args=(pipe, STREAMS[name], log), daemon=True,
                                      name=f"distrecipe-{name}")
            thread.start()
            self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(DRAIN_SECONDS)


def _copy(pipe: IO[bytes], echo: int, log: int) -> None:
    source = pipe.fileno()
    try:
        while chunk := os.read(source, 65536):
            for target in (echo, log):
                _write_all(target, chunk)
    finally:
        os.close(log)
        pipe.close()


def _write_all(descriptor: int, data: bytes) -> None:
    """Write every byte; an echo that cannot be written (a closed terminal) is dropped, the log kept."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(descriptor, view):]
        except OSError:
            return
