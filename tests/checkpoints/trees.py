"""Checkpoint folders as the engines lay them out, file names and JSON only (the layout
reader opens nothing else), for the fast tests."""

from __future__ import annotations

import json
from pathlib import Path


def touch(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")
    return folder


def deepspeed(root: Path, step: int, *, dp: int = 2, stage: int = 2, latest: bool = True,
              skip_rank: int | None = None) -> Path:
    """`save_checkpoint(root, tag=global_stepN)` at DP `dp`: `latest` written last."""
    tag = root / f"global_step{step}"
    ranks = [r for r in range(dp) if r != skip_rank]
    touch(tag, *(f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in ranks))
    if stage == 3:
        touch(tag, *(f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in ranks))
    else:
        touch(tag, "mp_rank_00_model_states.pt")
    if latest:
        (root / "latest").write_text(tag.name)
    return tag


def hf(root: Path, step: int, *, world: int = 2, per_device: int = 2, state: bool = True) -> Path:
    folder = touch(root / f"checkpoint-{step}", "model.safetensors", "optimizer.pt", "scheduler.pt",
                   *(f"rng_state_{r}.pth" for r in range(world)))
    if state:
        (folder / "trainer_state.json").write_text(json.dumps(
            {"global_step": step, "train_batch_size": per_device, "save_steps": 2}))
    return folder


def dcp(root: Path, step: int, *, world: int = 2, metadata: bool = True) -> Path:
    folder = touch(root / f"step-{step}", *(f"__{r}_0.distcp" for r in range(world)))
    if metadata:
        touch(folder, ".metadata")
    return folder


def verl(root: Path, step: int, *, world: int = 2, tracker: bool = True) -> Path:
    actor = touch(root / f"global_step_{step}" / "actor",
                  *(f"{what}_world_size_{world}_rank_{r}.pt" for what in ("model", "optim", "extra_state")
                    for r in range(world)))
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor.parent


def accelerate(root: Path, step: int, *, world: int = 2, fsdp: bool = False, scheduler: bool = False) -> Path:
    """`save_state` at `world` processes; `fsdp`: under FSDP's sharded state dict, the model
    and the optimizer each a DCP folder (`pytorch_model_fsdp_0`, `optimizer_0`)."""
    folder = touch(root / f"checkpoint_{step}", *(f"random_states_{r}.pkl" for r in range(world)))
    if fsdp:
        dcp(folder, 0, world=world).rename(folder / "pytorch_model_fsdp_0")
        dcp(folder, 1, world=world).rename(folder / "optimizer_0")
    else:
        touch(folder, "model.safetensors", "optimizer.bin")
    if scheduler:
        touch(folder, "scheduler.bin")
    return folder
