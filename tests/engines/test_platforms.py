"""engines.platforms: which file is a job, its world, and its commands with their positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distrecipe.engines.native import detect, read
from distrecipe.engines.platforms import (
    accelerator_count,
    job_commands,
    job_world,
    named_recipe,
    platform_kind,
    verl_overrides,
)
from distrecipe.engines.shell import Word
from distrecipe.errors import Position


@pytest.mark.parametrize(("data", "kind"), [
    ({"apiVersion": "ray.io/v1", "kind": "RayJob"}, "rayjob"),
    ({"num_nodes": 2, "resources": {"accelerators": "H100:8"}}, "skypilot"),
    ({"run": "python train.py"}, "skypilot"),
    ({"name": "x", "setup": "pip install ."}, None),  # no run, no num_nodes: nothing to check
    ({"run": "x", "trainer": {}}, None),  # not SkyPilot's keys
    ({"num_nodes": 2}, None),
])
def test_platform_kind(data: dict[str, Any], kind: str | None) -> None:
    assert platform_kind(data) == kind


def test_detect_keeps_the_engines_kinds_first() -> None:
    verl = read(Path("v.yaml"), "data: {train_batch_size: 8}\ntrainer: {nnodes: 1}\n")
    assert detect(verl) == "verl"
    task = read(Path("t.yaml"), "num_nodes: 2\nresources: {accelerators: A100:8}\nrun: torchrun t.py\n")
    assert detect(task) == "skypilot"


@pytest.mark.parametrize(("resources", "count"), [
    ({"accelerators": "H100:8"}, 8), ({"accelerators": "H100"}, 1), ({"accelerators": {"A100-80GB": 4}}, 4),
    ({"accelerators": ["H100:8", "A100:8"]}, 8), ({"accelerators": ["H100:8", "A100:4"]}, None),
    ({"any_of": [{"accelerators": "H100:8"}, {"accelerators": "H200:8"}]}, 8),
    ({"accelerators": "H100:0.5"}, None), ({"cpus": 4}, None), (None, None),
])
def test_accelerator_count(resources: Any, count: int | None) -> None:
    assert accelerator_count(resources) == count


def test_job_world() -> None:
    assert job_world("skypilot", {"num_nodes": 4, "resources": {"accelerators": "H100:8"}}).ranks == 32
    assert job_world("skypilot", {"resources": {"accelerators": "H100:8"}}).ranks == 8, "num_nodes defaults to 1"
    auto = job_world("trainjob", {"spec": {"trainer": {"numNodes": 2, "resourcesPerNode": {
        "limits": {"nvidia.com/gpu": 4}}}}})
    assert (auto.ranks, auto.said) == (8, "numNodes × the GPUs of resourcesPerNode (numProcPerNode auto)")


def test_commands_keep_their_positions() -> None:
    text = ("apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: p}\nspec:\n"
            "  entrypoint: 'python3 -m verl.trainer.main_ppo trainer.nnodes=2'\n")
    [words] = job_commands("rayjob", read(Path("j.yaml"), text))
    assert [w.value for w in words] == ["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2"]
    assert words[3].where == Position("j.yaml", 5, 49)
    overrides = verl_overrides(words)
    assert overrides is not None and overrides["trainer.nnodes"].value == "2"
    listed = ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\nspec:\n"
              "  trainer:\n    command: [python3, -m, distrecipe, launch, r.yaml, --node-rank, $(PET_NODE_RANK)]\n")
    [words] = job_commands("trainjob", read(Path("t.yaml"), listed))
    assert words[-1].value is None, "the kubelet's $(VAR) is unknown here"
    recipe = named_recipe(words)
    assert recipe is not None and recipe.value == "r.yaml" and recipe.where.line == 6


def test_named_recipe_and_verl() -> None:
    def words(*values: str) -> list[Word]:
        return [Word(v, v, Position("f", 1, i + 1)) for i, v in enumerate(values)]

    for argv in (("distrecipe", "launch", "--set", "a=1", "--k8s", "r.yaml"), ("distrecipe", "launch", "r.yaml"),
                 ("/usr/bin/python3", "-m", "distrecipe", "launch", "--target=verl", "r.yaml", "--set", "b=2")):
        found = named_recipe(words(*argv))
        assert found is not None and found.value == "r.yaml", argv
    assert named_recipe(words("distrecipe", "launch", "--", "r.yaml")) is None
    assert named_recipe(words("python", "train.py")) is None
    assert verl_overrides(words("torchrun", "train.py")) is None
    assert verl_overrides(words("python3", "-m", "verl.trainer.main_ppo", "+x.y=1"))["x.y"].value == "1"
