"""The Ray launcher runs OpenRLHF's `train_ppo_ray` with the recipe's numbers, on one node
(its own local Ray cluster) and from node 0 of a Ray cluster named by RAY_ADDRESS, as it
runs verl. The exact argv `launch --dry-run` prints is judged by OpenRLHF 0.11.2 itself
(`tests/openrlhf_judge.py`): its parser, its `__main__` checks, and DeepSpeed on the
ds_config OpenRLHF builds from it at the actor's world. Running it needs vLLM and GPUs,
which this machine has not: nothing here starts OpenRLHF."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from distrecipe.commands.launch import launch
from distrecipe.engines.openrlhf import DsBatch, ds_violation
from distrecipe.errors import LaunchError
from distrecipe.translator.openrlhf import ENTRY
from tests import openrlhf_judge
from tests.translator.test_openrlhf import CASES, RECIPE

USER = ("--actor.model_name_or_path", "Qwen/Qwen2.5-1.5B", "--reward.remote_url", "http://rm:5000/get_reward",
        "--data.prompt_dataset", "OpenRLHF/prompt-collection-v0.1")


def recipe(tmp_path: Path, nodes: int = 1, gpus: int = 8, stage: int = 3, micro: int = 4, global_: int = 128,
           n: int = 8, backend: str | None = "openrlhf") -> Path:
    path = tmp_path / "recipe.yaml"
    text = RECIPE.format(world=nodes * gpus, nodes=nodes, gpus=gpus, stage=stage, micro=micro, global_=global_,
                         n=n, prompts=global_ // n)
    path.write_text(text + (f"launch: {{backend: {backend}}}\n" if backend else ""))
    return path


def dry(capsys: pytest.CaptureFixture[str], path: Path, program: tuple[str, ...], *,
        environ: dict[str, str] | None = None, **options: object) -> dict[str, object]:
    capsys.readouterr()
    assert launch(recipe=str(path), program=program, run_dir=str(path.parent / "run"), dry_run=True,
                  environ=environ or {}, **options) == 0  # type: ignore[arg-type]
    shown: dict[str, object] = json.loads(capsys.readouterr().out)
    return shown


@pytest.mark.parametrize("numbers", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_openrlhf_takes_the_launched_argv_with_the_recipe_s_numbers(
        numbers: tuple[int, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, gpus, stage, micro, global_, n = numbers
    environ = {"RAY_ADDRESS": "10.0.0.1:6379"} if nodes > 1 else {}
    shown = dry(capsys, recipe(tmp_path, nodes, gpus, stage, micro, global_, n), USER, environ=environ)
    argv = shown["argv"]
    assert isinstance(argv, list) and argv[:3] == [sys.executable, "-m", ENTRY]
    assert argv[-len(USER):] == list(USER), "the user's models and data, after the recipe's options"
    assert shown["program_kind"] == "openrlhf" and shown["program_kind_reason"] == "launch.backend is openrlhf"
    assert shown["env"] == {"DISTRECIPE_RUN_DIR": str(tmp_path / "run"),
                            "DISTRECIPE_PLAN": str(tmp_path / "run" / "plan.json"),
                            "DISTRECIPE_METRICS": str(tmp_path / "run" / "metrics.jsonl")}, "no RAY_ADDRESS added"
    assert openrlhf_judge.verdict(ENTRY, argv[3:]) is None
    args = vars(openrlhf_judge.parser(ENTRY).parse_args(argv[3:]))
    assert (args["train.batch_size"], args["train.micro_batch_size"], args["rollout.batch_size"],
            args["rollout.n_samples_per_prompt"], args["ds.zero_stage"]) == (global_, micro, global_ // n, n, stage)
    for group in ("actor", "ref", "critic", "reward"):
        assert (args[f"{group}.num_nodes"], args[f"{group}.num_gpus_per_node"]) == (nodes, gpus)
    assert (args["vllm.num_engines"], args["train.colocate_all"]) == (nodes * gpus, True)
    assert ds_violation(DsBatch("actor", global_, micro, nodes * gpus, "the recipe")) is None


@pytest.mark.parametrize(("environ", "options", "message"), [
    ({}, {}, "OpenRLHF on 2 nodes needs a Ray cluster: run `ray start --head` on node 0"),
    ({"RAY_ADDRESS": "10.0.0.1:6379"}, {"node_rank": 1},
     "OpenRLHF launches from node 0 only; the other nodes just join the Ray cluster"),
], ids=["no-ray-address", "node-1"])
def test_several_nodes_launch_from_node_0_of_a_ray_cluster(
        environ: dict[str, str], options: dict[str, int], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(LaunchError, match=re.escape(message)):
        dry(capsys, recipe(tmp_path, nodes=2, global_=256, micro=2, n=4), USER, environ=environ, **options)


def test_an_rl_recipe_runs_openrlhf_s_module_under_openrlhf_s_launcher(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An `rl` recipe defaults to verl; the program `-m openrlhf.cli.train_ppo_ray` is the
    honest signal that it is OpenRLHF's, and the launcher follows; a launcher the user
    named is never switched."""
    path = recipe(tmp_path, backend=None)
    shown = dry(capsys, path, ("-m", ENTRY, *USER))
    assert shown["program_kind"] == "openrlhf"
    assert shown["program_kind_reason"] == f"the program is -m {ENTRY}"
    argv = shown["argv"]
    assert isinstance(argv, list) and argv[:3] == [sys.executable, "-m", ENTRY] and "--train.batch_size" in argv
    with pytest.raises(LaunchError, match=re.escape("program kind openrlhf cannot run under launch.backend verl: "
                                                    "use one of openrlhf")):
        dry(capsys, path, ("-m", ENTRY, *USER), target="verl")


def test_the_dry_run_s_shell_line_is_the_exact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = dry(capsys, recipe(tmp_path), USER)
    words = shlex.split(str(shown["shell"]))
    assert words[0] == "env" and words[len(shown["env"]) + 1:] == shown["argv"]  # type: ignore[arg-type]
