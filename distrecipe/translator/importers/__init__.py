"""Native config (+ world size) → recipe document: the emitters run backwards.

One module per engine, each a function `to_recipe(data, context) -> Imported`, listed
in `IMPORTERS` by the kind `engines.native.detect` tells. They invert the engines'
mapping tables (`engines/deepspeed.py`, `accelerate.py`, `verl.py`, `hf.py`) that the
emitters write from, instead of restating them, so recipe → emit → import → resolve
gives the same Plan (a property test holds them to it). What a native config cannot
say (the model's size, the sequence length) is left out of the recipe; what a recipe
cannot hold is named in `notes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrecipe.engines.native import is_file, launched_path, referenced_path
from distrecipe.errors import DistrecipeError, Position
from distrecipe.keys import dotted
from distrecipe.schemas import shown
from distrecipe.source import Document, KeyPath


class NotImportable(DistrecipeError):
    """The native config cannot become a recipe (no world size, an unreadable companion)."""


@dataclass(frozen=True, slots=True)
class World:
    """Where the config runs: `nodes × gpus_per_node` ranks."""

    nodes: int
    gpus_per_node: int

    @classmethod
    def of(cls, world: int, nodes: int = 1) -> World:
        if nodes < 1 or world % nodes:
            raise NotImportable(f"--world {world} does not split over --nodes {nodes}")
        return cls(nodes, world // nodes)

    @property
    def size(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Context:
    """What an importer may use besides the data: the world, the file, its neighbours."""

    doc: Document
    world: World | None
    read: Callable[[Path], Document]
    """Reads a companion file (the ds_config an Accelerate or HF config names)."""
    via: str | None = None
    """The kind of config that named this file, when it is a companion."""
    launched: bool = False
    """References are opened from where the tool runs (the repository's root), not beside
    the file: Axolotl's and LLaMA-Factory's `deepspeed:` (`engines.native.launched_path`)."""

    def companion(self, ref: str, via: str, world: World, at: KeyPath) -> Context:
        """The context of the file this config names as `ref` (its ds_config) at key `at`.

        A name that is no regular file is reported at the reference, where the fix goes;
        a fault inside the file, at its own position there.
        """
        referrer = Path(self.doc.file)
        path = launched_path(referrer, ref) if self.launched else referenced_path(referrer, ref)
        if not is_file(path):
            where = " (opened from the repository's root, or where the command runs)" if self.launched else ""
            raise NotImportable(f"{dotted(at)} names {shown(ref)}, which is not a regular file{where}",
                                self.doc.where(at))
        return Context(doc=self.read(path), world=world, read=self.read, via=via)

    def need_world(self, what: str) -> World:
        if self.world is None:
            raise NotImportable(f"{what} does not say how many ranks it runs on: pass --world N "
                               "(and --nodes K)", Position(self.doc.file, 1, 1))
        return self.world


@dataclass
class Imported:
    """A recipe document, and what the native config said that the recipe does not carry."""

    recipe: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    companions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Engine → a companion file's data the import read (the ds_config a YAML names), or the
    part of the input another `native` section holds (a TRL config's own keys, `native.trl`),
    so its unmapped keys are carried too (`residue`)."""
    read: dict[str, Any] | None = None
    """The input's data as the importer read it, where that differs from the file's
    mapping (a launch script's `$VAR` values expanded): what the residue compares."""


def cluster(world: World) -> dict[str, int]:
    return {"nodes": world.nodes, "gpus_per_node": world.gpus_per_node}


def inverse(table: dict[str, str]) -> dict[str, str]:
    """An emitter's recipe → native table read backwards; the first recipe name wins a tie."""
    out: dict[str, str] = {}
    for ours, theirs in table.items():
        out.setdefault(theirs.lower(), ours)
    return out


def stage_strategy(stage: int) -> str:
    return "ddp" if stage == 0 else "zero"
