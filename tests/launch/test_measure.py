"""Run records: each rank's peak memory and the step times, beside the plan's prediction."""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.launch import metrics
from distrecipe.launch.measure import RESERVED, RSS, memory_record, predicted, step_record
from distrecipe.launch.supervise import LAUNCH_ID, new_launch_id, supervise
from tests.measured import TINY, measured_record, measured_search

MB = 10**6


@pytest.mark.slow
def test_every_run_records_peak_rss_step_time_and_the_prediction() -> None:
    for trial in measured_search().trials:
        if trial["outcome"] != "measured":
            continue
        record = measured_record(trial)
        assert record["cluster"]["gpu"] == "cpu" and record["exit_code"] == 0
        memory = record["memory"]
        assert memory["statistic"] == RSS and memory["device"].startswith("cpu")
        assert set(memory["per_rank"]) == {"0", "1"}
        # a rank imports torch and DeepSpeed: hundreds of MB, never a few
        assert all(50 * MB < peak < 8000 * MB for peak in memory["per_rank"].values())
        step = record["step"]
        assert len(step["seconds"]) == 3 and all(s > 0 for s in step["seconds"])
        assert step["median"] == statistics.median(step["seconds"][1:])
        predicted = record["predicted"]
        assert 0 < predicted["allocated"] < predicted["reserved"] < predicted["needed"]
        assert predicted["step_seconds"] is None  # plan predicts no step time on CPU ranks
        assert record["recipe"]["global"] == 8


def test_the_supervisor_reads_each_ranks_peak_rss(tmp_path: Path) -> None:
    """Two "ranks" hold 60 MB and 10 MB; a child of rank 0 (a data loader's worker) is not a rank."""
    program = ("import os, subprocess, sys, time\n"
               "held = bytearray(int(sys.argv[1]) * 10**6)\n"
               "time.sleep(0.8)\n")
    launcher = (f"import os, subprocess, sys\n"
                f"procs = [subprocess.Popen([sys.executable, '-c', {program!r}, mb], env={{**os.environ, "
                f"'RANK': rank}}) for rank, mb in (('0', '60'), ('1', '10'))]\n"
                f"sys.exit(max(p.wait() for p in procs))\n")
    launch_id = new_launch_id()
    outcome = supervise([sys.executable, "-c", launcher], {**os.environ, LAUNCH_ID: launch_id},
                        launch_id=launch_id)
    assert outcome.exit_code == 0
    assert set(outcome.peaks) == {0, 1}
    assert outcome.peaks[0] > 60 * MB > outcome.peaks[1] > 10 * MB


def test_the_metrics_protocol_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.delenv(metrics.METRICS, raising=False)
    assert metrics.record(step=1) is False and not path.exists()
    monkeypatch.setenv(metrics.METRICS, str(path))
    assert metrics.record(step=1, step_seconds=0.5) is True
    with path.open("a") as out:
        out.write('{"step": 2, "step_sec')  # a line being written when the job stopped
    assert metrics.read(path) == [{"step": 1, "step_seconds": 0.5}]


@pytest.mark.parametrize(("seconds", "median", "statistic"), [
    ([3.0, 1.0, 2.0], 1.5, "median of steps 2.."),
    ([4.0], 4.0, "the one step (warm-up included)"),
])
def test_step_time_leaves_the_warm_up_step_out(seconds: list[float], median: float, statistic: str) -> None:
    got = step_record([{"step": i, "step_seconds": s} for i, s in enumerate(seconds, 1)])
    assert got == {"measured": True, "seconds": seconds, "median": median, "statistic": statistic}


def test_a_program_that_reports_no_steps_is_not_measured() -> None:
    got = step_record([{"step": 1, "loss": 2.0}])
    assert got["measured"] is False and "DISTRECIPE_METRICS" in got["why"]


@pytest.mark.parametrize(("lines", "measured"), [
    ([{"rank": 0, "reserved_bytes": 5_000, "allocated_bytes": 4_000},
      {"rank": 1, "reserved_bytes": 6_000, "allocated_bytes": 4_500}], True),
    ([], False),
])
def test_gpu_memory_is_what_the_ranks_report_never_rss(lines: list[dict[str, Any]], measured: bool) -> None:
    plan = load_plan(TINY, ["cluster.device=gpu", "cluster.gpu=h100"])
    got = memory_record(plan, {0: 900 * MB, 1: 800 * MB}, lines)
    assert got["measured"] is measured
    assert got["host_rss"] == {"0": 900 * MB, "1": 800 * MB}
    if measured:
        assert got["statistic"] == RESERVED and got["peak"] == 6_000
        assert got["allocated_per_rank"] == {"0": 4_000, "1": 4_500}
    else:
        assert "host RSS is not GPU memory" in got["why"]


def test_a_run_plan_cannot_estimate_records_why_not_a_guess() -> None:
    plan = load_plan(TINY, ["batch.micro=auto", "batch.global=auto", "batch.accumulation=auto",
                            "launch.program_kind=hf", "launch.backend=accelerate-deepspeed"])
    assert predicted(plan) == {"allocated": None, "reserved": None, "needed": None, "step_seconds": None,
                               "why": "plan cannot estimate this run: the script decides the batch"}
