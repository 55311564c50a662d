"""The emitted SkyPilot `run` block, executed as two local "nodes", trains the one-node curve.

Two process trees on this machine, each with the variables SkyPilot sets on a node
(`SKYPILOT_NODE_RANK`, `SKYPILOT_NODE_IPS` on loopback, `SKYPILOT_NUM_NODES`,
`SKYPILOT_TASK_ID`), run the task's `run` text with bash in its workdir, as SkyPilot
does. The tiny recipe on 2 nodes × 1 rank must give the loss curve of 1 node × 2 ranks,
and global rank 0 (metrics.jsonl) must be on node rank 0, even with node 1 started
first (c10d's rendezvous ranked agents by pid and put it on node 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launch.one_node import environment, one_node
from tests.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
TOLERANCE = 1e-4
STEPS, GLOBAL = 10, 8


def distrecipe(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "distrecipe", "launch", *map(str, args)]


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("target", ["deepspeed", "torchrun"])
def test_the_run_block_on_two_nodes_trains_the_one_node_curve(tmp_path: Path, target: str) -> None:
    runs = tmp_path / "runs"
    emitted = subprocess.run(distrecipe(TINY, "--skypilot", "--target", target, "--runs-root", runs,
                                        "--set", "cluster.nodes=2", "--set", "cluster.gpus_per_node=1",
                                        "--set", f"launch.master_port={free_port()}"),
                             cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=120, check=True)
    task = yaml.safe_load(emitted.stdout)
    assert task["num_nodes"] == 2
    sky = {"SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.2\n", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NUM_GPUS_PER_NODE": "0", "SKYPILOT_TASK_ID": "sky-local-test_tiny_1"}
    logs = [tmp_path / f"node{rank}.log" for rank in (0, 1)]
    trees = {}
    # Files, not pipes (an agent blocked on a full pipe would stall its peer's rendezvous);
    # node 1 first, so a rendezvous that ranks by pid would put rank 0 on it.
    for rank in (1, 0):
        with logs[rank].open("w") as out:
            trees[rank] = subprocess.Popen(["bash", "-c", task["run"]], cwd=task["workdir"],
                                           env={**environment(), **sky, "SKYPILOT_NODE_RANK": str(rank)},
                                           stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(2)
    codes = {rank: tree.wait(timeout=600) for rank, tree in trees.items()}
    assert codes == {1: 0, 0: 0}, "".join(log.read_text()[-2000:] for log in logs)
    nodes = [runs / "tiny-cpu-skypilot-sky-local-test_tiny_1" / f"node{rank}" for rank in (0, 1)]
    for rank, node in enumerate(nodes):
        record = json.loads((node / "run.json").read_text())
        assert record["allocation"]["platform"] == "skypilot" and record["allocation"]["node_rank"] == rank
        assert record["exit_code"] == 0
    assert not (nodes[1] / "metrics.jsonl").exists(), "global rank 0 is node 0's"
    two = metrics(nodes[0])
    assert [r["samples"] for r in two] == [GLOBAL] * STEPS
    one = one_node(target)
    worst = max(relative(a["loss"], b["loss"]) for a, b in zip(two, one, strict=True))
    assert worst <= TOLERANCE, f"2 nodes × 1 rank depart from 1 node × 2 ranks by {worst:.2e}"
