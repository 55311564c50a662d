"""`benchmarks/gpu_memory.py`: its planning, rows, CLI and budget on CPU; one real run on a GPU.

The script's measurements are made on a GPU only (docs/plan.md, "Measuring on a GPU");
everything around them is tested here with a fake probe and a fake runner, and its rows
are read back by the same `plan_for_row` that `tests/test_plan_gpu.py` judges the corpus
with, so a row it writes is the recipe it measured.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from distrecipe.plan.report import estimate
from distrecipe.plan.units import GiB
from tests.conftest import ROOT
from tests.published import CSV, Row, plan_for_row

SCRIPT = ROOT / "benchmarks" / "gpu_memory.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_memory", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_memory"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gm = _load()
H200 = gm.Gpu(name="NVIDIA H200", total_gib=139.81, capability="9.0",
              versions={"torch": "2.11.0+cu130", "transformers": "5.17.0", "deepspeed": "0.19.8"})
FAKE = gm.Measurement(allocated=40 * GiB, reserved=44 * GiB, device_used=46.5 * GiB, tokens_per_s=5000.0)


def test_columns_are_published_csvs() -> None:
    with CSV.open(encoding="utf-8", newline="") as handle:
        assert tuple(next(csv.reader(handle))) == gm.COLUMNS


@pytest.mark.parametrize("run", gm.RUNS, ids=lambda r: r.name)
def test_rows_read_back_as_the_recipe_measured(run: Any) -> None:
    predicted = estimate(gm.plan_for(run, H200, gm.SHAPE))
    rows = gm.row_values(run, H200, gm.SHAPE, FAKE, predicted, "20261201")
    assert [r["memory_kind"].split(" ")[0] for r in rows] == ["max_reserved", "max_allocated"]
    assert [r["memory_GiB"] for r in rows] == ["44.00", "40.00"]
    for row in rows:
        assert tuple(row) == gm.COLUMNS
        assert row["source_id"] == "measured_here_h200_20261201"
        assert row["tokens_per_s_per_gpu"] == "5000" and row["params"] == "1498482688"
        assert f"reserved {predicted.memory.reserved / GiB:.2f} GiB" in row["notes"]
        assert "device used at the end 46.50 GiB" in row["notes"]
        read_back = estimate(plan_for_row(Row(row)))
        assert read_back.memory.reserved == predicted.memory.reserved
        assert read_back.memory.allocated == predicted.memory.allocated
        assert read_back.plan.gpu_memory == predicted.plan.gpu_memory
        assert predicted.fits is True  # every run is sized to fit an H200


def test_the_card_names_its_gpu_model_where_the_peak_table_has_it() -> None:
    assert (H200.card, H200.slug, H200.model, H200.memory_gib) == ("H200", "h200", "h200", "139.8")
    h100 = gm.Gpu(name="NVIDIA H100 80GB HBM3", total_gib=79.19, capability="9.0", versions={})
    assert (h100.slug, h100.model) == ("h100_80gb_hbm3", "h100")
    other = gm.Gpu(name="NVIDIA GeForce RTX 4090", total_gib=23.5, capability="8.9", versions={})
    assert other.model is None
    assert estimate(gm.plan_for(gm.RUNS[0], H200, gm.SHAPE)).step is not None
    assert estimate(gm.plan_for(gm.RUNS[0], other, gm.TINY)).step is None


def test_zero_rows_use_the_emitted_ds_config_and_fsdp_rows_torchrun() -> None:
    zero3 = gm.plan_for(gm.Run("zero3", 4, 4096, "full"), H200, gm.SHAPE)
    fsdp = gm.plan_for(gm.Run("fsdp2", 2, 4096, "selective_op"), H200, gm.SHAPE)
    assert (zero3.recipe.strategy, zero3.stage, zero3.backend) == ("zero", 3, "deepspeed")
    assert (fsdp.recipe.strategy, fsdp.stage, fsdp.backend) == ("fsdp", 3, "torchrun")
    assert fsdp.recipe.activation_checkpointing == "selective"


def test_a_failed_run_is_one_row_without_memory() -> None:
    run = gm.RUNS[0]
    oom = gm.Measurement(failure="OOM: CUDA out of memory. Tried to allocate 2.00 GiB")
    (row,) = gm.row_values(run, H200, gm.SHAPE, oom, estimate(gm.plan_for(run, H200, gm.SHAPE)), "20261201")
    assert row["memory_GiB"] == row["memory_kind"] == row["tokens_per_s_per_gpu"] == ""
    assert row["notes"].startswith("OOM: CUDA out of memory")


def test_main_writes_the_csv_and_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started: list[str] = []

    def runner(run: Any, job: dict[str, Any], timeout: float) -> Any:
        started.append(run.name)
        assert (job["ds_config"] is None) == (run.engine == "fsdp2")
        if job["ds_config"] is not None:
            assert job["ds_config"]["zero_optimization"]["stage"] == int(run.engine[-1])
        return gm.Measurement(failure="OOM: out of memory") if run.engine == "zero3" else FAKE

    names = "fsdp2-m1-s4096-none,zero2-m1-s4096-none,zero3-m1-s4096-none"
    code = gm.main(["--out", str(tmp_path), "--date", "20261201", "--runs", names],
                   probe=lambda: H200, runner=runner)
    out = capsys.readouterr().out
    assert code == 0 and started == names.split(",")
    with (tmp_path / "gpu_memory_h200_20261201.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["micro"] for r in rows] == ["1"] * 5 and rows[-1]["notes"].startswith("OOM")
    predicted = estimate(gm.plan_for(gm.RUNS[0], H200, gm.SHAPE)).memory.reserved
    assert f"{predicted / GiB / 44 - 1:+.1%}" in out and "OOM: out of memory" in out


def test_without_deepspeed_only_fsdp2_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gpu = gm.Gpu(name="NVIDIA H200", total_gib=139.81, capability="9.0", versions={"torch": "2.11.0"})
    started: list[str] = []
    code = gm.main(["--out", str(tmp_path), "--runs", "fsdp2-m1-s4096-none,zero2-m1-s4096-none"],
                   probe=lambda: gpu, runner=lambda run, job, t: started.append(run.name) or FAKE)
    assert code == 0 and started == ["fsdp2-m1-s4096-none"]
    assert "not run, deepspeed is not installed" in capsys.readouterr().out


def test_the_budget_stops_starting_runs() -> None:
    now = [0.0]
    said: list[str] = []

    def runner(run: Any, job: dict[str, Any], timeout: float) -> Any:
        now[0] += 100
        return FAKE

    runs = gm.RUNS[:4]
    done = gm.measure_all(runs, {r.name: {} for r in runs}, runner, budget=250, clock=lambda: now[0],
                          say=said.append)
    # 250 s: the first (guess 60 s) and the second (left 150 >= 100) start; 50 s left does not.
    assert list(done) == [r.name for r in runs[:2]]
    assert said[-1] == f"not started (budget: 50 s left, a run takes up to 100 s): {runs[2].name}, {runs[3].name}"


def test_after_an_engine_crashes_its_other_runs_do_not_start() -> None:
    said: list[str] = []

    def runner(run: Any, job: dict[str, Any], timeout: float) -> Any:
        if run.engine == "zero2":
            return gm.Measurement(failure="failed: exit 1: RuntimeError: Error building extension 'fused_adam'")
        return gm.Measurement(failure="OOM: out of memory") if run.engine == "zero3" else FAKE

    done = gm.measure_all(gm.RUNS, {r.name: {} for r in gm.RUNS}, runner, budget=1e9, say=said.append)
    assert [r.engine for r in gm.RUNS if r.name in done].count("zero2") == 1
    assert [r.name for r in gm.RUNS if r.engine != "zero2"] == [n for n in done if not n.startswith("zero2")]
    assert "zero2-m4-s4096-full: not started, zero2-m1-s4096-none failed" in said


def test_torch_adam_swaps_only_the_optimizer_and_says_so() -> None:
    run = gm.Run("zero2", 1, 4096, "none")
    plan = gm.plan_for(run, H200, gm.SHAPE)
    emitted, swapped = gm.ds_config(plan, False), gm.ds_config(plan, True)
    assert "torch_adam" not in emitted["optimizer"]["params"]
    assert swapped["optimizer"]["params"] == {**emitted["optimizer"]["params"], "torch_adam": True, "fused": True}
    assert {k: v for k, v in swapped.items() if k != "optimizer"} == {
        k: v for k, v in emitted.items() if k != "optimizer"}
    (row, _) = gm.row_values(run, H200, gm.SHAPE, FAKE, estimate(plan), "20261201", torch_adam=True)
    assert "torch's fused AdamW (--torch-adam)" in row["notes"]


def test_a_run_that_crashes_is_recorded_with_its_last_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real child: with no CUDA it dies at `torch.cuda.set_device`; the runner says so."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    job = {"run": ["fsdp2", 1, 64, "none"], "shape": gm.TINY, "capability": "9.0", "ds_config": None}
    result = gm.child_runner(gm.RUNS[0], job, 120)
    print(result.failure)
    assert result.allocated is None and result.failure is not None
    assert result.failure.startswith("failed: exit 1: ") and "\n" not in result.failure


def test_no_gpu_and_unknown_runs_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert gm.main([], probe=lambda: "torch is not installed") == 2
    assert capsys.readouterr().err == "gpu_memory: no CUDA GPU here: torch is not installed; nothing measured\n"
    assert gm.main(["--runs", "fsdp2-m9"], probe=lambda: H200) == 2
    assert capsys.readouterr().err.startswith("gpu_memory: error: unknown run fsdp2-m9; runs: fsdp2-m1-s4096-none,")


def test_the_script_without_cuda_exits_2_with_one_line() -> None:
    """The real probe, in the real process: the venv's torch here, with every GPU hidden."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpu_memory: no CUDA GPU here: ")


@pytest.mark.gpu
def test_one_tiny_run_end_to_end_on_a_gpu(tmp_path: Path) -> None:
    gpu = gm.probe_gpu()
    if isinstance(gpu, str):
        pytest.skip(f"no CUDA GPU: {gpu}")
    runs = "fsdp2-m1-s4096-none" + (",zero2-m1-s4096-none" if "deepspeed" in gpu.versions else "")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--runs", runs, "--budget", "300",
                           "--out", str(tmp_path), "--date", "20000101"],
                          capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = tmp_path.glob("gpu_memory_*_20000101.csv")
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(runs.split(","))
    for reserved, allocated in zip(rows[::2], rows[1::2], strict=True):
        assert float(reserved["memory_GiB"]) >= float(allocated["memory_GiB"]) > 0
        assert float(reserved["tokens_per_s_per_gpu"]) > 0


def test_rows_it_writes_are_judged_as_measured_here(tmp_path: Path) -> None:
    """Rows the script writes, read back from a CSV, land in `test_plan_gpu`'s own held-out
    category and are judged on the statistic each states: reserved against reserved,
    allocated against allocated, an OOM against the plan's `fits`."""
    from tests.published import rows
    from tests.test_plan_gpu import _kind, judge_measured_here

    run = gm.Run("zero3", 1, 1024, "full")
    small = gm.Gpu(name="NVIDIA H200", total_gib=0.5, capability="9.0", versions={})  # a MIG-like slice
    assert small.model is None  # states its memory alone: cluster.gpu h200 would contradict it
    predicted = estimate(gm.plan_for(run, H200, gm.TINY))
    starved = estimate(gm.plan_for(run, small, gm.SHAPE))
    assert predicted.fits is True and starved.fits is False
    reserved, allocated = predicted.memory.reserved, predicted.memory.allocated
    close = gm.Measurement(allocated=1.05 * allocated, reserved=0.95 * reserved)
    far = gm.Measurement(allocated=1.2 * allocated, reserved=reserved)
    oom = gm.Measurement(failure="OOM: CUDA out of memory. Tried to allocate 2.00 GiB")
    crash = gm.Measurement(failure="failed: exit 1: ImportError")
    written = [*gm.row_values(run, H200, gm.TINY, close, predicted, "20261201"),
               *gm.row_values(run, H200, gm.TINY, far, predicted, "20261201"),
               *gm.row_values(run, H200, gm.TINY, oom, predicted, "20261201"),
               *gm.row_values(run, small, gm.SHAPE, oom, starved, "20261201"),
               *gm.row_values(run, H200, gm.TINY, crash, predicted, "20261201")]
    path = tmp_path / "measured.csv"
    gm.write_csv(path, written)
    read = rows(path)
    assert {_kind(row) for row in read} == {"held out, measured here"}
    verdicts = [judge_measured_here(row)[0] for row in read]
    assert verdicts == [True, True, True, False, False, True, None]
    assert judge_measured_here(read[3])[1].startswith("max_allocated -1")  # 1 / 1.2 - 1, rounded GiB
