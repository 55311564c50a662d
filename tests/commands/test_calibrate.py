"""`distrecipe calibrate RUNDIR...`: what it counts, what it refuses, what it keeps."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from distrecipe import __version__
from tests.conftest import Result
from tests.measured import write_run

Cli = Callable[..., Result]
H100 = ["cluster.device=gpu", "cluster.gpu=h100"]


def test_a_failed_run_is_named_and_left_out(tmp_path: Path, cli: Cli) -> None:
    ok = write_run(tmp_path / "ok", H100, peak=3_000_000, step_seconds=1e-5)
    failed = write_run(tmp_path / "failed", H100, peak=9_000_000, step_seconds=None, exit_code=1)
    out = tmp_path / "c.json"
    result = cli("calibrate", ok, failed, "--output", out)
    assert result.code == 0, result.err
    assert f"distrecipe: {failed}: exited 1, not counted" in result.err
    (cell,) = json.loads(out.read_text())["cells"]
    assert cell["runs"] == [str(ok.resolve())] and cell["memory_runs"] == 1 and cell["step_runs"] == 1
    assert result.out.startswith("h100 × deepspeed × torch matmuls, flash attention, eager-hf: memory factor ")


def test_nothing_finished_is_nothing_to_fit(tmp_path: Path, cli: Cli) -> None:
    failed = write_run(tmp_path / "failed", H100, peak=9_000_000, step_seconds=None, exit_code=137)
    result = cli("calibrate", failed, "--output", tmp_path / "c.json")
    assert result.code == 2 and "error: no run finished: nothing to fit" in result.err
    assert not (tmp_path / "c.json").exists()


def test_a_record_from_another_version_is_refused_at_its_line(tmp_path: Path, cli: Cli) -> None:
    run = write_run(tmp_path / "run", H100, peak=3_000_000, step_seconds=1e-5)
    record = run / "measured.json"
    record.write_text(record.read_text().replace(f'"distrecipe": "{__version__}"', '"distrecipe": "0.0.1"'))
    result = cli("calibrate", run, "--output", tmp_path / "c.json")
    assert result.code == 2
    assert result.err.startswith(f"{record}:3:17: error: recorded by distrecipe 0.0.1, this is {__version__}")


def test_a_file_for_another_gpu_type_is_never_merged_into(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "c.json"
    a100 = write_run(tmp_path / "a100", ["cluster.device=gpu", "cluster.gpu=a100-80gb"], peak=3_000_000,
                     step_seconds=1e-5)
    assert cli("calibrate", a100, "--output", out).code == 0
    before = out.read_text()
    h100 = write_run(tmp_path / "h100", H100, peak=3_000_000, step_seconds=1e-5)
    result = cli("calibrate", h100, "--output", out)
    assert result.code == 2
    assert result.err.startswith(f"{out}:4:10: error: this calibration is for GPU type a100-80gb")
    assert out.read_text() == before


def test_another_engines_cell_is_kept(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "c.json"
    zero = write_run(tmp_path / "zero", H100, peak=3_000_000, step_seconds=1e-5)
    fsdp = write_run(tmp_path / "fsdp", [*H100, "strategy=fsdp", "launch.backend=torchrun"], peak=4_000_000,
                     step_seconds=1e-5)
    assert cli("calibrate", zero, "--output", out).code == 0
    assert cli("calibrate", fsdp, "--output", out).code == 0
    cells = json.loads(out.read_text())["cells"]
    assert [(c["engine"], c["runs"]) for c in cells] == [("deepspeed", [str(zero.resolve())]),
                                                        ("torch", [str(fsdp.resolve())])]
