"""A checkpoint's layout, read from the engine's own files without torch.

Each engine writes a marker last, and a checkpoint without it is partial (a save that was
killed, or one still being written): it is never chosen. The markers, from the engines'
save code:

* DeepSpeed (`runtime/engine.py` `save_checkpoint`): every rank writes its
  `{bf16_}zero_pp_rank_{dp}_mp_rank_{tp:02d}_optim_states.pt` (and, at ZeRO-3, its
  `zero_pp_rank_{dp}_mp_rank_{tp:02d}_model_states.pt`; below, DP rank 0's
  `mp_rank_{tp:02d}_model_states.pt`), and rank 0 writes the tag into `latest` as soon as
  its own files are written: the barrier comes after. So `latest` does not prove the
  other ranks finished (the fault test kills one and sees `latest` name its tag): a tag
  is complete when every rank's shard is there, and a tag newer than `latest` never is.
  The file names give the DP and TP worlds seen and whether the stage is 3; a missing
  highest rank, and ZeRO-1 against ZeRO-2, need what the model states store
  (`dp_world_size`, `zero_stage`: torch, `inspect`), so `lint` cannot see the former.
  `ds_to_universal` output is a `zero/` folder beside the model states, named by
  `latest_universal`.
* torch distributed checkpoint (`torch.distributed.checkpoint`, FSDP2's and Accelerate's
  sharded state): the coordinator writes `.metadata` after every rank's `__{rank}_{n}.distcp`.
  `.metadata` is a pickle, so it is not opened here: the writer ranks come from the names.
* HF Trainer (`Trainer._save_checkpoint`): `checkpoint-N/trainer_state.json` is written
  after the model, optimizer and `rng_state_{rank}.pth` files; it holds the step and the
  per-device batch.
* Accelerate (`checkpointing.save_accelerator_state`): each process writes its
  `random_states_{i}.pkl` after the model (`model.safetensors`, `pytorch_model.bin`, FSDP's
  `pytorch_model_fsdp.bin` or sharded `pytorch_model_fsdp_0` folder, or a DeepSpeed
  `pytorch_model` folder) and optimizer (`optimizer.bin`; sharded FSDP: an `optimizer_0` folder).
* verl (`RayPPOTrainer._save_checkpoint`): after every rank's
  `global_step_N/actor/{model,optim,extra_state}_world_size_{W}_rank_{r}.pt`, the driver
  writes N into `latest_checkpointed_iteration.txt` in `trainer.default_local_dir`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from distrecipe.errors import DistrecipeError

Kind = Literal["deepspeed", "deepspeed-universal", "dcp", "hf", "accelerate", "verl"]

DS_LATEST, DS_LATEST_UNIVERSAL = "latest", "latest_universal"
DCP_METADATA = ".metadata"
HF_STATE = "trainer_state.json"
VERL_TRACKER = "latest_checkpointed_iteration.txt"
DS_OPTIM = re.compile(r"^(bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_?optim_states\.pt$")
DS_Z3_MODEL = re.compile(r"^zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$")
DS_MODEL = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
DS_LAYER = re.compile(r"^layer_(\d+)-model_(\d+)-model_states\.pt$")
DCP_SHARD = re.compile(r"^__(\d+)_(\d+)\.distcp$")
HF_RNG = re.compile(r"^rng_state(?:_(\d+))?\.pth$")
ACCELERATE_RNG = re.compile(r"^random_states_(\d+)\.pkl$")
VERL_SHARD = re.compile(r"^(model|optim|extra_state)_world_size_(\d+)_rank_(\d+)\.pt$")
STEP = re.compile(r"(?:global_step|checkpoint|step)[-_]?(\d+)(?:_(?:universal|dcp|fp32))?$")
ACCELERATE_MODELS = ("model.safetensors", "pytorch_model.bin", "pytorch_model_fsdp.bin",
                     "pytorch_model_fsdp_0", "pytorch_model")
"""`save_state`'s model: safetensors or torch (`save_accelerator_state`), FSDP's full state dict
(`FSDP_MODEL_NAME.bin`, Accelerate's default `state_dict_type`), FSDP's sharded one (a DCP
folder beside the optimizer's DCP folder `optimizer_0`), DeepSpeed's save dir."""
CONVERTED = "distrecipe-convert.json"
"""What `distrecipe checkpoint convert` records in the folder it wrote."""


class CheckpointError(DistrecipeError):
    """A checkpoint that is missing, not one, partial, or that this job cannot load."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """What a checkpoint folder holds, as far as its file names and JSON say."""

    kind: Kind
    path: Path
    """The checkpoint itself: a DeepSpeed tag folder, `checkpoint-N`, a DCP folder, ..."""
    step: int | None
    complete: bool
    partial: str = ""
    """Why it is not complete: the marker or the rank files that are missing."""
    dp: int | None = None
    """DeepSpeed: the data-parallel world that saved the optimizer shards."""
    tp: int | None = None
    """DeepSpeed: the model-parallel (tensor) ranks (`mp_rank_NN`)."""
    pp: int = 1
    """DeepSpeed pipeline stages (`layer_*-model_NN` files); 1 without a pipeline."""
    stage: int | None = None
    """DeepSpeed ZeRO stage: 3 from the file names; None where only torch can tell 1 from 2."""
    world: int | None = None
    """The ranks that wrote it (HF rng files, Accelerate random states, verl, DCP shards)."""
    per_device_batch: int | None = None
    """HF Trainer: `train_batch_size` in `trainer_state.json` (per device)."""
    save_steps: int | None = None
    accumulation: int | None = None
    """HF Trainer: `gradient_accumulation_steps` of the pickled `training_args.bin` (torch)."""
    global_batch: int | None = None
    """DeepSpeed: `train_batch_size` of the ds_config stored in the model states (torch)."""
    version: str | None = None
    """DeepSpeed: the `ds_version` stored in the model states (torch)."""
    inner: Layout | None = None
    """The engine checkpoint an HF or Accelerate checkpoint holds (a DeepSpeed tag, a DCP folder)."""
    files: tuple[str, ...] = field(default=(), repr=False)

    def describe(self, *, whole: bool = True) -> str:
        """One line: kind, step, worlds, and (`whole`) completeness."""
        parts = [self.kind, f"step {self.step}" if self.step is not None else "step unknown"]
        if self.dp is not None:
            parts.append(f"DP {self.dp}")
        if self.tp is not None and self.tp > 1:
            parts.append(f"TP {self.tp}")
        if self.pp > 1:
            parts.append(f"PP {self.pp}")
        if self.kind == "deepspeed":
            parts.append("ZeRO-3" if self.stage == 3 else f"ZeRO-{self.stage}" if self.stage else "ZeRO-1/2")
        if self.world is not None:
            parts.append(f"saved by {self.world} ranks")
        if self.per_device_batch is not None:
            parts.append(f"per-device batch {self.per_device_batch}")
        if self.accumulation is not None:
            parts.append(f"accumulation {self.accumulation}")
        if self.global_batch is not None:
            parts.append(f"global batch {self.global_batch}")
        if self.version is not None:
            parts.append(f"DeepSpeed {self.version}")
        if self.inner is not None:
            parts.append(f"holding {self.inner.describe(whole=False)}")
        if whole:
            parts.append("complete" if self.complete else f"partial: {self.partial}")
        return ", ".join(parts)


def step_of(path: Path) -> int | None:
    """The step a folder's name says (`global_step40`, `checkpoint-40`, `step_40`)."""
    found = STEP.search(path.name)
    return int(found.group(1)) if found else None


def _names(path: Path) -> tuple[str, ...]:
    return tuple(sorted(entry.name for entry in path.iterdir()))


def _read_line(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _count(ranks: set[int]) -> tuple[int, str]:
    """The world a set of rank numbers implies, and which are missing below its top."""
    world = max(ranks) + 1
    missing = sorted(set(range(world)) - ranks)
    return world, ", ".join(map(str, missing))


def deepspeed_tag(path: Path, *, marked: bool | None, step: int | None = None,
                  newest: int | None = None) -> Layout | None:
    """A DeepSpeed tag folder, or None if it holds no DeepSpeed state. `marked`: whether the
    save dir's `latest` names it (None: the folder was given alone, with no save dir);
    `newest`: the step of the tag `latest` names. A tag `latest` has moved past was
    complete when it moved (a tag older than `latest` with every rank's files is complete);
    one newer than it, or beside an unreadable `latest`, is a save that did not finish."""
    names = _names(path)
    optim: dict[int, set[int]] = {}
    for name in names:
        if found := DS_OPTIM.match(name):
            optim.setdefault(int(found.group(3)), set()).add(int(found.group(2)))
    z3 = {(int(m.group(2)), int(m.group(1))) for name in names if (m := DS_Z3_MODEL.match(name))}
    models = {int(m.group(1)) for name in names if (m := DS_MODEL.match(name))}
    layers = {int(m.group(1)) for name in names if (m := DS_LAYER.match(name))}
    universal = "zero" in names and (path / "zero").is_dir()
    if not (optim or z3 or models):
        return None
    kind: Kind = "deepspeed-universal" if universal else "deepspeed"
    stage = 3 if z3 else None
    tp = max([*optim, *models, *(mp for mp, _ in z3)]) + 1
    missing: list[str] = []
    dp = None
    if optim:
        dp = max(max(ranks) for ranks in optim.values()) + 1
        for mp in range(tp):
            lacking = sorted(set(range(dp)) - optim.get(mp, set()))
            if lacking:
                missing.append(f"optimizer shards of DP ranks {', '.join(map(str, lacking))} (TP rank {mp})")
    elif not universal:
        missing.append("every optimizer shard (*_optim_states.pt)")
    if stage == 3 and dp is not None:
        pairs = sorted({(mp, r) for mp in range(tp) for r in range(dp)} - z3)
        if pairs:
            missing.append("ZeRO-3 model states of DP ranks " + ", ".join(str(r) for _, r in pairs))
    elif stage is None:
        lacking_models = sorted(set(range(tp)) - models)
        if lacking_models:
            missing.append("model states of TP ranks " + ", ".join(map(str, lacking_models)))
    own = step if step is not None else step_of(path)
    if marked is False and not universal and (newest is None or own is None or own > newest):
        missing.insert(0, "newer than the tag `latest` names (DeepSpeed writes `latest` after every rank "
                          "has saved, so this save did not finish)")
    return Layout(kind=kind, path=path, step=step if step is not None else step_of(path),
                  complete=not missing, partial="; ".join(missing), dp=dp, tp=tp,
                  pp=max(layers) + 1 if layers else 1, stage=stage, files=names)


def dcp_folder(path: Path) -> Layout | None:
    names = _names(path)
    ranks = {int(m.group(1)) for name in names if (m := DCP_SHARD.match(name))}
    if not ranks and DCP_METADATA not in names:
        return None
    world = _count(ranks)[0] if ranks else None
    missing = "" if DCP_METADATA in names else "no .metadata (torch writes it after every rank's shards)"
    return Layout(kind="dcp", path=path, step=step_of(path), complete=not missing, partial=missing,
                  world=world, files=names)


def hf_checkpoint(path: Path) -> Layout | None:
    names = _names(path)
    rngs = {int(m.group(1) or 0) for name in names if (m := HF_RNG.match(name))}
    engine_files = {"model.safetensors", "pytorch_model.bin", "optimizer.pt", "scheduler.pt",
                    "training_args.bin"}
    if HF_STATE not in names and not (rngs or engine_files & set(names)):
        return None
    if not path.name.startswith("checkpoint-") and HF_STATE not in names:
        return None
    state = _json(path / HF_STATE) if HF_STATE in names else None
    step = state.get("global_step") if isinstance(state, dict) else None
    batch = state.get("train_batch_size") if isinstance(state, dict) else None
    save = state.get("save_steps") if isinstance(state, dict) else None
    missing = "" if isinstance(state, dict) else (
        "no trainer_state.json (the Trainer writes it last)" if state is None
        else "trainer_state.json is not a JSON object")
    inner = _deepspeed_root(path)
    if inner is not None and not inner.complete and not missing:
        missing = f"its DeepSpeed state is partial: {inner.partial}"
    return Layout(kind="hf", path=path, step=step if isinstance(step, int) else step_of(path),
                  complete=not missing, partial=missing, world=(max(rngs) + 1) if rngs else None,
                  per_device_batch=batch if isinstance(batch, int) else None,
                  save_steps=save if isinstance(save, int) else None, inner=inner, files=names)


def accelerate_folder(path: Path) -> Layout | None:
    names = _names(path)
    rngs = {int(m.group(1)) for name in names if (m := ACCELERATE_RNG.match(name))}
    models = [name for name in ACCELERATE_MODELS if name in names]
    if not rngs and not (models and "optimizer.bin" in names):
        return None
    missing: list[str] = []
    if not models:
        missing.append("no model (" + ", ".join(ACCELERATE_MODELS) + ")")
    world = None
    if rngs:
        world, lacking = _count(rngs)
        if lacking:
            missing.append(f"random states of processes {lacking}")
    else:
        missing.append("no random_states_N.pkl (each process writes its own last)")
    inner = None
    if "pytorch_model_fsdp_0" in names and (path / "pytorch_model_fsdp_0").is_dir():
        inner = dcp_folder(path / "pytorch_model_fsdp_0")
        optimizer = dcp_folder(path / "optimizer_0") if (path / "optimizer_0").is_dir() else None
        if optimizer is None:
            missing.append("no optimizer_0 (the FSDP optimizer's sharded state)")
        elif not optimizer.complete:
            missing.append(f"its FSDP optimizer state is partial: {optimizer.partial}")
    elif "pytorch_model" in names and (path / "pytorch_model").is_dir():
        inner = _deepspeed_root(path / "pytorch_model")
    if inner is not None and not inner.complete:
        missing.append(f"its engine state is partial: {inner.partial}")
    return Layout(kind="accelerate", path=path, step=step_of(path), complete=not missing,
                  partial="; ".join(missing), world=world, inner=inner, files=names)


def verl_step(path: Path, *, marked: bool | None) -> Layout | None:
    actor = path / "actor"
    if not actor.is_dir():
        return None
    names = _names(actor)
    shards: dict[str, set[int]] = {}
    worlds = set()
    for name in names:
        if found := VERL_SHARD.match(name):
            shards.setdefault(found.group(1), set()).add(int(found.group(3)))
            worlds.add(int(found.group(2)))
    if not shards:
        return None
    world = max(worlds)
    missing = []
    for what in ("model", "optim", "extra_state"):
        lacking = sorted(set(range(world)) - shards.get(what, set()))
        if lacking:
            missing.append(f"{what} shards of ranks {', '.join(map(str, lacking))}")
    if marked is False:
        missing.insert(0, f"not named by {VERL_TRACKER} (verl writes it after every rank has saved)")
    return Layout(kind="verl", path=path, step=step_of(path), complete=not missing,
                  partial="; ".join(missing), world=world, files=names)


def _deepspeed_root(path: Path) -> Layout | None:
    """The tag a DeepSpeed save dir's `latest` names, or the one `latest_universal` names
    (`ds_to_universal`'s output) where that is at least as new; else None."""
    found: list[Layout] = []
    for marker in (DS_LATEST_UNIVERSAL, DS_LATEST):
        tag = _read_line(path / marker)
        if tag is None:
            continue
        if tag and (path / tag).is_dir():
            layout = deepspeed_tag(path / tag, marked=True)
            if layout is not None:
                found.append(layout)
                continue
        found.append(Layout(kind="deepspeed", path=path / (tag or "?"), step=step_of(Path(tag or "?")),
                            complete=False, partial=f"`{marker}` names {tag!r}, which holds no DeepSpeed "
                                                    "checkpoint here"))
    if not found:
        return None
    return max(found, key=lambda item: (item.step if item.step is not None else -1,
                                        item.kind == "deepspeed-universal"))


def _json(path: Path) -> object:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    return data


def read(path: Path) -> Layout:
    """The checkpoint at `path`: a checkpoint folder itself, or a save dir whose engine
    marker names one (DeepSpeed's `latest`, verl's tracker). Raises `CheckpointError` for a
    path that does not exist or holds no checkpoint any engine wrote."""
    try:
        if not path.exists():
            raise CheckpointError(f"checkpoint {path} does not exist")
        if not path.is_dir():
            raise CheckpointError(f"checkpoint {path} is a file, not a checkpoint folder")
        found = _read(path)
    except (OSError, ValueError) as exc:  # a name too long, a NUL in it, a folder not readable
        raise CheckpointError(f"checkpoint {path!r} cannot be read: {_reason(exc)}") from None
    if found is None:
        raise CheckpointError(f"{path} is not a checkpoint: no DeepSpeed, torch distributed, HF Trainer, "
                              "Accelerate or verl checkpoint files in it")
    return found


def _read(path: Path) -> Layout | None:
    trainer = hf_checkpoint(path)  # before DeepSpeed's `latest`: the Trainer saves one inside
    if trainer is not None:
        return trainer
    root = _deepspeed_root(path)
    if root is not None:
        return root
    tracker = _read_line(path / VERL_TRACKER)
    if tracker is not None and tracker.isdigit() and (path / f"global_step_{tracker}").is_dir():
        return verl_step(path / f"global_step_{tracker}", marked=True)
    marked, newest = None, None
    parent = path.parent
    if (parent / DS_LATEST).is_file():
        named = _read_line(parent / DS_LATEST) or ""
        marked, newest = named == path.name, step_of(Path(named))
    for reader in (accelerate_folder, dcp_folder):
        found = reader(path)
        if found is not None:
            return found
    tag = deepspeed_tag(path, marked=marked, newest=newest)
    if tag is not None:
        return tag
    verl_marked = None
    if (parent / VERL_TRACKER).is_file():
        verl_marked = _read_line(parent / VERL_TRACKER) == str(step_of(path))
    return verl_step(path, marked=verl_marked)


def _reason(exc: OSError | ValueError) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def candidates(root: Path) -> list[Layout]:
    """Every checkpoint directly in `root` (a save dir), oldest step first, partial ones
    included (so a listing can say why each is not chosen)."""
    try:
        return _candidates(root)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint directory {str(root)!r} cannot be read: {_reason(exc)}") from None


def _candidates(root: Path) -> list[Layout]:
    if not root.is_dir():
        return []
    ds_latest = _read_line(root / DS_LATEST)
    verl_latest = _read_line(root / VERL_TRACKER)
    found: list[Layout] = []
    for entry in sorted(root.iterdir()):
        if not entry.is_dir():
            continue
        newest = step_of(Path(ds_latest)) if ds_latest else None
        layout = (deepspeed_tag(entry, marked=ds_latest == entry.name if ds_latest is not None else False,
                                newest=newest)
                  if any(DS_OPTIM.match(n) or DS_MODEL.match(n) for n in _names(entry)) else None)
        if layout is None and (entry / "actor").is_dir():
            layout = verl_step(entry, marked=verl_latest == str(step_of(entry)) if verl_latest else False)
        if layout is None:
            layout = hf_checkpoint(entry) or accelerate_folder(entry) or dcp_folder(entry)
        if layout is not None:
            found.append(layout)
    return sorted(found, key=lambda item: (item.step if item.step is not None else -1, item.path.name))


def latest_complete(root: Path, refine: Callable[[Layout], Layout] | None = None) -> Layout | None:
    """The newest complete checkpoint in `root` (`checkpoint.resume: auto`), or None: the
    highest step whose marker and rank files are all there (`candidates`), each checked
    further by `refine` when given (`inspect.deepen`: the ranks the engine stored), a
    universal conversion preferred at its step."""
    found = sorted(candidates(root), key=lambda item: (item.step if item.step is not None else -1,
                                                         item.kind == "deepspeed-universal"))
    for layout in reversed(found):
        checked = refine(layout) if refine is not None and layout.complete else layout
        if checked.complete:
            return checked
    return None


def prune(root: Path, keep: int, saved: Path) -> list[Path]:
    """Delete the oldest complete checkpoints in `root` beyond the `keep` newest, once
    `saved` (the one just written) is complete: `checkpoint.keep` for scripts whose engine
    has no `save_total_limit` of its own. Returns what was deleted, oldest first.

    Only complete checkpoints of `saved`'s kind at or below its step count and go (a
    `ds_to_universal` copy or another engine's folder is the user's; a newer one is left
    from an earlier, longer run, and a DeepSpeed tag missing its highest rank looks
    complete by its names). `saved` itself and partial ones (a save killed, or another
    still being written) are never deleted. Nothing is deleted when `saved` is partial.
    """
    import shutil

    found = candidates(root)
    current = next((item for item in found if item.path.resolve() == saved.resolve()), None)
    if current is None or not current.complete:
        return []
    limit = current.step if current.step is not None else -1
    complete = [item for item in found if item.kind == current.kind and item.complete
                and (item.step if item.step is not None else -1) <= limit]
    newest_first = sorted(complete, key=lambda item: (item.step if item.step is not None else -1,
                                                      item.path.name), reverse=True)
    kept = {item.path for item in newest_first[:keep]} | {current.path}
    gone = [item.path for item in reversed(newest_first) if item.path not in kept]
    for path in gone:
        shutil.rmtree(path)
    return gone
