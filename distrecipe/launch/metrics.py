"""The metrics protocol: how a training program tells `distrecipe launch` what it measured.

`launch` sets `DISTRECIPE_METRICS` to a file in the run directory (`metrics.jsonl`); a
program appends one JSON object per line. The supervisor can read every rank's peak RSS
without the program's help, but only the program knows where its steps begin and end and
what its GPU allocator holds, so those two facts come from here or are "not measured".
Lines `launch` reads (other keys are kept in the file and ignored):

* `{"step": N, "step_seconds": S}`: optimizer step N took S wall-clock seconds (rank 0's);
* `{"rank": R, "reserved_bytes": B, "allocated_bytes": A}`: rank R's
  `torch.cuda.max_memory_reserved()` and `max_memory_allocated()` at its end;
* `{"rank": R, "out_of_memory": true}`: rank R ran out of device memory.

Ranks append to the same file: a line under the pipe buffer's size written with one
`write` to a file opened for appending is not interleaved with another's on a local disk.
Torch-free: `api.record_metrics` is this module's `record`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

METRICS = "DISTRECIPE_METRICS"
"""The variable naming the file a program appends its JSON lines to."""
METRICS_FILE = "metrics.jsonl"
"""Its name in the run directory."""


def record(**fields: Any) -> bool:
    """Append `fields` as one JSON line to `$DISTRECIPE_METRICS`; False when it is not set
    (the program runs outside `distrecipe launch`), so a script may call it unconditionally."""
    path = os.environ.get(METRICS)
    if not path:
        return False
    line = (json.dumps(fields, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return True


def read(path: Path) -> list[dict[str, Any]]:
    """The complete JSON-object lines of a metrics file (none when it is absent); a line
    being written when the job was stopped, or one that is not an object, is skipped."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for line in text.split("\n")[:-1]:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out
