"""Calibration: factors fitted on a cluster's recorded runs move `plan` toward what it measures,
and a file that cannot be trusted is refused at its line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrecipe import __version__
from distrecipe.api import load_plan
from distrecipe.launch.measure import observation
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.calibration import CalibrationError, apply, as_data, fit, load
from distrecipe.plan.report import estimate
from tests.conftest import Result
from tests.measured import TINY, measured_record, measured_search, write_run

Cli = Callable[..., Result]
H100 = ["cluster.device=gpu", "cluster.gpu=h100"]


def batch(micro: int) -> list[str]:
    return [f"batch.micro={micro}", f"batch.accumulation={4 // micro}"]


def plan_json(cli: Cli, overrides: list[str], *extra: str | Path) -> dict[str, Any]:
    result = cli("plan", TINY, *(w for o in overrides for w in ("--set", o)), "--format", "json", *extra)
    assert result.code == 0, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_a_gpu_calibration_moves_a_held_out_prediction_to_the_measurement(tmp_path: Path, cli: Cli) -> None:
    """Runs at micro 1 and 4 whose allocator reserves 1.8 × allocated and whose steps take
    3 × the prediction; micro 2, not among them, is predicted."""
    for micro in (1, 4):
        est = estimate(load_plan(TINY, [*H100, *batch(micro)]))
        assert est.step is not None
        write_run(tmp_path / f"run{micro}", [*H100, *batch(micro)], peak=int(1.8 * est.memory.allocated),
                  step_seconds=3 * est.step.seconds)
    out = tmp_path / "calibration.json"
    done = cli("calibrate", tmp_path / "run1", tmp_path / "run4", "--output", out)
    assert done.code == 0, done.err
    held_out = estimate(load_plan(TINY, [*H100, *batch(2)]))
    assert held_out.step is not None
    truth_memory, truth_step = 1.8 * held_out.memory.allocated, 3 * held_out.step.seconds
    before = plan_json(cli, [*H100, *batch(2)])
    after = plan_json(cli, [*H100, *batch(2)], "--calibration", out)["calibration"]
    assert after["calibrated"] and after["gpu"] == "h100" and len(after["runs"]) == 2
    assert abs(before["memory"]["reserved"] - truth_memory) > 0.2 * truth_memory
    assert after["reserved"] == pytest.approx(truth_memory, rel=1e-3)
    assert abs(held_out.step.seconds - truth_step) > truth_step / 2
    assert after["step_seconds"] == pytest.approx(truth_step, rel=1e-3)


@pytest.mark.slow
def test_a_cpu_calibration_moves_the_prediction_toward_the_measured_rss(tmp_path: Path, cli: Cli) -> None:
    """Calibrated on the search's checkpointing-full trial, the plan of its checkpointing-none
    trial (another run, another prediction) comes far closer to that run's peak RSS."""
    trials = {t["set"]["activation_checkpointing"]: t for t in measured_search().trials
              if t["outcome"] == "measured"}
    out = tmp_path / "calibration.json"
    done = cli("calibrate", trials["full"]["run_dir"], "--output", out)
    assert done.code == 0, done.err
    assert "device cpu: memory is each rank's peak RSS" in done.out
    assert "step time not calibrated: plan predicts no step time on CPU ranks" in done.out
    target = trials["none"]
    measured = measured_record(target)["memory"]["peak"]
    keys = [f"{key}={json.dumps(value)}" for key, value in target["set"].items()]
    before = plan_json(cli, [*keys, "cluster.gpu_memory=8GB"])["memory"]["reserved"]
    after = plan_json(cli, [*keys, "cluster.gpu_memory=8GB"], "--calibration", out)["calibration"]["reserved"]
    assert abs(after - measured) < 0.5 * measured < abs(before - measured)
    text = cli("plan", TINY, *(w for k in keys for w in ("--set", k)), "--calibration", out).out
    assert f"calibrated for cpu × deepspeed × torch matmuls, flash attention, eager-hf ({out})" in text
    assert trials["full"]["run_dir"] in text and "CPU ranks, host memory, not a GPU's" in text


def test_plan_reads_the_projects_default_file(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "sub").mkdir()
    write_run(tmp_path / "run", H100, peak=3_000_000, step_seconds=1e-5)
    monkeypatch.chdir(tmp_path / "sub")
    assert cli("calibrate", tmp_path / "run").code == 0
    assert (tmp_path / ".distrecipe" / "calibration.json").is_file()
    text = cli("plan", TINY, "--set", "cluster.device=gpu", "--set", "cluster.gpu=h100").out
    assert "calibrated for h100 × deepspeed × torch matmuls, flash attention, eager-hf" in text
    assert str((tmp_path / "run").resolve()) in text


def test_a_plan_without_a_calibration_prints_as_before(tmp_path: Path, cli: Cli,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("plan", TINY)
    assert "calibrat" not in result.out


def test_another_engine_is_not_calibrated_and_says_so(tmp_path: Path, cli: Cli) -> None:
    write_run(tmp_path / "run", H100, peak=3_000_000, step_seconds=1e-5)
    out = tmp_path / "c.json"
    assert cli("calibrate", tmp_path / "run", "-o", out).code == 0
    result = cli("plan", TINY, "--set", "cluster.device=gpu", "--set", "cluster.gpu=h100", "--set",
                 "strategy=fsdp", "--set", "launch.backend=torchrun", "--calibration", out)
    assert f"calibration: not calibrated for h100 × torch × torch matmuls, flash attention, eager-hf: {out} holds " \
           "deepspeed × torch matmuls, flash attention, eager-hf" in result.out


def good() -> dict[str, Any]:
    return {"format": 1, "distrecipe": __version__, "gpu": "h100", "cells": [
        {"engine": "deepspeed", "kernels": "torch matmuls, flash attention, eager-hf", "memory_factor": 1.3,
         "memory_statistic": "reserved", "efficiency_multiplier": 0.5, "memory_runs": 1, "step_runs": 1,
         "runs": ["/r"]}]}


def edit(change: Callable[[dict[str, Any]], object]) -> str:
    data = good()
    change(data)
    return json.dumps(data, indent=2)


@pytest.mark.parametrize(("text", "line", "col", "says"), [
    ('{"format": 1,\n  "gpu": }', 2, 10, "invalid JSON"),
    (edit(lambda d: d.update(gpu="a100-80gb")), 4, 10, "this calibration is for GPU type a100-80gb, the recipe's "
                                                        "cluster is h100"),
    (edit(lambda d: d.update(distrecipe="0.0.9")), 3, 17, "written by distrecipe 0.0.9, this is"),
    (edit(lambda d: d["cells"][0].update(memory_factor="1.3")), 9, 24,
     "memory_factor must be a positive number or null"),
    (edit(lambda d: d.update(cluster="x")), 19, 3, "unknown key 'cluster'"),
    (edit(lambda d: d.update(format=2)), 2, 13, "format 2: this distrecipe reads format 1"),
], ids=["malformed", "other-gpu", "other-version", "bad-factor", "unknown-key", "other-format"])
def test_a_file_that_cannot_be_trusted_is_refused_at_its_line(tmp_path: Path, cli: Cli, text: str, line: int,
                                                             col: int, says: str) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(text)
    result = cli("plan", TINY, "--set", "cluster.device=gpu", "--set", "cluster.gpu=h100", "--calibration", path)
    assert result.code == 2 and result.out == ""
    (message,) = result.err.splitlines()
    assert message.startswith(f"{path}:{line}:{col}: error: ") and says in message


def test_the_file_written_is_the_file_read_and_applied(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(good()))
    calibration = load(path, "h100")
    assert as_data(calibration) == good()
    est = estimate(load_plan(TINY, H100))
    assert est.step is not None
    got = apply(est, calibration)
    assert got.cell is not None
    assert got.reserved == pytest.approx(1.3 * est.memory.allocated)
    assert got.needed == pytest.approx(1.3 * est.memory.allocated + CONTEXT)
    assert got.step_seconds == pytest.approx(est.step.seconds / 0.5)


def test_runs_of_two_gpu_types_are_never_fitted_together(tmp_path: Path) -> None:
    first = write_run(tmp_path / "a", H100, peak=3_000_000, step_seconds=1e-5)
    second = write_run(tmp_path / "b", ["cluster.device=gpu", "cluster.gpu=a100-80gb"], peak=3_000_000,
                       step_seconds=1e-5)
    seen = [observation(run)[0] for run in (first, second)]
    with pytest.raises(CalibrationError, match=r"2 GPU types \(a100-80gb, h100\)"):
        fit([o for o in seen if o is not None])
