"""Real trainings on two CPU ranks: equivalence, the demo, multi-node, supervision.

These start processes and import torch and DeepSpeed, so they are `slow`; each run is
10 optimizer steps of an 86k-parameter model, and the six equivalence variants share
one pair of processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distrecipe.launch.supervise import LAUNCH_ID, carrying, running
from tests.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
WORKER = Path(__file__).resolve().parent / "launch_equivalence_worker.py"
TOLERANCE = 1e-4
GLOBAL = 8
STEPS = 10


def distrecipe(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "distrecipe", "launch", *map(str, args)]


def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def losses(records: list[dict[str, Any]]) -> list[float]:
    return [record["loss"] for record in records]


def norms(records: list[dict[str, Any]]) -> list[float]:
    return [record["grad_norm"] for record in records]


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The complete lines of rank 0's log (a line being written is left for the next look)."""
    *complete, _ = (run_dir / "metrics.jsonl").read_text().split("\n")
    return [json.loads(line) for line in complete]


@pytest.fixture(scope="module")
def curves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every variant's per-step records, from one torchrun job of two CPU ranks."""
    out = tmp_path_factory.mktemp("equivalence") / "curves.json"
    torchrun = Path(sys.executable).parent / "torchrun"
    done = run([str(torchrun), "--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(WORKER), str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, list[dict[str, Any]]] = json.loads(out.read_text())
    return result


def test_every_engine_trains_the_same_curve(curves: dict[str, list[dict[str, Any]]]) -> None:
    reference = losses(curves["ddp"])
    engines = [name for name in curves if name not in ("control-no-learning", "demo")]
    assert engines == ["ddp", "zero1", "zero2", "zero3", "fsdp2-reshard-false", "fsdp2-reshard-true"]
    for name in engines:
        records = curves[name]
        assert [r["step"] for r in records] == list(range(1, STEPS + 1)), name
        assert [r["samples"] for r in records] == [GLOBAL] * STEPS, name
        assert records[-1]["samples_total"] == GLOBAL * STEPS, name
        worst = max(relative(a, b) for a, b in zip(losses(records), reference, strict=True))
        assert worst <= TOLERANCE, f"{name}'s loss departs from DDP's by {worst:.2e} relative"
        worst = max(relative(a, b) for a, b in zip(norms(records), norms(curves["ddp"]), strict=True))
        assert worst <= TOLERANCE, f"{name}'s gradient norm departs from DDP's by {worst:.2e} relative"


def test_the_agreement_is_about_training(curves: dict[str, list[dict[str, Any]]]) -> None:
    """A run that barely learns must differ, or agreeing would prove nothing."""
    control = losses(curves["control-no-learning"])
    worst = max(relative(a, b) for a, b in zip(control, losses(curves["ddp"]), strict=True))
    assert worst > 100 * TOLERANCE


def test_demo_trains_through_deepspeed(tmp_path: Path, curves: dict[str, list[dict[str, Any]]]) -> None:
    done = run(distrecipe(TINY, "--runs-root", tmp_path, "--set", f"launch.master_port={free_port()}"))
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"step"')]
    assert [r["step"] for r in printed] == list(range(1, STEPS + 1))
    (run_dir,) = tmp_path.iterdir()
    assert metrics(run_dir) == printed
    record = json.loads((run_dir / "run.json").read_text())
    assert record["exit_code"] == 0 and record["argv"][0].endswith("deepspeed")
    assert {"plan.json", "ds_config.json", "recipe.yaml"} <= {p.name for p in run_dir.iterdir()}
    for got, want in zip(losses(printed), losses(curves["demo"]), strict=True):
        assert relative(got, want) <= TOLERANCE
    first, last = losses(printed)[:3], losses(printed)[-3:]
    assert sum(last) < 0.8 * sum(first), f"the demo should visibly learn: {losses(printed)}"


def test_two_torchrun_agents_rendezvous_over_loopback(
    tmp_path: Path, curves: dict[str, list[dict[str, Any]]]
) -> None:
    """Two "nodes" of one SLURM step on this machine: each agent reads its node rank and
    node 0's address from SLURM_*, as under `srun` from the --slurm script. Node 1 starts
    first: torchrun's c10d rendezvous ranked agents by pid and gave it global rank 0 (and
    metrics.jsonl); the static rank keeps rank 0 on node 0."""
    port = str(free_port())
    common = ["--set", "cluster.nodes=2", "--set", "cluster.gpus_per_node=1", "--set", "strategy=fsdp",
              "--set", "grad_clip=0.3", "--set", "launch.backend=torchrun",
              "--set", f"launch.master_port={port}", "--runs-root", tmp_path]
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "127.0.0.1,127.0.0.1", "SLURM_STEP_ID": "0",
             "SLURM_NTASKS": "2"}
    # Files, not pipes: an agent blocked on a full pipe nobody reads yet would stall the
    # rendezvous its peer waits in.
    logs = [tmp_path / f"agent{rank}.log" for rank in (0, 1)]
    agents = {}
    for rank in (1, 0):
        with logs[rank].open("w") as out:
            agents[rank] = subprocess.Popen(distrecipe(TINY, *common), cwd=ROOT,
                                            env={**os.environ, **slurm, "SLURM_NODEID": str(rank)},
                                            stdout=out, stderr=subprocess.STDOUT)
        time.sleep(2)
    codes = [agents[rank].wait(timeout=300) for rank in (0, 1)]
    assert codes == [0, 0], "".join(log.read_text()[-2000:] for log in logs)
    nodes = [tmp_path / "tiny-cpu-slurm4242" / f"node{rank}" for rank in (0, 1)]
    for rank, node in enumerate(nodes):
        argv = json.loads((node / "run.json").read_text())["argv"]
        assert argv[1:3] == ["--nnodes", "2"] and argv[5:13] == [
            "--rdzv-backend", "static", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
            "--master-port", port]
    assert not (nodes[1] / "metrics.jsonl").exists(), "global rank 0 is node 0's"
    logged = metrics(nodes[0])
    # torchrun keeps each rank's streams in its node's run directory (one local rank each),
    # and still shows them: rank 0's step lines are in its file and, prefixed, on the terminal.
    for rank, node in enumerate(nodes):
        (rank_dir,) = (node / "ranks").glob("*/attempt_0/*")
        assert rank_dir.name == "0" and {p.name for p in rank_dir.iterdir()} >= {"stdout.log", "stderr.log"}
        steps = [json.loads(line) for line in (rank_dir / "stdout.log").read_text().splitlines()
                 if line.startswith('{"step"')]
        assert steps == (logged if rank == 0 else []), rank
    shown = logs[0].read_text()
    teed = [json.loads(line.removeprefix("[default0]:")) for line in shown.splitlines()
            if line.startswith('[default0]:{"step"')]
    assert teed == logged, shown[-3000:]
    assert [r["samples"] for r in logged] == [GLOBAL] * STEPS
    for got, want in zip(losses(logged), losses(curves["fsdp2-reshard-false"]), strict=True):
        assert relative(got, want) <= TOLERANCE


def test_sigterm_ends_every_rank_and_is_recorded(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen(
        distrecipe(TINY, "--run-dir", run_dir, "--set", f"launch.master_port={free_port()}",
                   "--", "-m", "distrecipe.launch.tiny_train", "--steps", "100000"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(tmp_path / "stderr").open("w"))
    deadline = time.monotonic() + 180
    while not (run_dir / "metrics.jsonl").exists() or len(metrics(run_dir)) < 2:
        assert launcher.poll() is None and time.monotonic() < deadline, (
            f"training never got going (exit {launcher.poll()}):\n"
            + (tmp_path / "stderr").read_text()[-2000:])
        time.sleep(0.2)
    launch_id = json.loads((run_dir / "run.json").read_text())["env"][LAUNCH_ID]
    job = carrying(launch_id)
    assert len(job) >= 3, "the launcher and two ranks carry the launch id"
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=60) == 128 + signal.SIGTERM
    record = json.loads((run_dir / "run.json").read_text())
    assert record["exit_code"] == 128 + signal.SIGTERM and record["signal"] == "SIGTERM"
    assert carrying(launch_id) == set()
    assert not any(running(pid) for pid in job), "no orphan keeps running, or is still dying"


def test_a_rank_ends_with_its_output_flushed_and_no_teardown() -> None:
    """The trainer's exit: gloo threads may still need the GIL, so no interpreter
    teardown may run (it would abort the rank), but nothing written may be lost."""
    code = ("import atexit\n"
            "from distrecipe.launch.tiny_train import exit_without_teardown\n"
            "atexit.register(print, 'teardown ran')\n"
            "print('last record', end='')\n"
            "exit_without_teardown(7)\n")
    done = run([sys.executable, "-c", code])
    assert (done.returncode, done.stdout) == (7, "last record"), done.stderr


def test_a_failing_rank_exit_code_comes_back(tmp_path: Path) -> None:
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text("import os, sys\nsys.exit(42 if os.environ['RANK'] == '1' else 0)\n")
    run_dir = tmp_path / "run"
    done = run(distrecipe(TINY, "--run-dir", run_dir, "--set", f"launch.master_port={free_port()}",
                          "--", script))
    assert done.returncode == 42, done.stderr[-2000:]
    assert json.loads((run_dir / "run.json").read_text())["exit_code"] == 42
    assert os.path.exists(run_dir / "ds_config.json")


def test_four_launches_started_together_each_hold_their_own_port(tmp_path: Path) -> None:
    """Four one-node DeepSpeed launches of the demo, all asking for the default 29500, started
    at once: each holds the port it picked until its job has ended, so no rank 0 meets
    another's store (EADDRINUSE) and every job trains."""
    logs = [tmp_path / f"launch{i}.log" for i in range(4)]
    launches = []
    for i, log in enumerate(logs):
        with log.open("w") as out:
            launches.append(subprocess.Popen(
                distrecipe(TINY, "--run-dir", tmp_path / f"run{i}", "--",
                           "-m", "distrecipe.launch.tiny_train", "--steps", "2"),
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
    codes = [launch.wait(timeout=240) for launch in launches]
    assert codes == [0] * 4, "".join(log.read_text()[-1500:] for log in logs)
    ports = set()
    for i in range(4):
        argv = json.loads((tmp_path / f"run{i}" / "run.json").read_text())["argv"]
        ports.add(argv[argv.index("--master_port") + 1])
    assert len(ports) == 4, ports
