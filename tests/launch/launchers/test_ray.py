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
from typing import Any

import pytest

from distrecipe.commands.launch import launch
from distrecipe.engines.openrlhf import DsBatch, ds_violation
from distrecipe.errors import DistrecipeError, LaunchError
from distrecipe.translator.openrlhf import ENTRY
from tests import openrlhf_judge
from tests.checkpoints import trees
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


def saved(actor: Path, step: int, *, dp: int, stage: int = 3, universal: bool = False) -> Path:
    """OpenRLHF's actor save (`ppo_actor.save_checkpoint`: DeepSpeed's `save_checkpoint` into
    `--ckpt.path/_actor`, tag `global_step{N}`), with the fields DeepSpeed pickles that the
    verdict reads (`checkpoints.inspect`); `universal`: `ds_to_universal`'s output beside it,
    named by `latest_universal`."""
    import torch

    tag = trees.deepspeed(actor, step, dp=dp, stage=stage)
    for rank in range(dp):
        torch.save({"dp_world_size": dp, "ds_config": {"train_batch_size": 128}, "ds_version": "0.18.0"},
                   tag / f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt")
        torch.save({"optimizer_state_dict": {"zero_stage": stage}}, tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
    if universal:
        converted = trees.touch(actor / f"{tag.name}_universal", "mp_rank_00_model_states.pt")
        (converted / "zero").mkdir()
        (actor / "latest_universal").write_text(converted.name)
    return tag


CHECKPOINT = "checkpoint: {dir: ck, every: 10, keep: 2, resume: RESUME}\n"


@pytest.mark.parametrize(("universal", "dp"), [(False, 8), (True, 4)], ids=["as-is", "universal"])
def test_openrlhf_resumes_from_the_checked_tag_in_its_actor_folder(
        universal: bool, dp: int, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`checkpoint.resume: auto` is `--ckpt.load_enable` with `--ckpt.path` the recipe's dir,
    after the tag `latest` names in `ck/_actor` passed the DeepSpeed rules; a universal one
    (converted from another DP world) adds `--ds.use_universal_ckpt`, which OpenRLHF's own
    ds_config builder turns into DeepSpeed's `load_universal`."""
    monkeypatch.chdir(tmp_path)
    saved(tmp_path / "ck" / "_actor", 20, dp=dp, universal=universal)
    path = recipe(tmp_path)
    path.write_text(path.read_text() + CHECKPOINT.replace("RESUME", "auto"))
    capsys.readouterr()
    assert launch(recipe=str(path), program=USER, run_dir=str(tmp_path / "run"), dry_run=True, environ={}) == 0
    out, err = capsys.readouterr()
    tag = "global_step20_universal" if universal else "global_step20"
    assert f"distrecipe: checkpoint {tmp_path / 'ck' / '_actor' / tag}" in err
    argv = json.loads(out)["argv"]
    assert openrlhf_judge.verdict(ENTRY, argv[3:]) is None
    args = vars(openrlhf_judge.parser(ENTRY).parse_args(argv[3:]))
    assert (args["ckpt.path"], args["ckpt.save_steps"], args["ckpt.max_num"], args["ckpt.load_enable"]) == (
        "ck", 10, 2, True)
    assert args["ds.use_universal_ckpt"] is universal
    built = openrlhf_judge.ds_config(args["train.batch_size"], args["train.micro_batch_size"], stage=3,
                                     universal=args["ds.use_universal_ckpt"])
    assert built["checkpoint"]["load_universal"] is universal


@pytest.mark.parametrize(("make", "resume", "said"), [
    (lambda actor: [(saved(actor, 20, dp=8) / f"zero_pp_rank_7_mp_rank_00_{what}_states.pt").unlink()
                    for what in ("optim", "model")], "auto", "is partial"),
    (lambda actor: saved(actor, 20, dp=4), "auto", "resumes after a conversion"),
    (lambda actor: saved(actor, 20, dp=8), "elsewhere/global_step20",
     "OpenRLHF loads only the tag `latest` names in --ckpt.path/_actor (ck/_actor, from checkpoint.dir)"),
    (lambda actor: (saved(actor, 10, dp=8), saved(actor, 20, dp=8)), "ck/_actor/global_step10",
     "OpenRLHF loads the tag `latest` names in"),
], ids=["partial", "other-world", "elsewhere", "not-latest"])
def test_a_checkpoint_openrlhf_cannot_take_stops_the_launch_at_checkpoint_resume(
        make: Any, resume: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "ck" / "_actor")
    path = recipe(tmp_path)
    path.write_text(path.read_text() + CHECKPOINT.replace("RESUME", resume))
    line = len(path.read_text().splitlines())
    with pytest.raises(DistrecipeError) as caught:
        dry(capsys, path, USER)
    assert said in caught.value.message
    assert caught.value.where is not None and (caught.value.where.file, caught.value.where.line) == (str(path), line)


@pytest.mark.parametrize(("given", "refused"), [((), False), (("--actor.adam.betas", "0.8", "0.99"), False),
                                                (("--actor.adam.betas", "0.9", "0.99"), True)],
                         ids=["recipe-s", "the-same", "another"])
def test_the_actor_s_betas_reach_openrlhf_as_two_words(given: tuple[str, ...], refused: bool, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--actor.adam.betas` takes two words (`nargs=2`): the recipe's are written as two, and a
    user's are read as two, the same pair accepted and another refused naming the recipe key."""
    path = recipe(tmp_path)
    path.write_text(path.read_text().replace("optimizer: {name: adamw, lr: 1.0e-6}",
                                             "optimizer: {name: adamw, lr: 1.0e-6, betas: [0.8, 0.99]}"))
    if refused:
        with pytest.raises(LaunchError, match=r"--actor\.adam\.betas.*optimizer\.betas"):
            dry(capsys, path, (*USER, *given))
        return
    argv = dry(capsys, path, (*USER, *given))["argv"]
    assert isinstance(argv, list) and openrlhf_judge.verdict(ENTRY, argv[3:]) is None
    assert vars(openrlhf_judge.parser(ENTRY).parse_args(argv[3:]))["actor.adam.betas"] == [0.8, 0.99]


@pytest.mark.parametrize(("critic", "said"), [
    (lambda root: saved(root / "_critic", 20, dp=8), None),
    (lambda root: saved(root / "_critic", 10, dp=8),
     "OpenRLHF loads the critic's checkpoint beside the actor's: checkpoint "),
], ids=["same-step", "older-step"])
def test_a_critic_s_save_resumes_beside_the_actor_s(critic: Any, said: str | None, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A PPO run with a critic saves it in `_critic` beside `_actor` and loads both: they must be
    one step with one verdict."""
    monkeypatch.chdir(tmp_path)
    saved(tmp_path / "ck" / "_actor", 20, dp=8)
    critic(tmp_path / "ck")
    path = recipe(tmp_path)
    path.write_text(path.read_text() + CHECKPOINT.replace("RESUME", "auto"))
    if said is None:
        assert "--ckpt.load_enable" in dry(capsys, path, USER)["argv"]  # type: ignore[operator]
        return
    with pytest.raises(DistrecipeError, match=re.escape(said)) as caught:
        dry(capsys, path, USER)
    assert "global_step10" in caught.value.message and "where the actor's is global_step20" in caught.value.message


def test_an_imported_openrlhf_line_launches_openrlhf(tmp_path: Path, cli: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """import writes `launch.backend: openrlhf` for a `train_ppo_ray` line (an `rl` recipe's
    default launcher is verl's), so the imported recipe launches the trainer the line was for,
    with its checkpoint options, the user giving only the models and prompts."""
    monkeypatch.chdir(tmp_path)
    path = recipe(tmp_path, backend=None)
    path.write_text(path.read_text() + "checkpoint: {dir: ck, every: 10, keep: 2}\n")
    assert cli("compile", path, "--target", "openrlhf", "-o", tmp_path / "out").code == 0
    imported = cli("import", tmp_path / "out" / "openrlhf_train.sh")
    assert imported.code == 0, imported.err
    (tmp_path / "back.yaml").write_text(imported.out)
    launched = cli("launch", tmp_path / "back.yaml", "--dry-run", "--run-dir", tmp_path / "run", "--", *USER)
    assert launched.code == 0, launched.err
    shown = json.loads(launched.out)
    assert shown["program_kind"] == "openrlhf" and shown["program_kind_reason"] == "launch.backend is openrlhf"
    args = vars(openrlhf_judge.parser(ENTRY).parse_args(shown["argv"][3:]))
    assert (args["ckpt.path"], args["ckpt.save_steps"], args["ckpt.max_num"]) == ("ck", 10, 2)
