"""`measured.json`: what a run really used and how long its steps took, beside the plan's prediction.

Written by `distrecipe launch` when the job ends, from two sources that need no trust in
each other: the supervisor's samples of every rank's peak resident memory (`supervise`,
read from `/proc` without the program's cooperation) and the lines the program appended
to `$DISTRECIPE_METRICS` (`launch.metrics`: step seconds, the GPU allocator's peaks). What
neither gives is written as not measured, with the reason, never estimated. The plan's
figures for the same resolved recipe sit beside them, so `distrecipe calibrate` can fit
its factors from run directories alone. docs/plan.md, "Measured and calibrated".
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distrecipe import __version__
from distrecipe.errors import DistrecipeError
from distrecipe.job import Plan
from distrecipe.launch.metrics import METRICS_FILE, read
from distrecipe.output import to_json, write_files
from distrecipe.plan.calibration import CalibrationError, Observation, cluster_of
from distrecipe.plan.report import estimate
from distrecipe.source import Document, read_document
from distrecipe.translator.resolve import memory_inputs_missing

MEASURED_FILE = "measured.json"
FORMAT = 1
RSS = "peak RSS (VmHWM) of each rank's process, sampled by the supervisor"
RESERVED = "torch.cuda.max_memory_reserved, reported by each rank (DISTRECIPE_METRICS)"


def predicted(plan: Plan) -> dict[str, object]:
    """The plan's per-rank figures for this resolved recipe (bytes, seconds); null, with the
    reason, where `plan` cannot estimate them (no model shape, a batch the script decides)."""
    none: dict[str, object] = {"allocated": None, "reserved": None, "needed": None, "step_seconds": None}
    missing = [key for key in memory_inputs_missing(plan.recipe, plan.gpu_memory)
               if not key.startswith(("GPUs", "cluster."))]
    if plan.script_batch or missing:
        return {**none, "why": "plan cannot estimate this run: " + (
            "the script decides the batch" if plan.script_batch else f"needs {', '.join(missing)}")}
    try:
        est = estimate(plan)
    except DistrecipeError as exc:
        return {**none, "why": f"plan cannot estimate this run: {exc.message}"}
    return {"allocated": est.memory.allocated, "reserved": est.memory.reserved, "needed": est.memory.needed,
            "step_seconds": None if est.step is None else est.step.seconds}


def step_record(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Step seconds as the program reported them; the median leaves step 1 out (it holds
    the engine's warm-up: allocation, kernel selection, the first gathers)."""
    seconds = [float(line["step_seconds"]) for line in lines
               if isinstance(line.get("step_seconds"), (int, float))
               and not isinstance(line["step_seconds"], bool)]
    if not seconds:
        return {"measured": False, "why": f"the program appended no step_seconds to {METRICS_FILE} "
                                          "(DISTRECIPE_METRICS, distrecipe.api.record_metrics)"}
    counted = seconds[1:] or seconds
    return {"measured": True, "seconds": seconds, "median": statistics.median(counted),
            "statistic": "median of steps 2.." if len(seconds) > 1 else "the one step (warm-up included)"}


def memory_record(plan: Plan, peaks: Mapping[int, int], lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-rank peak bytes and which statistic they are: host RSS on CPU ranks, the GPU
    allocator's reserved bytes where the ranks reported them; RSS is kept apart on GPUs."""
    rss = {str(rank): peaks[rank] for rank in sorted(peaks)}
    if plan.recipe.cluster.device == "cpu":
        if not rss:
            return {"measured": False, "why": "no rank process was seen (none carried RANK)", "host_rss": rss}
        return {"measured": True, "statistic": RSS, "device": "cpu: host memory, not a GPU's",
                "per_rank": rss, "peak": max(rss.values()), "host_rss": rss}
    reported = {str(line["rank"]): line for line in lines
                if isinstance(line.get("rank"), int) and isinstance(line.get("reserved_bytes"), int)}
    out_of_memory = sorted(line["rank"] for line in lines
                           if isinstance(line.get("rank"), int) and line.get("out_of_memory") is True)
    if not reported:
        return {"measured": False, "why": "the ranks reported no GPU memory (reserved_bytes in "
                                          "DISTRECIPE_METRICS); host RSS is not GPU memory",
                "host_rss": rss, "out_of_memory_ranks": out_of_memory}
    per_rank = {rank: int(line["reserved_bytes"]) for rank, line in sorted(reported.items())}
    allocated = {rank: line["allocated_bytes"] for rank, line in sorted(reported.items())
                 if isinstance(line.get("allocated_bytes"), int)}
    return {"measured": True, "statistic": RESERVED, "device": "gpu", "per_rank": per_rank,
            "peak": max(per_rank.values()), "allocated_per_rank": allocated, "host_rss": rss,
            "out_of_memory_ranks": out_of_memory}


def measured(plan: Plan, *, peaks: Mapping[int, int], run_dir: Path, exit_code: int) -> dict[str, Any]:
    """The record for one run (see the module's docstring)."""
    lines = read(run_dir / METRICS_FILE)
    batch = plan.resolved_batch  # None: the script decided it, and only it knows
    return {
        "format": FORMAT,
        "distrecipe": __version__,
        "cluster": cluster_of(plan),
        "recipe": {"name": plan.recipe.name, "strategy": plan.recipe.strategy, "stage": plan.stage,
                   "micro": batch and batch.micro, "accumulation": batch and batch.accumulation,
                   "global": batch and batch.global_, "seq_len": plan.recipe.batch.seq_len,
                   "ranks": plan.dims.world},
        "exit_code": exit_code,
        "memory": memory_record(plan, peaks, lines),
        "step": step_record(lines),
        "predicted": predicted(plan),
        "units": "bytes, seconds",
    }


def write_measured(plan: Plan, *, peaks: Mapping[int, int], run_dir: Path, exit_code: int) -> None:
    write_files(run_dir, {MEASURED_FILE: to_json(measured(plan, peaks=peaks, run_dir=run_dir,
                                                          exit_code=exit_code))}, private=True)


def _at(doc: Document, key: tuple[str, ...]) -> Any:
    value: Any = doc.data
    for part in key:
        if not isinstance(value, dict) or part not in value:
            raise CalibrationError(f"{'.'.join(key)} is missing: not a measured.json distrecipe launch wrote",
                                   doc.where(key))
        value = value[part]
    return value


def _figure(doc: Document, key: tuple[str, ...], *, optional: bool = False) -> float | None:
    value = _at(doc, key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise CalibrationError(f"{'.'.join(key)} must be a non-negative number, not {value!r}",
                               doc.where(key))
    return float(value)


def observation(run_dir: Path) -> tuple[Observation | None, str | None]:
    """A run's figures for `calibrate`, or None and why the run cannot count (it failed).
    A record from another distrecipe version, or not one `launch` wrote, is refused at its line."""
    doc = read_document(run_dir / MEASURED_FILE)
    if not isinstance(doc.data, dict):
        raise CalibrationError("not a measured.json distrecipe launch wrote", doc.where(()))
    if _at(doc, ("format",)) != FORMAT:
        raise CalibrationError(f"format {doc.data['format']!r}: this distrecipe reads format {FORMAT}",
                               doc.where(("format",)))
    if _at(doc, ("distrecipe",)) != __version__:
        raise CalibrationError(f"recorded by distrecipe {doc.data['distrecipe']}, this is {__version__}: its "
                               "prediction is another version's", doc.where(("distrecipe",)))
    if _at(doc, ("exit_code",)) != 0:
        return None, f"{run_dir}: exited {doc.data['exit_code']}, not counted"
    cluster = {key: _at(doc, ("cluster", key)) for key in ("gpu", "engine", "kernels")}
    for key, value in cluster.items():
        if not isinstance(value, str):
            raise CalibrationError(f"cluster.{key} must be a string (the recipe names no cluster.gpu?)",
                                   doc.where(("cluster", key)))
    memory = _at(doc, ("memory",))
    measured_memory = isinstance(memory, dict) and memory.get("measured") is True
    step = _at(doc, ("step",))
    measured_step = isinstance(step, dict) and step.get("measured") is True
    return Observation(
        run=str(run_dir.resolve()), gpu=cluster["gpu"], engine=cluster["engine"], kernels=cluster["kernels"],
        statistic=_at(doc, ("memory", "statistic")) if measured_memory else None,
        measured_peak=_figure(doc, ("memory", "peak")) if measured_memory else None,
        predicted_allocated=_figure(doc, ("predicted", "allocated"), optional=True) or 0.0,
        measured_step=_figure(doc, ("step", "median")) if measured_step else None,
        predicted_step=_figure(doc, ("predicted", "step_seconds"), optional=True),
    ), None
