"""Every attempt of one job, recorded in the job's first run directory.

A requeued SLURM job keeps its id and runs again (`SLURM_RESTART_COUNT` = 1, 2, ...); each
attempt gets its own run directory (`<name>-slurm<id>-restart<N>/node<R>`, its configs,
argv and outcome), and one line per attempt is appended to `attempts.jsonl` in the first
attempt's directory (`<name>-slurm<id>/node<R>`): attempt number, run directory, start,
end, exit code, signal and the checkpoint it resumed from. Outside a requeue the job has
one attempt, recorded the same way in its own directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

ATTEMPTS = "attempts.jsonl"


def attempt_number(environ: Mapping[str, str]) -> int:
    value = environ.get("SLURM_RESTART_COUNT", "0")
    return int(value) if value.isdigit() else 0


def first_directory(run_dir: Path, attempt: int) -> Path:
    """The first attempt's run directory: the `-restart<N>` suffix `Allocation.job_key` adds
    to a requeued SLURM job's directory, taken off (a directory named otherwise is its own)."""
    suffix = f"-restart{attempt}"
    if attempt and run_dir.parent.name.endswith(suffix):
        return run_dir.parent.with_name(run_dir.parent.name.removesuffix(suffix)) / run_dir.name
    return run_dir


def record_attempt(run_dir: Path, environ: Mapping[str, str], record: Mapping[str, object]) -> Path:
    """Append this attempt's line (from its `run.json` record) to the job's attempts log."""
    attempt = attempt_number(environ)
    first = first_directory(run_dir, attempt)
    checkpoint = record.get("checkpoint")
    line = {"attempt": attempt, "run_dir": str(run_dir), "start": record.get("start"),
            "end": record.get("end"), "exit_code": record.get("exit_code"), "signal": record.get("signal"),
            "checkpoint": checkpoint.get("path") if isinstance(checkpoint, dict) else None,
            "checkpoint_step": checkpoint.get("step") if isinstance(checkpoint, dict) else None}
    first.mkdir(parents=True, exist_ok=True)
    # One short line per attempt, appended in one write: attempts of one node never overlap.
    descriptor = os.open(first / ATTEMPTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, (json.dumps(line, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        os.close(descriptor)
    return first / ATTEMPTS
