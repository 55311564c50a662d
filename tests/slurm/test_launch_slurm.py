"""`launch --slurm` scripts, submitted unchanged to the real two-node cluster (tests/slurm).

The tiny recipe on `cluster.nodes=2, gpus_per_node=1` (one CPU rank on each of n1
and n2) trains across both nodes through DeepSpeed's multi-node launcher and through
torchrun's c10d rendezvous; a failing rank fails the job with its code; `scancel`
and `scontrol requeue` end every rank and are recorded in the run directories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import rank_lines
from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow  # one worker runs every cluster test (conftest.CLUSTERS)

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SLEEPER = ROOT / "tests" / "programs" / "sleeper.py"
TWO_NODES = ("cluster.nodes=2", "cluster.gpus_per_node=1", "launch.slurm.partition=debug",
             "launch.slurm.account=default", "launch.slurm.cpus_per_task=1", "launch.slurm.mem=1000M",
             "launch.slurm.time=10:00")  # YAML 1.1's sexagesimal 600, read back as written: 10 minutes
PORTS = iter(range(29741, 29800))
"""One rendezvous port per job: both "nodes" are this machine."""


def script(cluster: SlurmCluster, name: str, *args: str, program: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """`launch --slurm`'s script for the tiny recipe on two nodes, and its runs root."""
    runs = cluster.run_dir / name
    sets = [word for key in (*TWO_NODES, f"launch.master_port={next(PORTS)}") for word in ("--set", key)]
    argv = [sys.executable, "-m", "distrecipe", "launch", str(TINY), "--slurm", *sets, "--runs-root", str(runs),
            *args, *(["--", *program] if program else [])]
    done = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, check=True, cwd=ROOT)
    path = cluster.run_dir / f"{name}.sbatch"
    path.write_text(done.stdout, encoding="utf-8")
    return path, runs


def submit(cluster: SlurmCluster, path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    # The nodes' distrecipe must be this checkout (sbatch exports the submitting environment).
    env = {**cluster.env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["sbatch", *options, str(path)], env=env, cwd=cluster.run_dir,
                          capture_output=True, text=True, timeout=600, check=False)


def job_field(cluster: SlurmCluster, job: str, name: str) -> str:
    out = cluster.run("scontrol", "show", "job", job, "-o").stdout
    return next((word.split("=", 1)[1] for word in out.split() if word.startswith(f"{name}=")), "")


def job_state(cluster: SlurmCluster, job: str) -> str:
    return job_field(cluster, job, "JobState")


ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                   "DEADLINE", "PREEMPTED"})
"""Job states that are final (a requeued job passes through REQUEUED and PENDING instead)."""


def queued(cluster: SlurmCluster, path: Path) -> str:
    """Submit the script; the job id."""
    done = submit(cluster, path, "--parsable")
    job = done.stdout.strip().split(";")[0]
    assert job, f"sbatch refused the script: {done.stderr}"
    return job


def ended(cluster: SlurmCluster, job: str, timeout: float = 600) -> str:
    """Wait for the job's end, looking each second; its ExitCode (`exit:signal`: "0:0" where
    `sbatch --wait` exits 0). Not `sbatch --wait` itself: it looks 2, 10, 42, 74... s after
    the submission (Slurm's `_job_wait` sleeps 2 s, then 4 times longer up to 32 s), so a
    job of 12 s came back after 42."""
    wait_for(lambda: job_state(cluster, job) in ENDED, timeout, f"job {job} to end")
    return job_field(cluster, job, "ExitCode")


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def record(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    return data


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def rank_pids(node_dir: Path) -> list[int]:
    return [int(path.read_text()) for path in node_dir.glob("rank*.pid")]


TARGETS = ("deepspeed", "torchrun")


@pytest.fixture(scope="module")
def trained(slurm_cluster: SlurmCluster) -> dict[str, tuple[str, str, Path]]:
    """Each target's training job, submitted together and waited for: a job takes one of
    each node's 2 CPUs, so the two run side by side. Its id, ExitCode and runs root."""
    scripts = {target: script(slurm_cluster, f"train-{target}", "--target", target) for target in TARGETS}
    jobs = {target: queued(slurm_cluster, path) for target, (path, _) in scripts.items()}
    return {target: (job, ended(slurm_cluster, job), scripts[target][1]) for target, job in jobs.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_the_tiny_recipe_trains_across_both_nodes(trained: dict[str, tuple[str, str, Path]], target: str) -> None:
    job, exit_code, runs = trained[target]
    out = (runs / f"tiny-cpu-slurm{job}.out").read_text(encoding="utf-8")
    assert exit_code == "0:0", out[-2000:] + (runs / f"tiny-cpu-slurm{job}.err").read_text()[-3000:]
    steps = [json.loads(line) for line in rank_lines(out) if line.startswith('{"step"')]
    assert [step["samples"] for step in steps] == [8] * 10, "micro 2 × accumulation 2 × 2 nodes, each step"
    for node in ("node0", "node1"):
        assert record(runs / f"tiny-cpu-slurm{job}" / node)["exit_code"] == 0
        assert record(runs / f"tiny-cpu-slurm{job}" / node)["allocation"]["platform"] == "slurm"
    # Global rank 0 is node 0's (torchrun's c10d rendezvous ranked agents by pid instead).
    assert (runs / f"tiny-cpu-slurm{job}" / "node0" / "metrics.jsonl").exists()
    assert not (runs / f"tiny-cpu-slurm{job}" / "node1" / "metrics.jsonl").exists()


ADMIN = ("--partition", "debug", "--account", "default", "--time", "12:00:00", "--mem", "2000M",
         "--cpus-per-task", "2")


@pytest.mark.parametrize("options", [ADMIN, (*ADMIN[:-2], "--exclusive"), (*ADMIN, "--exclusive")])
def test_sbatch_accepts_what_an_admin_asks_for(slurm_cluster: SlurmCluster, options: tuple[str, ...]) -> None:
    """A GPU recipe's script with every admin option (GPUs per node from the recipe, CPUs,
    memory, whole nodes, --chdir, a 12:00:00 limit) passes sbatch's own checks; with the
    CPU count left unset, sbatch refuses the placeholder."""
    gpu = ("--set", "cluster.nodes=2", "--set", "cluster.gpus_per_node=1", "--set", "cluster.device=gpu")
    argv = [sys.executable, "-m", "distrecipe", "launch", str(TINY), "--slurm", *gpu, *options,
            "--runs-root", str(slurm_cluster.run_dir / "admin"), "--", str(SLEEPER)]
    done = subprocess.run(argv, env=slurm_cluster.env, capture_output=True, text=True, check=True, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert {"#SBATCH --gpus-per-node=1", "#SBATCH --time=12:00:00", f"#SBATCH --chdir={ROOT}"} <= set(lines)
    path = slurm_cluster.run_dir / "admin.sbatch"
    path.write_text(done.stdout, encoding="utf-8")
    checked = submit(slurm_cluster, path, "--test-only")
    assert checked.returncode == 0 and "to start at" in checked.stderr, checked.stderr
    path.write_text(done.stdout.replace("#SBATCH --mem=2000M", "#SBATCH --mem=9000M"), encoding="utf-8")
    assert submit(slurm_cluster, path, "--test-only").returncode != 0, "more memory than a node has"
    unset = [word for word in argv if word not in ("--cpus-per-task", "2", "--exclusive")]
    done = subprocess.run(unset, env=slurm_cluster.env, capture_output=True, text=True, check=True, cwd=ROOT)
    path.write_text(done.stdout, encoding="utf-8")
    refused = submit(slurm_cluster, path, "--test-only")
    assert refused.returncode != 0 and "cpus-per-task" in refused.stderr, refused.stderr


def test_a_failing_rank_fails_the_job_with_its_code(slurm_cluster: SlurmCluster) -> None:
    path, runs = script(slurm_cluster, "fail", program=(str(SLEEPER), "--fail-rank", "1"))
    started = time.monotonic()
    job = queued(slurm_cluster, path)
    assert ended(slurm_cluster, job) != "0:0"  # (a job still COMPLETING, its epilog running, has not ended)
    assert time.monotonic() - started < 300, "the waiting rank on the other node was not left to sleep"
    assert job_state(slurm_cluster, job) == "FAILED"
    assert record(runs / f"tiny-cpu-slurm{job}" / "node1")["exit_code"] == 3
    node0 = runs / f"tiny-cpu-slurm{job}" / "node0"
    assert record(node0)["exit_code"] != 0, "srun --kill-on-bad-exit ended node 0 too"
    assert not any(alive(pid) for pid in rank_pids(node0))


def start_sleeping_job(cluster: SlurmCluster, name: str) -> tuple[str, Path]:
    path, runs = script(cluster, name, program=(str(SLEEPER),))
    job = submit(cluster, path, "--parsable").stdout.strip().split(";")[0]
    assert job, "sbatch refused the script"
    run = runs / f"tiny-cpu-slurm{job}"
    wait_for(lambda: len(rank_pids(run / "node0")) + len(rank_pids(run / "node1")) == 2, 240,
             "both ranks to start")
    return job, run


def test_scancel_ends_every_rank_and_is_recorded(slurm_cluster: SlurmCluster) -> None:
    job, run = start_sleeping_job(slurm_cluster, "cancel")
    pids = rank_pids(run / "node0") + rank_pids(run / "node1")
    assert slurm_cluster.run("scancel", job).returncode == 0
    wait_for(lambda: job_state(slurm_cluster, job) == "CANCELLED" and not any(map(alive, pids)), 120,
             "the job and its ranks to end")
    for node in ("node0", "node1"):
        wait_for(lambda node=node: record(run / node)["exit_code"] is not None, 30, f"{node}'s record")
        assert (record(run / node)["exit_code"], record(run / node)["signal"]) == (143, "SIGTERM")


def test_a_requeued_job_runs_again_in_its_own_directory(slurm_cluster: SlurmCluster) -> None:
    job, run = start_sleeping_job(slurm_cluster, "requeue")
    pids = rank_pids(run / "node0") + rank_pids(run / "node1")
    assert slurm_cluster.run("scontrol", "requeue", job).returncode == 0
    wait_for(lambda: job_state(slurm_cluster, job) == "COMPLETED", 300, "the requeued job to finish")
    assert not any(map(alive, pids))
    again = run.with_name(f"{run.name}-restart1")
    for node in ("node0", "node1"):
        assert record(run / node)["signal"] == "SIGTERM"
        assert record(again / node)["exit_code"] == 0
