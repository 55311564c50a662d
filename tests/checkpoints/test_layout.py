"""The layout reader: kinds, worlds and completeness from the engines' file names and JSON."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.checkpoints.layout import CheckpointError, candidates, latest_complete, prune, read
from distrecipe.launch.resume import CHECKPOINT_DIR_ENV, KEEP_ENV
from tests.checkpoints import trees


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_worlds_and_stage_from_the_file_names(tmp_path: Path, stage: int) -> None:
    tag = trees.deepspeed(tmp_path, 4, dp=4, stage=stage)
    layout = read(tmp_path)
    assert (layout.kind, layout.path, layout.step, layout.dp, layout.tp, layout.complete) == (
        "deepspeed", tag, 4, 4, 1, True)
    assert layout.stage == (3 if stage == 3 else None)  # ZeRO-1 vs 2 only torch can tell


def test_a_tag_latest_does_not_name_and_newer_is_partial_and_never_chosen(tmp_path: Path) -> None:
    """A rank killed mid-save: its shard is missing and `latest` still names the previous tag."""
    trees.deepspeed(tmp_path, 3, dp=3)
    trees.deepspeed(tmp_path, 6, dp=3, latest=False, skip_rank=1)
    (tmp_path / "latest").write_text("global_step3")
    by_step = {layout.step: layout for layout in candidates(tmp_path)}
    assert by_step[3].complete and not by_step[6].complete
    assert "newer than the tag `latest` names" in by_step[6].partial
    assert "optimizer shards of DP ranks 1" in by_step[6].partial
    chosen = latest_complete(tmp_path)
    assert chosen is not None and chosen.step == 3


def test_an_older_tag_with_every_rank_is_complete(tmp_path: Path) -> None:
    trees.deepspeed(tmp_path, 3)
    trees.deepspeed(tmp_path, 6)
    layout = read(tmp_path / "global_step3")
    assert layout.complete and layout.step == 3


@pytest.mark.parametrize(("build", "kind", "world"), [
    (lambda root: trees.hf(root, 8, world=4), "hf", 4),
    (lambda root: trees.dcp(root, 8, world=3), "dcp", 3),
    (lambda root: trees.verl(root, 8, world=2).parent, "verl", 2),
    (lambda root: trees.accelerate(root, 8, world=2), "accelerate", 2),
])
def test_each_engine_is_read_complete(tmp_path: Path, build: object, kind: str, world: int) -> None:
    assert callable(build)
    layout = read(build(tmp_path))
    assert (layout.kind, layout.step, layout.world, layout.complete) == (kind, 8, world, True)


@pytest.mark.parametrize(("build", "why"), [
    (lambda root: trees.hf(root, 8, state=False), "no trainer_state.json"),
    (lambda root: trees.dcp(root, 8, metadata=False), "no .metadata"),
    (lambda root: trees.deepspeed(root, 8, latest=False, skip_rank=0), "optimizer shards of DP ranks 0"),
])
def test_a_missing_marker_is_partial(tmp_path: Path, build: object, why: str) -> None:
    assert callable(build)
    layout = read(build(tmp_path))
    assert not layout.complete and why in layout.partial


def test_verl_tracker_names_the_step(tmp_path: Path) -> None:
    trees.verl(tmp_path, 4)
    trees.verl(tmp_path, 8, tracker=False)
    chosen = latest_complete(tmp_path)
    assert chosen is not None and chosen.step == 4


def test_hf_holds_the_per_device_batch_and_a_deepspeed_state(tmp_path: Path) -> None:
    folder = trees.hf(tmp_path, 6, per_device=3)
    trees.deepspeed(folder, 6, dp=2)
    layout = read(folder)
    assert layout.per_device_batch == 3 and layout.inner is not None and layout.inner.dp == 2


def test_accelerate_fsdp_holds_a_dcp_folder(tmp_path: Path) -> None:
    layout = read(trees.accelerate(tmp_path, 2, fsdp=True))
    assert layout.inner is not None and layout.inner.kind == "dcp" and layout.complete


def test_accelerate_fsdp_needs_its_optimizer_folder_whole(tmp_path: Path) -> None:
    """Sharded FSDP `save_state` writes the optimizer's own DCP folder after the model's."""
    folder = trees.accelerate(tmp_path, 2, fsdp=True)
    (folder / "optimizer_0" / ".metadata").unlink()
    layout = read(folder)
    assert not layout.complete and "its FSDP optimizer state is partial: no .metadata" in layout.partial
    shutil.rmtree(folder / "optimizer_0")
    assert "no optimizer_0" in read(folder).partial


def test_accelerate_fsdp_full_state_dict_is_a_model(tmp_path: Path) -> None:
    """Accelerate's default FSDP `state_dict_type` (FULL_STATE_DICT) saves the model as
    `pytorch_model_fsdp.bin` (`FSDP_MODEL_NAME`) beside `optimizer.bin`."""
    folder = trees.touch(tmp_path / "checkpoint_2", "pytorch_model_fsdp.bin", "optimizer.bin",
                         "random_states_0.pkl", "random_states_1.pkl")
    layout = read(folder)
    assert (layout.kind, layout.world, layout.complete, layout.inner) == ("accelerate", 2, True, None)


@pytest.mark.parametrize(("make", "said"), [
    (lambda root: root / "nowhere", "does not exist"),
    (lambda root: trees.touch(root / "empty", "notes.txt"), "is not a checkpoint"),
    (lambda root: trees.touch(root, "file.pt") / "file.pt", "is a file"),
])
def test_bad_paths_are_refused(tmp_path: Path, make: object, said: str) -> None:
    assert callable(make)
    with pytest.raises(CheckpointError, match=said):
        read(make(tmp_path))


def test_prune_keeps_the_newest_complete_of_the_saved_kind(tmp_path: Path) -> None:
    """`checkpoint.keep` 2 after step 3 is saved: step 1 goes; the partial step 4 (another
    save under way or killed), the Trainer's folder and a universal copy are not counted."""
    for step in (1, 2, 3):
        trees.dcp(tmp_path, step)
    partial = trees.dcp(tmp_path, 4, metadata=False)
    other = trees.hf(tmp_path, 1)
    assert prune(tmp_path, 2, tmp_path / "step-3") == [tmp_path / "step-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1", "step-2", "step-3", "step-4"]
    assert partial.is_dir() and other.is_dir()
    assert prune(tmp_path, 1, tmp_path / "step-3") == [tmp_path / "step-2"]


def test_prune_never_deletes_the_saved_one_nor_after_a_partial_save(tmp_path: Path) -> None:
    trees.deepspeed(tmp_path, 3)
    trees.deepspeed(tmp_path, 6)
    trees.deepspeed(tmp_path, 9, skip_rank=0)  # rank 0 lost mid-save; `latest` names it
    assert prune(tmp_path, 1, tmp_path / "global_step9") == []
    assert prune(tmp_path, 1, tmp_path / "global_step3") == []  # the saved one stays, the newer too
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["global_step3", "global_step6", "global_step9",
                                                            "latest"]


def test_api_prunes_as_the_launch_environment_says(tmp_path: Path) -> None:
    for step in (1, 2):
        trees.dcp(tmp_path, step)
    env = {CHECKPOINT_DIR_ENV: str(tmp_path)}
    assert api.prune_checkpoints(tmp_path / "step-2", env) == []  # no checkpoint.keep: all kept
    assert api.prune_checkpoints(tmp_path / "step-2", {**env, KEEP_ENV: "1"}) == [tmp_path / "step-1"]
    assert not (tmp_path / "step-1").exists()
