"""Two configs → what changed in meaning, and what it costs per GPU.

Two native configs of one kind (two ds_configs, two Accelerate YAMLs, two verl
scripts, two TrainingArguments files) are compared as the files say, key by key: a
key only one side states is compared with the engine's own default for it, labelled
as such (`engines/defaults`), or called "not stated" where the engine has none;
`"auto"` stays `"auto"`. Two spellings the engine reads as one (`stage3_` aliases,
Accelerate's optional prefixes, `true` and `"true"`) are one key. Any other pair (a
recipe, or two kinds) is resolved to Plans and compared field by field in the
recipe's vocabulary, so `train_batch_size 256 → 512` in a ds_config against a recipe
reads as `batch.global`. When the model size is known and both sides resolve, the
change's impact comes from `distrecipe plan`: the seed's per-GPU model state and
traffic per step (formula view) and the engine view's peak against the GPU's memory.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from distrecipe.api import plan_of_document
from distrecipe.engines import ENGINES, KINDS, Engine, Kind
from distrecipe.engines.defaults import Lookup, canonical, lookup, modelled, null_is_default
from distrecipe.engines.platforms import PLATFORMS
from distrecipe.engines.tables import is_comment_key
from distrecipe.errors import DistrecipeError, Position
from distrecipe.job import Plan, plan_values
from distrecipe.keys import get, joined
from distrecipe.source import Document
from distrecipe.translator.carry import FIELDS
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native
from distrecipe.translator.importers.residue import NOT_CARRIED
from distrecipe.translator.load import split_set

IGNORED: dict[str, str] = {
    "name": "a label for the run's directory and job name; no rank computes anything from it, "
            "and an imported file's name is its file stem, so two copies of one config would differ",
}
"""The one list of keys whose change means nothing to the job, each with why. Everything
else `plan_values` lists (every recipe field, walked from the dataclasses, and each
`native` key) is compared, so a field added later is compared without touching this."""

NOT_STATED = "not stated"
"""A side's source when its file does not state the key and the engine has no default."""


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    old: Any
    new: Any
    old_source: str = ""
    """Empty when the old file states (or the recipe resolves) `old`; else whose default
    it is (`DeepSpeed 0.19.8 default`), or `not stated` (then `old` is None)."""
    new_source: str = ""


@dataclass(frozen=True, slots=True)
class Impact:
    """Per-GPU figures before and after, in bytes (traffic: the engine's view, as `plan`
    prices it); `step` in seconds, None where the GPU is unknown."""

    label: tuple[str, str]
    memory: tuple[float, float]
    traffic: tuple[float, float]
    peak: tuple[float, float]
    fits: tuple[bool | None, bool | None]
    """Whether launch goes ahead (verdict fits or tight); None without a GPU memory."""
    step: tuple[float | None, float | None]
    verdict: tuple[str | None, str | None] = (None, None)
    """`plan`'s verdict: fits, tight, does not fit (`plan.verdict`)."""


@dataclass(frozen=True, slots=True)
class Diff:
    changes: list[Change]
    impact: Impact | None
    unpriced: str | None
    """Why a change has no impact figures (no model size, or a side does not resolve)."""
    notes: list[str]
    """What a side did not state and took from the other, and what was not compared."""

    @property
    def same_job(self) -> bool:
        """No change, and no stated value left out of the comparison: a value the import
        could not carry is in no Plan, so two files that differ there are not shown equal."""
        return not self.changes and not any(NOT_CARRIED in note for note in self.notes)


NATIVE: dict[str, Kind] = {kind: kind for kind in KINDS if kind in ENGINES or kind in PLATFORMS}
"""The kinds compared key by key when both sides are one of them (job files, `engines.platforms`,
are compared key by key and never priced)."""

NO_MODEL = "the model size is not given (`--set model.params=8e9`)"


@dataclass(frozen=True, slots=True)
class Side:
    path: str
    doc: Document
    native: bool


def read_side(path: str, kind: str, doc: Document, *, world: int | None, nodes: int = 1,
              notes: list[str] | None = None) -> Side:
    """A recipe as written, or a native config imported into a recipe document. What the
    import could not carry (a value that contradicts what the recipe decides) is in no
    Plan, so it is added to `notes`, naming the key: never a silent "same job"."""
    if kind == "recipe":
        return Side(path, doc, native=False)
    imported = import_document(kind, doc, World.of(world, nodes) if world is not None else None)
    if notes is not None:
        notes += [f"{path}: {note}" for note in imported.notes if NOT_CARRIED in note]
    data = {"name": Path(path).stem, **imported.recipe}
    return Side(path, Document(data, f"{path} (imported)"), native=True)


def _borrow(side: Side, kind: str, other: Side, notes: list[str]) -> Document:
    """The native side, completed with what its kind cannot state and only the other side
    does (the model's shape, the run's launch settings, recompute in a ds_config): per the
    carry table (`translator.carry`), every field that kind does not carry or has no key
    for. A field the kind maps (Accelerate's offload, a stage) and the file leaves out is
    the engine's default there, a difference to report, never one to fill from the other."""
    if not side.native or not isinstance(other.doc.data, dict) or kind not in ENGINES:
        return side.doc
    data = copy.deepcopy(side.doc.data)
    taken = []
    for key, row in FIELDS.items():
        written = _written(key)
        if row.cell(kind).how in ("exact", "mapped") or written is None:
            continue
        if key == "fsdp_version" and data.get("strategy") != "fsdp":
            continue  # which FSDP means nothing to the side's own strategy (resolve refuses it there)
        value = get(other.doc.data, *written)
        if value is None or get(data, *written) is not None:
            continue
        node = data
        for part in written[:-1]:
            node = node.setdefault(part, {})
        node[written[-1]] = value
        taken.append(key)
    if taken:
        notes.append(f"{side.path} does not state {', '.join(taken)}: taken from {other.path}")
    return Document(data, side.doc.file)


def _written(key: str) -> tuple[str, ...] | None:
    """Where a field sits in a recipe document; None for one written inside another's form."""
    if key == "activation_checkpointing.every":
        return None
    return tuple(key.split("."))


def plan_of(doc: Document, base: str, *, world: int | None, overrides: Sequence[str]) -> Plan:
    """Resolve one side; a native side's own world is in its cluster already."""
    try:
        return plan_of_document(doc, Path(base).parent, world=world, overrides=overrides)
    except DistrecipeError as exc:
        raise DistrecipeError(exc.message, exc.where or Position(base, 1, 1)) from None


def diff_paths(old: str, new: str, *, world: int | None, nodes: int = 1,
               overrides: Sequence[str] = ()) -> Diff:
    """Read both sides and compare them: natively when they are one engine's files, else
    as Plans (import, complete with what only the other side states, resolve)."""
    (kind_a, doc_a), (kind_b, doc_b) = read_native(old), read_native(new)
    if kind_a == kind_b and kind_a in NATIVE:
        changes, notes = native_changes(NATIVE[kind_a], doc_a, doc_b, world=world)
        if changes and kind_a in PLATFORMS:
            return Diff(changes, None, "a platform's job file trains no model of its own", notes)
        if not changes or not _sizes_model(overrides):
            return Diff(changes, None, NO_MODEL if changes else None, notes)
        try:
            plans = _plans(((old, kind_a, doc_a), (new, kind_b, doc_b)), world, nodes, overrides, [])
        except DistrecipeError as exc:
            return Diff(changes, None, str(exc), notes)
        impact = _impact(*plans)
        return Diff(changes, impact, None if impact else NO_MODEL, notes)
    notes = []
    plans = _plans(((old, kind_a, doc_a), (new, kind_b, doc_b)), world, nodes, overrides, notes)
    return diff(plans[0], plans[1], notes)


def _sizes_model(overrides: Sequence[str]) -> bool:
    """Whether `--set` gives the model size, without which no native side can be priced."""
    return ("model", "params") in [split.path for split in map(split_set, overrides) if split is not None]


def _plans(sides: Sequence[tuple[str, str, Document]], world: int | None, nodes: int,
           overrides: Sequence[str], notes: list[str]) -> list[Plan]:
    a, b = (read_side(path, kind, doc, world=world, nodes=nodes, notes=notes) for path, kind, doc in sides)
    kinds = {a.path: sides[0][1], b.path: sides[1][1]}
    return [plan_of(_borrow(x, kinds[x.path], y, notes), x.path, world=world, overrides=overrides)
            for x, y in ((a, b), (b, a))]


def diff(old: Plan, new: Plan, borrowed: Sequence[str] = ()) -> Diff:
    """Two Plans compared in the recipe's vocabulary. A `native` value each side's engine file
    holds anyway (what distrecipe writes there, else the engine's default at that side's
    stage) is no change of its own."""
    before, after = plan_values(old), plan_values(new)
    files: dict[tuple[int, str], Any] = {}
    changes = [Change(key, before.get(key), after.get(key)) for key in dict.fromkeys([*before, *after])
               if key not in IGNORED and before.get(key) != after.get(key)
               and not all(_native_at_default(plan, key, values.get(key), files)
                           for plan, values in ((old, before), (new, after)))]
    impact = _impact(old, new) if changes else None
    return Diff(changes, impact, NO_MODEL if changes and impact is None else None, list(borrowed))


MERGED: tuple[Engine, ...] = ("deepspeed", "accelerate", "hf")
"""The engines whose `native` section is a mapping merged into the file distrecipe writes."""


def _native_at_default(plan: Plan, key: str, value: Any, files: dict[tuple[int, str], Any]) -> bool:
    """Whether the Plan's value at `key` is unset, or a `native.<engine>` value its engine's file
    holds without it: the emitted value there, else the engine's default for that file.
    `files` caches each side's file without its native section."""
    if value is None:
        return True
    engine, _, rest = key.removeprefix("native.").partition(".")
    if not key.startswith("native.") or engine not in MERGED or not rest:
        return False
    if (id(plan), engine) not in files:
        files[id(plan), engine] = _emitted_without_native(plan, engine)
    emitted = files[id(plan), engine]
    if emitted is None:
        return False
    path = tuple(rest.split("."))
    written = _lookup_path(emitted, path)
    if written is not _ABSENT:
        return _same(value, written)
    return _at_default(engine, value, canonical(engine, path), lookup(engine, emitted))


_ABSENT = object()


def _lookup_path(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return _ABSENT
        data = data[part]
    return data


def _emitted_without_native(plan: Plan, engine: Engine) -> Any:
    """The file distrecipe writes for `engine` from `plan` with no `native.<engine>`; None where
    the engine cannot express the plan."""
    from distrecipe.translator import accelerate, deepspeed, hf

    emit = {"deepspeed": deepspeed.emit, "accelerate": accelerate.emit, "hf": hf.emit}[engine]
    without: dict[str, Any] = {engine: {}}
    recipe = replace(plan.recipe, native=replace(plan.recipe.native, **without))
    try:
        return emit(replace(plan, recipe=recipe))
    except DistrecipeError:
        return None


def native_changes(kind: Kind, old: Document, new: Document, *, world: int | None = None) -> tuple[
        list[Change], list[str]]:
    """Every key whose value differs between two files of `kind`, in the order the files
    write them; a key one side leaves out is the engine's default there, or not stated. A
    ds_config's batch number DeepSpeed derives from the other two (with the `world` known)
    is the derived number on the side that leaves it out: the same batch, said twice."""
    if kind == "deepspeed" and world is not None:
        old, new = (Document(_derived_batch(doc.data, world), doc.file, doc.positions, doc.key_positions,
                             doc.lines) for doc in (old, new))
    a, b = _leaves(kind, old.data), _leaves(kind, new.data)
    defaults = lookup(kind, old.data, old.lines), lookup(kind, new.data, new.lines)
    changes: list[Change] = []
    comments: set[str] = set()
    for path in dict.fromkeys([*a, *b]):
        written, value = a[path] if path in a else b[path]
        key = joined(written)
        if kind in ("deepspeed", "accelerate") and any(map(is_comment_key, written)):
            comments.add(key)
        elif all(path not in side or _at_default(kind, side[path][1], path, lookup_)
                 for side, lookup_ in zip((a, b), defaults, strict=True)):
            continue  # each side says no more than its own engine does without it
        elif path in a and path in b:
            if not _same(value, b[path][1]):
                changes.append(Change(key, value, b[path][1]))
        else:
            change = _against_default(key, path, value, defaults[path in a], old_stated=path in a)
            changes += [] if change is None else [change]
    notes = [f"comment keys not compared: {', '.join(sorted(comments))}"] if comments else []
    return changes, notes


def _derived_batch(data: Any, world: int) -> Any:
    """`data` with the batch keys it leaves out filled as `DeepSpeedConfig` derives them
    (`_set_batch_related_parameters`): two numbers give the third, micro alone or the
    global batch alone mean one accumulation step; DP is the world over
    `sequence_parallel_size`. Where DeepSpeed would floor, nothing is filled."""
    if not isinstance(data, dict):
        return data
    total, micro, steps = (data.get(key) for key in DS_BATCH)
    sequence = data.get("sequence_parallel_size", 1)
    stated = [n for n in (total, micro, steps) if n is not None]
    if not stated or not all(type(n) is int and n > 0 for n in stated) or type(sequence) is not int \
            or sequence < 1 or world % sequence:
        return data
    dp = world // sequence
    if total is None and micro is not None:
        total = micro * (steps or 1) * dp
    elif total is not None and micro is None and total % ((steps or 1) * dp) == 0:
        micro = total // ((steps or 1) * dp)
    if steps is None and total is not None and micro is not None and total % (micro * dp) == 0:
        steps = total // (micro * dp)
    filled = dict(zip(DS_BATCH, (total, micro, steps), strict=True))
    return {**data, **{key: value for key, value in filled.items() if key not in data and value is not None}}


DS_BATCH = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def _at_default(kind: Kind, value: Any, path: tuple[str, ...], defaults: Lookup) -> bool:
    """Whether a side's stated `value` is what its engine uses there without it: the same
    effective default on that side (`overlap_comm: true` at ZeRO-3) is no change of its own,
    nor is a null where the engine reads null as unstated."""
    if value is None and null_is_default(kind, path):
        return True
    default = defaults(path)
    return default is not None and _same(value, default.value)


def _against_default(key: str, path: tuple[str, ...], value: Any, unstated: Lookup, *,
                     old_stated: bool) -> Change | None:
    """A key one side states against what the other side's engine uses without it."""
    default = unstated(path)
    if default is None:
        if value is None:
            return None  # a stated null is the engine's "unset"
        other, source = None, NOT_STATED
    elif _same(value, default.value):
        return None
    else:
        other, source = default.value, default.source
    if old_stated:
        return Change(key, value, other, new_source=source)
    return Change(key, other, value, old_source=source)


def _leaves(kind: Kind, data: Any) -> dict[tuple[str, ...], tuple[tuple[str, ...], Any]]:
    """Canonical path → (path as written, value) of every value that is not a mapping
    with keys; an empty mapping is a value unless the engine fills it with a section's
    defaults (`"params": {}` is not an absent `params`, `"fp16": {}` is no `fp16`)."""
    return {canon: (written, value) for canon, written, value in _walk(kind, data, (), ())}


def _walk(kind: Kind, node: Any, canon: tuple[str, ...], written: tuple[str, ...]) -> Iterator[
        tuple[tuple[str, ...], tuple[str, ...], Any]]:
    if not isinstance(node, dict) or not node:
        if written and not (node == {} and modelled(kind, canon)):
            yield canon, written, node
        return
    for key, value in node.items():
        yield from _walk(kind, value, canonical(kind, (*canon, str(key))), (*written, str(key)))


def _same(a: Any, b: Any) -> bool:
    """Equal as the engine reads them: numbers by value (`5e8` is `500000000`), a boolean
    and its lower-case text alike (Accelerate's defaults are `"true"`; pydantic and
    OmegaConf read either), but a boolean never equal to a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return _truth(a) is not None and _truth(a) == _truth(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return (type(a) is type(b) or (_numeric(a) and _numeric(b))) and a == b


def _truth(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(value.lower()) if isinstance(value, str) else None


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _impact(old: Plan, new: Plan) -> Impact | None:
    if old.recipe.model.params is None or new.recipe.model.params is None:
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
        verdict=(a.verdict.word if a.verdict else None, b.verdict.word if b.verdict else None),
    )
