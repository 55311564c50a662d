"""The manifests' commands, run as the operators run them: two local "nodes", one curve.

No cluster runs here, so each node is a process tree started in a directory of its
own (the image's working directory, holding the recipe) with the variables the
operator injects into that node's container and the command the kubelet makes of the
manifest's (`$(PET_…)` expanded). The tiny recipe on 2 nodes × 1 CPU rank must train
with the loss curve of 1 node × 2 ranks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import rank_lines
from tests.k8s.kubelet import expand, pytorchjob_env, trainjob_env
from tests.launch.one_node import environment, one_node
from tests.test_launch_train import ROOT, TINY, free_port, losses, relative

pytestmark = pytest.mark.slow

TOLERANCE = 1e-4
STEPS = 10
TWO_NODES = ("--set", "cluster.nodes=2", "--set", "cluster.gpus_per_node=1")
READER = importlib.util.find_spec("distrecipe.launch.allocation") is not None
"""Whether launch reads the platforms' variables itself (DeepSpeed's runner needs it to
start a node's ranks without ssh outside SLURM)."""


def steps(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in rank_lines(text) if line.startswith('{"step"')]


@pytest.fixture
def nodes() -> Iterator[Callable[..., list[subprocess.Popen[str]]]]:
    """Starts node process trees, each its own session; the finalizer ends what is left."""
    started: list[subprocess.Popen[str]] = []

    def start(commands: list[tuple[list[str], dict[str, str], Path]]) -> list[subprocess.Popen[str]]:
        for argv, env, cwd in commands:
            started.append(subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, start_new_session=True))
        return started[-len(commands):]

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def pod_dirs(tmp_path: Path, count: int) -> list[Path]:
    """One working directory per node holding the recipe where the image would."""
    dirs = []
    for rank in range(count):
        cwd = tmp_path / f"pod{rank}"
        (cwd / "recipes").mkdir(parents=True)
        shutil.copy(TINY, cwd / "recipes" / TINY.name)
        dirs.append(cwd)
    return dirs


def node_command(manifest: dict[str, Any]) -> list[str]:
    spec = manifest["spec"]
    if manifest["kind"] == "TrainJob":
        command: list[str] = spec["trainer"]["command"] + spec["trainer"].get("args", [])
        return command
    container = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container == spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    return list(container["command"])


@pytest.mark.parametrize(("kind", "target"), [
    ("trainjob", "torchrun"), ("pytorchjob", "torchrun"),
    pytest.param("trainjob", "deepspeed", marks=pytest.mark.skipif(
        not READER, reason="DeepSpeed's runner starts a node's own ranks once launch reads PET_* "
                           "(distrecipe/launch/allocation.py)")),
])
def test_the_manifests_command_trains_across_two_nodes_with_one_nodes_curve(
        kind: str, target: str, tmp_path: Path, nodes: Callable[..., list[subprocess.Popen[str]]]) -> None:
    env = environment()
    printed = subprocess.run([sys.executable, "-m", "distrecipe", "launch", str(TINY.relative_to(ROOT)), "--k8s",
                              "--k8s-kind", kind, "--target", target, *TWO_NODES], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True)
    manifest = yaml.safe_load(printed.stdout)
    command = node_command(manifest)
    assert "$(PET_NODE_RANK)" in command and command[:2] == ["python3", "-m"]
    port = free_port()
    injected = trainjob_env if kind == "trainjob" else pytorchjob_env
    started = []
    for rank, cwd in reversed(list(enumerate(pod_dirs(tmp_path, 2)))):  # node 1's pod may start first
        pod_env = {**env, **injected(nodes=2, processes=1, rank=rank, port=port)}
        started.append(([expand(word, pod_env) for word in command], pod_env, cwd))
    outputs = []
    for process in nodes(started):
        out, err = process.communicate(timeout=420)
        assert process.returncode == 0, err[-3000:]
        outputs.append(out)
    two = [record for out in outputs for record in steps(out)]
    one = list(one_node(target))
    assert len(one) == len(two) == STEPS and [r["samples"] for r in two] == [8] * STEPS
    worst = max(relative(a, b) for a, b in zip(losses(two), losses(one), strict=True))
    assert worst <= TOLERANCE, f"2 nodes' loss departs from 1 node's by {worst:.2e}: {losses(two)} {losses(one)}"
    runs = sorted(path.relative_to(tmp_path).parts[0] for path in tmp_path.glob("pod*/runs/*/run.json"))
    assert runs == ["pod0", "pod1"], "each node records its own run directory"
