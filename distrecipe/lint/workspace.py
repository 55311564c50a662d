"""The files of one lint run: each read once, and what they say about each other.

Configs are rarely alone. A ds_config is used through an Accelerate YAML or a
TrainingArguments JSON beside it, which decides whether `"auto"` is filled or left to
raw DeepSpeed; the Accelerate YAML states the world size a ds_config lacks. So the
workspace caches every document it reads and, per directory, which siblings are
Accelerate or HF configs and which files they point at. Launch scripts tell more:
the world a ds_config runs at, and whether DeepSpeed reads it raw (`--deepspeed_config`)
or the Trainer does (`--deepspeed`); `register` reads them before any file is checked.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrecipe.engines import Kind
from distrecipe.engines.argv import LAUNCHER_WORDS, Launch, launch_of, launches
from distrecipe.engines.hf import FLAG_TYPES
from distrecipe.engines.native import DATA_SUFFIXES, detect, ds_reference, is_file, read, referenced_path
from distrecipe.engines.platforms import (
    PLATFORMS,
    PlatformKind,
    World,
    job_commands,
    job_world,
    platform_kind,
)
from distrecipe.keys import integer
from distrecipe.lint.config import Consumer, LintConfig
from distrecipe.lint.rule import Source
from distrecipe.source import Document, SourceError, read_text

if TYPE_CHECKING:
    from distrecipe.judges import Verdict

_SIBLING_HINTS = ("distributed_type", "per_device_train_batch_size", '"deepspeed"')
_JOB_HINTS = ("apiVersion", "num_nodes", "run:")
"""Text a YAML file must hold to be worth parsing as a platform's job file."""
"""Text that must occur in a file for it to be an Accelerate or HF sibling worth parsing."""


@dataclass(frozen=True, slots=True)
class Sibling:
    path: Path
    kind: Kind
    doc: Document

    def references(self) -> Path | None:
        """The ds_config this Accelerate or HF config points at (see `referenced_path`)."""
        ref = ds_reference(self.kind, self.doc.data)
        return referenced_path(self.path, ref) if ref else None


@dataclass(frozen=True, slots=True)
class Use:
    """Who reads a ds_config, and how lint knows (for messages)."""

    consumer: Consumer
    by: str
    world: int | None = None
    world_from: str | None = None
    """The ranks a launch script that names the file starts, when it says."""


_PRECEDENCE: tuple[Consumer, ...] = ("raw", "hf", "accelerate")
"""When several files use one ds_config: raw DeepSpeed is the strictest reader, and the
Trainer fills more than Accelerate alone."""


_FLAG: dict[Consumer, str] = {
    "raw": "deepspeed_config", "hf": "deepspeed", "accelerate": "deepspeed_config_file"}
"""The launch-command argument that names a ds_config for each consumer."""


class Workspace:
    """Reads, caches and relates the files of one lint run."""

    def __init__(self, world: int | None = None, world_from: str = "--world", *,
                 consumer: Consumer | None = None, config: LintConfig | None = None,
                 engines: bool = False) -> None:
        self.world = world
        self.world_from = world_from
        self.consumer = consumer
        self.config = config or LintConfig()
        self._uses: dict[str, list[Use]] = {}
        self._launches: dict[str, list[Launch]] = {}
        self._jobs: dict[str, tuple[PlatformKind, World] | None] = {}
        self._accelerate_launches: dict[str, list[tuple[str, bool]]] = {}
        self.engines = engines
        """Run the engines' own judges too (`lint --engines`: DR900, DR901)."""
        self.verdicts: dict[str, Verdict] = {}
        """Each file's engine verdict, judged once for both engine rules."""
        self._verl: Any = None
        self._documents: dict[str, Document] = {}
        self._siblings: dict[str, list[Sibling]] = {}
        self._texts: dict[str, str] = {}
        """Texts read while looking for siblings, parsed later only if linted."""

    def document(self, path: Path) -> Document:
        """The file's document, parsed once per run; `SourceError` when unusable."""
        key = os.path.abspath(path)
        if key not in self._documents:
            text = self._texts.pop(key, None)
            self._documents[key] = read(path, read_text(path) if text is None else text)
        return self._documents[key]

    def source(self, path: Path, kind: Kind | None = None) -> Source | None:
        """A `Source` for `path`, or None when it is not a config distrecipe knows."""
        doc = self.document(path)
        kind = kind or detect(doc)
        if kind is None:
            return None
        world, world_from = self._world(path, kind, doc)
        return Source(doc=doc, kind=kind, workspace=self, world=world, world_from=world_from)

    def companion(self, referrer: Path, ref: str) -> Source | None:
        """The ds_config `referrer` names as `ref`, or None when it cannot be found or read."""
        path = self.resolve(referrer, ref)
        try:
            return self.source(path, "deepspeed") if path is not None and is_file(path) else None
        except SourceError:
            return None

    def resolve(self, referrer: Path, ref: str, root: Path | None = None) -> Path | None:
        """The file `ref` names: beside `referrer`, else under `root` (the linted directory,
        where jobs are launched from), never outside it; else as `referenced_path` finds it."""
        for base in (referrer.parent, root):
            candidate = base / ref if base is not None else None
            if candidate is not None and candidate.is_file() and (
                    root is None or os.path.realpath(candidate).startswith(os.path.realpath(root) + os.sep)):
                return candidate
        found = referenced_path(referrer, ref)
        return found if root is None and found.is_file() else None

    def launches(self, path: Path) -> list[Launch]:
        """The launch commands of a shell script or a platform's job file (none for others)."""
        key = os.path.abspath(path)
        if key not in self._launches:
            found: list[Launch] = []
            if path.suffix.lower() == ".sh":
                try:
                    text = self._texts.setdefault(key, read_text(path))
                except (SourceError, OSError):
                    text = ""
                if any(word in text for word in LAUNCHER_WORDS):
                    found = launches(text, str(path))
            elif (job := self.job(path)) is not None:
                found = [launch for words in job_commands(job[0], self.document(path))
                         if (launch := launch_of(words)) is not None]
            self._launches[key] = found
        return self._launches[key]

    def job(self, path: Path) -> tuple[PlatformKind, World] | None:
        """A platform's job file (TrainJob, RayJob, PyTorchJob, SkyPilot task): its kind and world."""
        key = os.path.abspath(path)
        if key not in self._jobs:
            self._jobs[key] = None
            if path.suffix.lower() in (".yaml", ".yml"):
                try:
                    text = self._texts.get(key) or self._texts.setdefault(key, read_text(path))
                    if any(hint in text for hint in _JOB_HINTS):
                        data = self.document(path).data
                        kind = platform_kind(data)
                        self._jobs[key] = (kind, job_world(kind, data)) if kind is not None else None
                except (SourceError, OSError):
                    pass
        return self._jobs[key]

    def register(self, path: Path, root: Path) -> None:
        """Note which ds_configs a launch script names, how, and at which world."""
        for launch in self.launches(path):
            world, world_from = self._launch_world(launch, path, root)
            line = f"{path.name}:{launch.start.where.line}"
            if launch.launcher == "accelerate" and (file := launch.option("config_file")) and file.value:
                config = self.resolve(path, file.value, root)
                if config is not None:
                    passes = launch.option("num_processes") is not None
                    self._accelerate_launches.setdefault(os.path.realpath(config), []).append((line, passes))
            for consumer, name in _FLAG.items():  # the launcher's option, or the program's flag
                word = (launch.option(name) if consumer == "accelerate"
                        else launch.flags.get(name, (None, None))[1])
                ref = word.value if word is not None else None
                target = self.resolve(path, ref, root) if ref else None
                if target is not None:
                    use = Use(consumer, f"--{_FLAG[consumer]} in {line}", world,
                              world_from and f"{world_from} in {line}")
                    self._uses.setdefault(os.path.realpath(target), []).append(use)

    def _launch_world(self, launch: Launch, path: Path, root: Path | None) -> tuple[int | None, str | None]:
        """The launch's world, from its options or (accelerate) the config file it names."""
        world, world_from = launch.world()
        if world is None and (job := self.job(path)) is not None and job[1].ranks is not None:
            return job[1].ranks, job[1].said
        if world is None and launch.launcher == "accelerate" and (file := launch.option("config_file")):
            target = self.resolve(path, file.value, root) if file.value else None
            try:
                data = self.document(target).data if target is not None else None
            except SourceError:
                data = None
            if isinstance(data, dict) and (n := integer(data.get("num_processes"))):
                return n, f"num_processes in {target.name if target else ''}"
        return world, world_from or None

    def accelerate_launches(self, path: Path) -> list[tuple[str, bool]]:
        """The `accelerate launch --config_file` commands that name the Accelerate config
        at `path`: where each is (`script:line`), and whether it passes `--num_processes`."""
        return self._accelerate_launches.get(os.path.realpath(path), [])

    def use(self, path: Path) -> Use | None:
        """Who reads the ds_config at `path`: declared (flag, then `[tool.distrecipe]`
        ds_config), else inferred from the files that name it; None when unknown."""
        if self.consumer is not None:
            return Use(self.consumer, "--ds-config-consumer")
        relative = path
        if self.config.root is not None and self.config.ds_config:
            try:
                relative = path.resolve().relative_to(self.config.root.resolve())
            except ValueError:
                relative = path
        for glob, consumer in self.config.ds_config:
            if fnmatch.fnmatch(relative.as_posix(), glob) or fnmatch.fnmatch(path.name, glob):
                return Use(consumer, f"[tool.distrecipe] ds_config {glob!r}")
        found = list(self._uses.get(os.path.realpath(path), []))
        found += [Use(s.kind, f"{s.path.name}") for s in self.consumers(path)]  # type: ignore[arg-type]
        for consumer in _PRECEDENCE:
            for use in found:
                if use.consumer == consumer:
                    return use
        return None

    def siblings(self, directory: Path) -> list[Sibling]:
        """The Accelerate and HF configs in `directory`, sorted by name."""
        key = os.path.abspath(directory)
        if key not in self._siblings:
            found = []
            for path in sorted(directory.iterdir()) if directory.is_dir() else []:
                if path.suffix.lower() not in DATA_SUFFIXES or not path.is_file():
                    continue
                try:
                    text = self._texts.setdefault(os.path.abspath(path), read_text(path))
                    if not any(hint in text for hint in _SIBLING_HINTS):
                        continue
                    doc = self.document(path)
                except (SourceError, OSError):
                    continue
                kind = detect(doc)
                if kind in ("accelerate", "hf"):
                    found.append(Sibling(path, kind, doc))
            self._siblings[key] = found
        return self._siblings[key]

    def consumers(self, path: Path) -> list[Sibling]:
        """Siblings that use the ds_config at `path` (so it is not read by raw DeepSpeed)."""
        target = os.path.realpath(path)
        return [s for s in self.siblings(path.parent)
                if (ref := s.references()) and os.path.realpath(ref) == target]

    def _world(self, path: Path, kind: Kind, doc: Document) -> tuple[int | None, str | None]:
        data = doc.data
        if kind in PLATFORMS and isinstance(data, dict):
            job = job_world(kind, data)  # type: ignore[arg-type]  # kind is a PlatformKind here
            return job.ranks, job.said
        if kind == "accelerate" and (n := integer(data.get("num_processes"))):
            return n, "num_processes"
        trainer = data.get("trainer") if kind == "verl" else None
        if isinstance(trainer, dict) and (gpus := integer(trainer.get("n_gpus_per_node"))):
            nodes = integer(trainer.get("nnodes")) or 1
            return nodes * gpus, "trainer.nnodes × trainer.n_gpus_per_node"
        if self.world is not None:
            return self.world, self.world_from
        for launch in self.launches(path) if kind == "hf" else ():
            if any(name in FLAG_TYPES for name in launch.flags):  # the launch `script_arguments` read
                world, world_from = self._launch_world(launch, path, None)
                if world is not None:
                    return world, world_from
                break
        if kind == "deepspeed":
            for use in self._uses.get(os.path.realpath(path), []):
                if use.world is not None:
                    return use.world, use.world_from
        for sibling in self.siblings(path.parent):
            if sibling.kind == "accelerate" and (n := integer(sibling.doc.data.get("num_processes"))):
                return n, f"num_processes in {sibling.path.name}"
        return None, None

    def verl_verdict(self, path: Path, text: str) -> Verdict:
        """verl's verdict on override lines; one verl judge (≈ 8 s to start) per run."""
        from distrecipe.judges import verl

        if self._verl is None:
            self._verl = verl.VerlJudge()
        verdict: Verdict = verl.judge_script(self._verl, text)
        return verdict

    def close(self) -> None:
        """Release what the judges hold (verl's Hydra context)."""
        if self._verl is not None:
            self._verl.close()
            self._verl = None
