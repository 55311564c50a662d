"""The files of one lint run: each read once, and what they say about each other.

Configs are rarely alone. A ds_config is used through an Accelerate YAML or a
TrainingArguments JSON beside it, which decides whether `"auto"` is filled or left to
raw DeepSpeed; the Accelerate YAML states the world size a ds_config lacks. So the
workspace caches every document it reads and, per directory, which siblings are
Accelerate or HF configs and which files they point at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrecipe.engines import Kind
from distrecipe.engines.native import DATA_SUFFIXES, detect, ds_reference, read, referenced_path
from distrecipe.keys import integer
from distrecipe.lint.rule import Source
from distrecipe.source import Document, SourceError, read_text

if TYPE_CHECKING:
    from distrecipe.judges import Verdict

_SIBLING_HINTS = ("distributed_type", "per_device_train_batch_size", '"deepspeed"')
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


class Workspace:
    """Reads, caches and relates the files of one lint run."""

    def __init__(self, world: int | None = None, world_from: str = "--world", *,
                 engines: bool = False) -> None:
        self.world = world
        self.world_from = world_from
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
        path = referenced_path(referrer, ref)
        try:
            return self.source(path, "deepspeed") if path.is_file() else None
        except SourceError:
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
        if kind == "accelerate" and (n := integer(data.get("num_processes"))):
            return n, "num_processes"
        trainer = data.get("trainer") if kind == "verl" else None
        if isinstance(trainer, dict) and (gpus := integer(trainer.get("n_gpus_per_node"))):
            nodes = integer(trainer.get("nnodes")) or 1
            return nodes * gpus, "trainer.nnodes × trainer.n_gpus_per_node"
        if self.world is not None:
            return self.world, self.world_from
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
