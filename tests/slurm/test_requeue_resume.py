"""A resuming job on the real two-node cluster: requeued mid-run, it finishes as if uninterrupted.

The tiny recipe on two nodes (one CPU rank each) saves every `EVERY` steps with
`checkpoint.resume: auto`. `scontrol requeue` ends the first attempt mid-run; the second
attempt resumes from the latest complete checkpoint, so the optimizer steps the final
model went through are exactly 1..STEPS, each once: the first attempt's steps up to the
checkpoint, the second's after it, and the final loss is the uninterrupted run's. Then
SLURM's own warning before the time limit (`scancel --batch -s USR1`, what
`--signal=B:USR1` sends): the ranks save after the step they agree on, the batch script
requeues the job, and the next attempt starts at the very next step (nothing trained twice).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.slurm.fixture import SlurmCluster
from tests.slurm.test_launch_slurm import ended, job_state, queued, record, script, wait_for

pytestmark = pytest.mark.slow  # one worker runs every cluster test (conftest.CLUSTERS)

STEPS, EVERY = 8, 2
PACE = "1.0"
"""Seconds per step: time to interrupt the run between two checkpoints."""
UNINTERRUPTED_FINAL_LOSS = None


def steps(run_dir: Path) -> dict[int, float]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return {}
    return {r["step"]: r["loss"] for r in map(json.loads, path.read_text().splitlines() if path.exists() else [])}


def resuming_job(cluster: SlurmCluster, name: str) -> tuple[str, Path, Path]:
    ck = cluster.run_dir / f"{name}-ck"
    path, runs = script(cluster, name, "--set", f"checkpoint.dir={ck}", "--set", f"checkpoint.every={EVERY}",
                        "--set", "checkpoint.resume=auto",
                        program=("-m", "distrecipe.launch.tiny_train", "--steps", str(STEPS), "--pace", PACE))
    assert "#SBATCH --requeue" in path.read_text() and "#SBATCH --signal=B:USR1@300" in path.read_text()
    job = queued(cluster, path)
    return job, runs / f"tiny-cpu-slurm{job}", ck


@pytest.fixture(scope="module")
def whole(slurm_cluster: SlurmCluster) -> Iterator[tuple[str, Future[str], Path]]:
    """The uninterrupted job, submitted first and waited for in a thread (so its end is seen
    within MinJobAge however long the resuming jobs take): it runs beside them."""
    path, runs = script(slurm_cluster, "whole", program=("-m", "distrecipe.launch.tiny_train", "--steps", str(STEPS)))
    job = queued(slurm_cluster, path)
    with ThreadPoolExecutor(1) as pool:
        yield job, pool.submit(ended, slurm_cluster, job), runs


@pytest.fixture(scope="module")
def uninterrupted(whole: tuple[str, Future[str], Path]) -> dict[int, float]:
    job, exit_code, runs = whole
    assert exit_code.result() == "0:0", (runs / f"tiny-cpu-slurm{job}.err").read_text()[-3000:]
    return steps(runs / f"tiny-cpu-slurm{job}" / "node0")


INTERRUPTIONS = {"requeue-resume": ("scontrol", "requeue"), "warned": ("scancel", "--batch", "-s", "USR1")}
"""Each resuming job and how it is interrupted: requeued by the admin, or warned before the limit."""


@pytest.fixture(scope="module")
def interrupted(slurm_cluster: SlurmCluster, whole: object) -> dict[str, tuple[str, Path]]:
    """Both resuming jobs, submitted together (after the uninterrupted one) and each
    interrupted its own way, then waited for. A job takes one of each node's 2 CPUs, so
    the jobs run two at a time, and one's startup, paced steps and requeue delay overlap
    another's instead of following them. Each test judges one job."""
    jobs = {name: resuming_job(slurm_cluster, name) for name in INTERRUPTIONS}
    ready = {"requeue-resume": lambda run, ck: (ck / "latest").exists() and len(steps(run / "node0")) >= EVERY + 1,
             "warned": lambda run, ck: len(steps(run / "node0")) >= 2}
    waiting = dict(INTERRUPTIONS)

    def interrupt_the_ready() -> bool:
        for name, command in list(waiting.items()):
            job, run, ck = jobs[name]
            if ready[name](run, ck):
                assert slurm_cluster.run(*command, job).returncode == 0, command
                del waiting[name]
        return not waiting

    wait_for(interrupt_the_ready, 600, "a checkpoint and a step past it, and two steps")
    for name, (job, run, _) in jobs.items():
        again = run.with_name(f"{run.name}-restart1")
        wait_for(lambda again=again: (again / "node0" / "run.json").exists(), 300, f"{name}'s requeued attempt")
        wait_for(lambda job=job: job_state(slurm_cluster, job) == "COMPLETED", 600, f"{name}'s requeued job to finish")
    return {name: (job, run) for name, (job, run, _) in jobs.items()}


def test_scontrol_requeue_mid_run_finishes_with_the_uninterrupted_loss(
        interrupted: dict[str, tuple[str, Path]], uninterrupted: dict[int, float]) -> None:
    _, run = interrupted["requeue-resume"]
    again = run.with_name(f"{run.name}-restart1")
    first, second = steps(run / "node0"), steps(again / "node0")
    resumed_at = record(again / "node0")["checkpoint"]["step"]
    assert resumed_at % EVERY == 0 and resumed_at <= max(first)
    assert sorted(second) == list(range(resumed_at + 1, STEPS + 1)), "the second attempt starts after the checkpoint"
    kept = {s: first[s] for s in first if s <= resumed_at} | second
    assert sorted(kept) == list(range(1, STEPS + 1)), "every step once: none skipped"
    worst = max(abs(kept[s] - uninterrupted[s]) / abs(uninterrupted[s]) for s in kept)
    print(f"\nSLURM scontrol requeue after step {max(first)}, resumed at {resumed_at}: final loss "
          f"{kept[STEPS]!r} vs uninterrupted {uninterrupted[STEPS]!r}; max relative difference {worst:.2e}")
    assert kept[STEPS] == uninterrupted[STEPS] and worst == 0.0
    attempts = [json.loads(line) for line in (run / "node0" / "attempts.jsonl").read_text().splitlines()]
    assert [(a["attempt"], a["exit_code"], a["checkpoint_step"]) for a in attempts] == [
        (0, 143, None), (1, 0, resumed_at)]


def test_the_time_limit_warning_saves_and_requeues_without_training_twice(
        interrupted: dict[str, tuple[str, Path]], uninterrupted: dict[int, float]) -> None:
    _, run = interrupted["warned"]
    again = run.with_name(f"{run.name}-restart1")
    first, second = steps(run / "node0"), steps(again / "node0")
    assert record(run / "node0")["exit_code"] == 0, "the first attempt saved and stopped"
    assert record(again / "node0")["checkpoint"]["step"] == max(first)
    assert sorted(first) + sorted(second) == list(range(1, STEPS + 1)), "each step trained exactly once"
    final = second[STEPS]
    print(f"\nSLURM USR1 before the limit after step {max(first)}: final loss {final!r} vs uninterrupted "
          f"{uninterrupted[STEPS]!r}")
    assert final == uninterrupted[STEPS]
