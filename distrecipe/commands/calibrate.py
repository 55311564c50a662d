"""`distrecipe calibrate RUNDIR...`: fit one cluster's factors from the runs `launch` recorded.

Each run directory's `measured.json` gives a measured peak and step time beside the plan's
prediction; `plan.calibration` fits the factors and `plan` reads the file it writes. A
failed run is named and left out; a record from another version is refused.
"""

from __future__ import annotations

from pathlib import Path

import click

from distrecipe.launch.measure import observation
from distrecipe.output import to_json, write_files
from distrecipe.plan.calibration import CalibrationError, as_data, default_path, fit, load, merged


def calibrate(*, runs: tuple[str, ...], output: str | None) -> int:
    """Fit, merge into the file (its other engines' cells are kept), write, and say what."""
    found = []
    for run in runs:
        got, why = observation(Path(run))
        if got is None:
            click.echo(f"distrecipe: {why}", err=True)
        else:
            found.append(got)
    if not found:
        raise CalibrationError("no run finished: nothing to fit")
    fitted = fit(found)
    path = Path(output) if output is not None else default_path(Path.cwd())
    old = load(path, fitted.gpu) if path.exists() else None
    calibration = merged(fitted, old)
    write_files(path.parent, {path.name: to_json(as_data(calibration))})
    for cell in fitted.cells:
        memory = ("memory not measured" if cell.memory_factor is None else
                  f"memory factor {cell.memory_factor:g} ({cell.memory_statistic}; measured ÷ predicted "
                  f"allocated, median of {cell.memory_runs})")
        if cell.efficiency_multiplier is not None:
            step = (f"efficiency multiplier {cell.efficiency_multiplier:g} (predicted ÷ measured step time, "
                    f"median of {cell.step_runs})")
        elif fitted.gpu == "cpu":
            step = "step time not calibrated: plan predicts no step time on CPU ranks"
        else:
            step = "step time not calibrated: no run had both a predicted and a measured step time"
        where = " (device cpu: memory is each rank's peak RSS, host memory)" if fitted.gpu == "cpu" else ""
        click.echo(f"{fitted.gpu} × {cell.engine} × {cell.kernels}{where}: {memory}; {step}")
    click.echo(f"wrote {path}", err=True)
    return 0


@click.command("calibrate")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="The calibration file (default: .distrecipe/calibration.json beside pyproject.toml, "
                   "which plan reads).")
def command(runs: tuple[str, ...], output: str | None) -> int:
    """Fit the memory and efficiency factors of one cluster from recorded run directories."""
    return calibrate(runs=runs, output=output)
