"""`distrecipe checkpoint show | check | convert` on engine-shaped folders, and bad input."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.checkpoints import trees
from tests.conftest import RECIPES, Result

FSDP = ["--set", "strategy=fsdp", "--set", "stage=3"]


def test_show_lists_every_checkpoint_and_marks_the_one_auto_takes(cli: Callable[..., Result],
                                                                  tmp_path: Path) -> None:
    """(DeepSpeed's tags are shown with what their pickled states hold: tests/checkpoints/test_faults.py.)"""
    trees.dcp(tmp_path, 3, world=2)
    trees.dcp(tmp_path, 6, world=2, metadata=False)
    result = cli("checkpoint", "show", tmp_path)
    assert result.code == 0, result
    assert result.out.splitlines() == [
        f"* {tmp_path / 'step-3'}: dcp, step 3, saved by 2 ranks, complete",
        f"  {tmp_path / 'step-6'}: dcp, step 6, saved by 2 ranks, partial: no .metadata (torch writes it "
        "after every rank's shards)"]


@pytest.mark.parametrize(("resume", "outcome", "code"), [
    ("ck/step-4", "resumes as is", 0),
    ("auto", "resumes as is", 0),
])
def test_check_a_recipe_against_its_checkpoint(cli: Callable[..., Result], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, resume: str, outcome: str,
                                               code: int) -> None:
    monkeypatch.chdir(tmp_path)
    trees.dcp(tmp_path / "ck", 4, world=4)
    result = cli("checkpoint", "check", RECIPES / "tiny-cpu.yaml", *FSDP, "--set", "checkpoint.dir=ck",
                 "--set", f"checkpoint.resume={resume}")
    assert result.code == code, result
    assert f": {outcome}: DCP reshards on load" in result.out


def test_check_names_the_conversion_and_its_command(cli: Callable[..., Result], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch-free check of the DeepSpeed rule via an HF checkpoint would hide it: a ZeRO
    checkpoint's model states are opened (torch), so an empty file is refused as unreadable."""
    monkeypatch.chdir(tmp_path)
    trees.deepspeed(tmp_path / "ck", 3, dp=4)
    result = cli("checkpoint", "check", RECIPES / "tiny-cpu.yaml", "--checkpoint", "ck")
    assert result.code == 2
    assert "mp_rank_00_model_states.pt cannot be read by torch.load" in result.err
    assert result.err.count("\n") == 1 and result.err.startswith(f"{RECIPES / 'tiny-cpu.yaml'}:1:1: error:")


@pytest.mark.parametrize(("setup", "sets", "said"), [
    (lambda root: None, ["checkpoint.resume=nowhere"], "nowhere does not exist"),
    (lambda root: trees.touch(root / "notes", "a.txt"), ["checkpoint.resume=notes"], "notes is not a checkpoint"),
    (lambda root: trees.dcp(root / "ck", 4, metadata=False), ["checkpoint.resume=ck/step-4"],
     "is partial (no .metadata"),
    (lambda root: None, ["checkpoint.resume=auto"], "does not state"),
    (lambda root: trees.verl(root / "ck", 4, world=4), ["checkpoint.resume=ck", "launch.program_kind=verl",
                                                        "launch.backend=verl"], "cannot"),
])
def test_bad_checkpoints_are_one_positioned_line(cli: Callable[..., Result], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, setup: object,
                                                 sets: list[str], said: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert callable(setup)
    setup(tmp_path)
    args = [arg for item in sets for arg in ("--set", item)]
    result = cli("checkpoint", "check", RECIPES / "tiny-cpu.yaml", *FSDP, *args)
    assert result.code == 2, result
    assert said in result.err and result.err.count("\n") == 1
    assert re.match(r"--set checkpoint\.resume=\S+:1:\d+: error: ", result.err), result.err  # where it was said


@pytest.mark.parametrize(("make", "to", "said"), [
    (lambda root: root / "nowhere", "universal", "does not exist"),
    (lambda root: trees.dcp(root, 4), "universal", "is a dcp checkpoint; --to universal converts deepspeed"),
    (lambda root: trees.dcp(root, 4, metadata=False), "torch", "is partial"),
])
def test_convert_refuses_bad_input_and_writes_nothing(cli: Callable[..., Result], tmp_path: Path, make: object,
                                                      to: str, said: str) -> None:
    assert callable(make)
    path = make(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = cli("checkpoint", "convert", "--to", to, path)
    assert result.code == 2 and said in result.err and result.err.startswith(f"{path}:1:1: error:")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("how", [("--program-kind", "openrlhf"), ("--set", "launch.backend=openrlhf")],
                         ids=["program-kind", "backend"])
def test_check_judges_openrlhf_s_actor_checkpoint(cli: Callable[..., Result], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, how: tuple[str, str]) -> None:
    """`--program-kind` offers every program kind, and OpenRLHF's (also `launch.backend
    openrlhf`'s) checkpoint is the tag `latest` names in `checkpoint.dir/_actor`."""
    from tests.launch.launchers.test_ray import saved
    from tests.translator.test_openrlhf import RECIPE

    monkeypatch.chdir(tmp_path)
    saved(tmp_path / "ck" / "_actor", 20, dp=8)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                      + "checkpoint: {dir: ck, resume: auto}\n")
    result = cli("checkpoint", "check", recipe, *how)
    assert result.code == 0, result
    assert result.out.startswith(f"checkpoint {tmp_path / 'ck' / '_actor' / 'global_step20'} (deepspeed, step 20, "
                                 "DP 8, ZeRO-3") and ": resumes as is:" in result.out
