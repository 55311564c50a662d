"""Calibration: the allocator and efficiency factors of one cluster, fitted on its own runs.

`plan`'s `FRAGMENTATION` and efficiency figures are fitted on published runs of other
people's clusters; `distrecipe calibrate RUNDIR...` replaces them, for one GPU type, with
what `distrecipe launch` measured there (`measured.json`, `launch.measure`):

* **memory factor** = measured peak ÷ predicted allocated, the median over the runs: the
  allocator's reserved bytes over what tensors hold on GPUs (it stands for
  (1 + `FRAGMENTATION`) and the stranded blocks), peak RSS on CPU ranks, where the
  interpreter and its libraries are most of it and the factor only holds for runs of
  about that size. Calibrated reserved = allocated × factor; needed adds `CONTEXT` on
  GPUs (outside the allocator) and nothing on CPU (RSS already holds everything).
* **efficiency multiplier** = predicted ÷ measured step seconds, the median over the runs
  with both: the plan's achieved efficiency times it, i.e. its step time divided by it
  (the whole step, communication included). `plan` predicts no step time on CPU ranks, so
  a CPU cluster has none, and says so.

The file (`.distrecipe/calibration.json` beside the project's pyproject.toml, else in the
working directory; `plan --calibration FILE` names another) holds one GPU type and one
cell per engine × kernels. A file that is malformed, for another GPU type or written by
another distrecipe version is refused at its line, never used. docs/plan.md,
"Measured and calibrated".
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrecipe import __version__
from distrecipe.errors import DistrecipeError
from distrecipe.job import Plan
from distrecipe.plan.activations import kernel_choice
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.efficiency import engine_family, kernel_family
from distrecipe.plan.report import Estimate
from distrecipe.source import Document, read_document

FORMAT = 1
DEFAULT = Path(".distrecipe") / "calibration.json"
"""Where `calibrate` writes and `plan` looks, relative to the project (module docstring)."""


class CalibrationError(DistrecipeError):
    """A calibration file or run record that cannot be used."""


def cluster_of(plan: Plan) -> dict[str, Any]:
    """What a calibration is for: the GPU type (`cpu` for CPU ranks, whose memory is host
    RSS), the engine, whose kernels run the matmuls and attention, and the kernel choice
    activations rest on (`activations.kernel_choice`: compile, loss, fused ops)."""
    recipe = plan.recipe
    gpu = "cpu" if recipe.cluster.device == "cpu" else recipe.cluster.gpu
    return {"gpu": gpu, "engine": engine_family(plan),
            "kernels": f"{kernel_family(plan)} matmuls, {recipe.model.attention} attention, "
                       f"{kernel_choice(plan)}"}


@dataclass(frozen=True, slots=True)
class Observation:
    """One run's measured and predicted figures (from its `measured.json`)."""

    run: str
    gpu: str
    engine: str
    kernels: str
    statistic: str | None
    """What the measured memory is (reserved, RSS); None when it was not measured."""
    measured_peak: float | None
    predicted_allocated: float
    measured_step: float | None
    predicted_step: float | None


@dataclass(frozen=True, slots=True)
class Cell:
    engine: str
    kernels: str
    memory_factor: float | None
    memory_statistic: str | None
    efficiency_multiplier: float | None
    runs: tuple[str, ...]
    memory_runs: int
    step_runs: int


@dataclass(frozen=True, slots=True)
class Calibration:
    gpu: str
    cells: tuple[Cell, ...]
    file: str = ""


def fit(observations: Sequence[Observation]) -> Calibration:
    """One cell per engine × kernels, each factor the median over the runs that give it."""
    gpus = sorted({o.gpu for o in observations})
    if len(gpus) != 1:
        raise CalibrationError(f"the runs are from {len(gpus)} GPU types ({', '.join(gpus)}): a calibration "
                               "is for one; calibrate each apart")
    cells = []
    for engine, kernels in sorted({(o.engine, o.kernels) for o in observations}):
        mine = [o for o in observations if (o.engine, o.kernels) == (engine, kernels)]
        memory = [o for o in mine if o.measured_peak is not None and o.predicted_allocated > 0]
        kinds = sorted({o.statistic for o in memory if o.statistic is not None})
        if len(kinds) > 1:
            raise CalibrationError(f"{engine} × {kernels}: the runs measured memory as "
                                   f"{' and '.join(kinds)}; one statistic per calibration")
        steps = [o for o in mine if o.measured_step and o.predicted_step]
        cells.append(Cell(
            engine=engine, kernels=kernels,
            memory_factor=(round(statistics.median(o.measured_peak / o.predicted_allocated for o in memory
                                                   if o.measured_peak is not None), 4) if memory else None),
            memory_statistic=kinds[0] if kinds else None,
            efficiency_multiplier=(round(statistics.median(o.predicted_step / o.measured_step for o in steps
                                                           if o.predicted_step and o.measured_step), 4)
                                   if steps else None),
            runs=tuple(o.run for o in mine), memory_runs=len(memory), step_runs=len(steps)))
    return Calibration(gpus[0], tuple(cells))


def merged(new: Calibration, old: Calibration | None) -> Calibration:
    """`new`'s cells over an existing file's (same GPU type: `load` refused another)."""
    if old is None:
        return new
    fresh = {(c.engine, c.kernels) for c in new.cells}
    kept = [c for c in old.cells if (c.engine, c.kernels) not in fresh]
    return Calibration(new.gpu, tuple(sorted((*kept, *new.cells), key=lambda c: (c.engine, c.kernels))))


def as_data(calibration: Calibration) -> dict[str, Any]:
    return {"format": FORMAT, "distrecipe": __version__, "gpu": calibration.gpu, "cells": [
        {"engine": c.engine, "kernels": c.kernels, "memory_factor": c.memory_factor,
         "memory_statistic": c.memory_statistic, "efficiency_multiplier": c.efficiency_multiplier,
         "memory_runs": c.memory_runs, "step_runs": c.step_runs, "runs": list(c.runs)}
        for c in calibration.cells]}


def default_path(start: Path) -> Path:
    """`.distrecipe/calibration.json` in the directory of the nearest pyproject.toml at or
    above `start`, else in `start`."""
    for directory in (start.resolve(), *start.resolve().parents):
        if (directory / "pyproject.toml").is_file():
            return directory / DEFAULT
    return start / DEFAULT


def _number(doc: Document, key: tuple[str | int, ...], value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CalibrationError(f"{key[-1]} must be a positive number or null, not {value!r}", doc.where(key))
    return float(value)


def _string(doc: Document, key: tuple[str | int, ...], value: object) -> str:
    if not isinstance(value, str):
        raise CalibrationError(f"{key[-1]} must be a string, not {value!r}", doc.where(key))
    return value


def load(path: Path, gpu: str | None) -> Calibration:
    """The calibration at `path`, checked; refused (positioned) when malformed, written by
    another distrecipe version, or for another GPU type than `gpu` (None: any)."""
    doc = read_document(path)
    data = doc.data
    if not isinstance(data, dict):
        raise CalibrationError("a calibration file is a JSON object (written by distrecipe calibrate)",
                               doc.where(()))
    known = {"format", "distrecipe", "gpu", "cells"}
    for key in data:
        if key not in known:
            raise CalibrationError(f"unknown key {key!r}", doc.where((key,), key=True))
    for key in sorted(known - set(data)):
        raise CalibrationError(f"missing key {key!r}", doc.where(()))
    if data["format"] != FORMAT:
        raise CalibrationError(f"format {data['format']!r}: this distrecipe reads format {FORMAT}",
                               doc.where(("format",)))
    if data["distrecipe"] != __version__:
        raise CalibrationError(f"written by distrecipe {data['distrecipe']}, this is {__version__}: its "
                               "factors fit another version's predictions; run distrecipe calibrate again",
                               doc.where(("distrecipe",)))
    file_gpu = _string(doc, ("gpu",), data["gpu"])
    if gpu is not None and file_gpu != gpu:
        raise CalibrationError(f"this calibration is for GPU type {file_gpu}, the recipe's cluster is {gpu}: "
                               "never used across GPU types (calibrate this cluster, or name another file)",
                               doc.where(("gpu",)))
    if not isinstance(data["cells"], list):
        raise CalibrationError("cells must be a list", doc.where(("cells",)))
    cells = []
    fields = {"engine", "kernels", "memory_factor", "memory_statistic", "efficiency_multiplier",
              "memory_runs", "step_runs", "runs"}
    for index, cell in enumerate(data["cells"]):
        at: tuple[str | int, ...] = ("cells", index)
        if not isinstance(cell, dict) or set(cell) != fields:
            raise CalibrationError(f"each cell holds exactly {', '.join(sorted(fields))}", doc.where(at))
        runs = cell["runs"]
        if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
            raise CalibrationError("runs must be a list of run directories", doc.where((*at, "runs")))
        counts = [cell[k] for k in ("memory_runs", "step_runs")]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            raise CalibrationError("memory_runs and step_runs are counts", doc.where((*at, "memory_runs")))
        statistic = cell["memory_statistic"]
        cells.append(Cell(
            engine=_string(doc, (*at, "engine"), cell["engine"]),
            kernels=_string(doc, (*at, "kernels"), cell["kernels"]),
            memory_factor=_number(doc, (*at, "memory_factor"), cell["memory_factor"]),
            memory_statistic=(None if statistic is None
                              else _string(doc, (*at, "memory_statistic"), statistic)),
            efficiency_multiplier=_number(doc, (*at, "efficiency_multiplier"), cell["efficiency_multiplier"]),
            runs=tuple(runs), memory_runs=counts[0], step_runs=counts[1]))
    return Calibration(file_gpu, tuple(cells), str(path))


@dataclass(frozen=True, slots=True)
class Calibrated:
    """A plan's figures with one cell's factors applied, and where they came from."""

    calibration: Calibration
    cell: Cell | None
    """None: the file holds no cell for this plan's engine × kernels."""
    cluster: Mapping[str, Any]
    reserved: float | None
    needed: float | None
    step_seconds: float | None

    def fits(self, budget: float | None) -> bool | None:
        return None if budget is None or self.needed is None else self.needed <= budget


def apply(est: Estimate, calibration: Calibration) -> Calibrated:
    """`est` with the factors of its engine × kernels cell (module docstring)."""
    cluster = cluster_of(est.plan)
    cell = next((c for c in calibration.cells
                 if (c.engine, c.kernels) == (cluster["engine"], cluster["kernels"])), None)
    if cell is None:
        return Calibrated(calibration, None, cluster, None, None, None)
    reserved = None if cell.memory_factor is None else est.memory.allocated * cell.memory_factor
    needed = None if reserved is None else reserved + (0.0 if calibration.gpu == "cpu" else CONTEXT)
    step = None
    if cell.efficiency_multiplier is not None and est.step is not None:
        step = est.step.seconds / cell.efficiency_multiplier
    return Calibrated(calibration, cell, cluster, reserved, needed, step)


def _mb(value: float) -> str:
    return f"{value / 1e9:.3g} GB" if value >= 1e9 else f"{value / 1e6:.3g} MB"


def text(est: Estimate, got: Calibrated) -> str:
    """The lines `plan` adds: calibrated or not, for which cluster, from which runs."""
    c, cal = got.cell, got.calibration
    what = f"{cal.gpu} × {got.cluster['engine']} × {got.cluster['kernels']}"
    if c is None:
        held = "; ".join(f"{x.engine} × {x.kernels}" for x in cal.cells) or "no cell"
        return f"calibration: not calibrated for {what}: {cal.file} holds {held}\n"
    lines = [f"calibrated for {what} ({cal.file}), from {len(c.runs)} run(s): {', '.join(c.runs)}"]
    if c.memory_factor is None or got.reserved is None:
        lines.append("  memory: not calibrated (no run measured it)")
    else:
        where = ("peak RSS per rank: CPU ranks, host memory, not a GPU's" if cal.gpu == "cpu"
                 else f"reserved per GPU ({c.memory_statistic}); needed adds the CUDA context")
        lines.append(f"  memory: {where}: allocated {_mb(est.memory.allocated)} × {c.memory_factor:g} "
                     f"= {_mb(got.reserved)} (fitted on {c.memory_runs} run(s); uncalibrated reserved "
                     f"{_mb(est.memory.reserved)})")
    if c.efficiency_multiplier is None:
        why = ("plan predicts no step time on CPU ranks" if cal.gpu == "cpu"
               else "no run had both a predicted and a measured step time")
        lines.append(f"  step time: not calibrated ({why})")
    elif got.step_seconds is None or est.step is None:
        lines.append(f"  step time: efficiency multiplier {c.efficiency_multiplier:g}, but this plan "
                     "predicts no step time")
    else:
        lines.append(f"  step time: {got.step_seconds:.4g} s = predicted {est.step.seconds:.4g} s ÷ "
                     f"efficiency multiplier {c.efficiency_multiplier:g} (fitted on {c.step_runs} run(s))")
    return "\n".join(lines) + "\n"


def as_json(got: Calibrated) -> dict[str, Any]:
    c = got.cell
    return {"file": got.calibration.file, "gpu": got.calibration.gpu, "engine": got.cluster["engine"],
            "kernels": got.cluster["kernels"], "calibrated": c is not None,
            "memory_factor": None if c is None else c.memory_factor,
            "memory_statistic": None if c is None else c.memory_statistic,
            "efficiency_multiplier": None if c is None else c.efficiency_multiplier,
            "runs": [] if c is None else list(c.runs),
            "reserved": got.reserved, "needed": got.needed, "step_seconds": got.step_seconds}
