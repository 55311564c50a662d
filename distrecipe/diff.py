"""Two configs → what changed in meaning, and what it costs per GPU.

Either side may be a recipe or any native config lint reads (mixed kinds allowed:
a ds_config against the recipe it came from). Both are resolved to Plans and
compared field by field in the recipe's vocabulary, so a reordered or reformatted
file shows no change and `train_batch_size 256 → 512` reads as `batch.global`.
When the model size is known, the change's impact comes from `distrecipe plan`: the
seed's per-GPU model state and traffic per step (formula view) and the engine view's
peak against the GPU's memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrecipe.api import plan_of_document
from distrecipe.errors import DistrecipeError, Position
from distrecipe.keys import get
from distrecipe.recipe import Plan, plan_values
from distrecipe.source import Document
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native

IGNORED = frozenset({"name"})
"""Keys whose change means nothing to the job."""


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Impact:
    """Per-GPU figures before and after, in bytes (traffic: the engine's view, as `plan`
    prices it); `step` in seconds, None where the GPU is unknown."""

    label: tuple[str, str]
    memory: tuple[float, float]
    traffic: tuple[float, float]
    peak: tuple[float, float]
    fits: tuple[bool | None, bool | None]
    step: tuple[float | None, float | None]


@dataclass(frozen=True, slots=True)
class Diff:
    old: Plan
    new: Plan
    changes: list[Change]
    impact: Impact | None
    borrowed: list[str]
    """Notes on what a native side did not state and took from the other side."""


UNSTATED = (("model", "params"), ("model", "hidden_size"), ("model", "layers"), ("model", "heads"),
            ("model", "kv_heads"), ("model", "intermediate_size"), ("model", "vocab"),
            ("batch", "seq_len"), ("cluster", "gpu_memory"), ("cluster", "gpu"))
"""What no native config states; a native side takes it from the other side."""


@dataclass(frozen=True, slots=True)
class Side:
    path: str
    doc: Document
    native: bool


def read_side(path: str, *, world: int | None, nodes: int = 1) -> Side:
    """A recipe as written, or a native config imported into a recipe document."""
    kind, doc = read_native(path)
    if kind == "recipe":
        return Side(path, doc, native=False)
    imported = import_document(kind, doc, World.of(world, nodes) if world is not None else None)
    data = {"name": Path(path).stem, **imported.recipe}
    return Side(path, Document(data, f"{path} (imported)"), native=True)


def _borrow(side: Side, other: Side, notes: list[str]) -> Document:
    """The native side, completed with what only the other side states (model, sequence length)."""
    if not side.native or not isinstance(other.doc.data, dict):
        return side.doc
    data = dict(side.doc.data)
    taken = []
    for section, key in UNSTATED:
        value = get(other.doc.data, section, key)
        if value is None or key in (data.get(section) or {}):
            continue
        data[section] = {**(data.get(section) or {}), key: value}
        taken.append(f"{section}.{key}")
    if taken:
        notes.append(f"{side.path} does not state {', '.join(taken)}: taken from {other.path}")
    return Document(data, side.doc.file)


def plan_of(doc: Document, base: str, *, world: int | None, overrides: Sequence[str]) -> Plan:
    """Resolve one side; a native side's own world is in its cluster already."""
    try:
        return plan_of_document(doc, Path(base).parent, world=world, overrides=overrides)
    except DistrecipeError as exc:
        raise DistrecipeError(exc.message, exc.where or Position(base, 1, 1)) from None


def diff_paths(old: str, new: str, *, world: int | None, nodes: int = 1,
               overrides: Sequence[str] = ()) -> Diff:
    """Read, import, complete and resolve both sides, then compare them."""
    a, b = read_side(old, world=world, nodes=nodes), read_side(new, world=world, nodes=nodes)
    notes: list[str] = []
    plans = [plan_of(_borrow(x, y, notes), x.path, world=world, overrides=overrides)
             for x, y in ((a, b), (b, a))]
    return diff(plans[0], plans[1], notes)


def diff(old: Plan, new: Plan, borrowed: Sequence[str] = ()) -> Diff:
    before, after = plan_values(old), plan_values(new)
    changes = [Change(key, before.get(key), after.get(key)) for key in dict.fromkeys([*before, *after])
               if key not in IGNORED and before.get(key) != after.get(key)]
    return Diff(old, new, changes, _impact(old, new) if changes else None, list(borrowed))


def _impact(old: Plan, new: Plan) -> Impact | None:
    if old.model.params is None or new.model.params is None:
        return None
    from distrecipe.plan.report import estimate  # the plan model only when there is a change to price

    a, b = estimate(old), estimate(new)
    return Impact(
        label=(a.label, b.label),
        memory=(a.formula.total, b.formula.total),
        traffic=(a.traffic_engine.total, b.traffic_engine.total),
        peak=(a.need, b.need),
        fits=(a.fits, b.fits),
        step=(a.step.seconds if a.step else None, b.step.seconds if b.step else None),
    )
