"""What an import did not map, carried verbatim: the recipe's `native` section.

An importer maps what the recipe models. This module closes the gap by running the
emitter backwards against the input: it resolves the imported recipe, emits the
same engine's config from it, and compares key by key. A key of the input the
emitter does not write with the same value goes into `native.ENGINE` verbatim; a key
the emitter adds that the input did not state goes in as `null` (removed at compile),
unless its value is the engine's own default. A `null` the input states where the
engine's default is null anyway (a dumped TrainingArguments' `hub_token`) says nothing
and is left out; any other stated `null` is carried and named. So `compile` gives back
every key the input set, with its value, and nothing else the engine reads differently; where a
carried key would contradict a value the recipe decided, it is not carried and a
note names it (the importer's mapping, not the input, is then wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distrecipe.engines import Kind
from distrecipe.engines.accelerate import EMITTED_DEFAULTS as ACCELERATE_DEFAULTS
from distrecipe.engines.deepspeed import BATCH_KEYS, NO_DEFAULT, config_default
from distrecipe.engines.defaults import lookup, null_is_default
from distrecipe.engines.trl import commands
from distrecipe.job import Plan
from distrecipe.source import KeyPath
from distrecipe.translator import accelerate, deepspeed, hf, trl, verl
from distrecipe.translator.native import DECIDED, leaves, override_line, same

EMITTERS: dict[str, Callable[[Plan], Any]] = {
    "deepspeed": deepspeed.emit,
    "accelerate": accelerate.emit,
    "hf": hf.emit,
    "verl": verl.nested,
    "trl": trl.grpo,
}
"""Engine → the emitter whose output the input is compared with (on a plan without `native`):
a TRL config's own keys (its Trainer's are `hf`'s) with the GRPO keys the recipe decides."""
FILE_REFERENCES: dict[str, frozenset[KeyPath]] = {
    "accelerate": frozenset({("deepspeed_config", "deepspeed_config_file")}),
    "hf": frozenset({("deepspeed",)}),
}
"""Keys naming a companion file: compile writes its own, holding the companion's settings."""
DERIVED: dict[str, frozenset[KeyPath]] = {
    "deepspeed": frozenset((key,) for key in BATCH_KEYS.values()),
}
"""Keys the engine derives from the others exactly as the recipe does (DeepSpeed's third
batch number): written by compile where the input left them out, with the same value."""


NOT_CARRIED = "is not carried"
"""How a note on a stated value the import drops says so (`diff` repeats those notes)."""

TABLED: dict[str, Kind] = {"deepspeed": "deepspeed", "accelerate": "accelerate", "hf": "hf"}
"""The engines whose key tables give a default for any key (verl's composes a whole config)."""


def default(engine: str, path: KeyPath, plan: Plan) -> object:
    """The engine's own value for a key the input did not state, or `NO_DEFAULT`: DeepSpeed's
    at the plan's stage (`config_default`: its stage-dependent `overlap_comm`), Accelerate's
    loader's, GRPOConfig's for a TRL config's GRPO keys, else the generated key tables'
    (TrainingArguments' `adam_beta1`)."""
    if engine == "deepspeed":
        found = config_default(path, plan.stage)
    elif engine == "accelerate":
        found = ACCELERATE_DEFAULTS.get(path, NO_DEFAULT)
    elif engine == "trl":  # the keys `trl.grpo` writes are GRPOConfig's
        field = commands()["grpo"].field(str(path[0])) if len(path) == 1 else None
        found = field["default"] if field is not None and "default" in field else NO_DEFAULT
    else:
        found = NO_DEFAULT
    if found is NO_DEFAULT and engine in TABLED:
        table_default = lookup(TABLED[engine], {})(tuple(map(str, path)))
        return NO_DEFAULT if table_default is None else table_default.value
    return found


def residue(engine: str, given: dict[str, Any], plan: Plan) -> tuple[Any, list[str]]:
    """`native.ENGINE` for an input `given` imported as `plan` (which has no `native` yet),
    and notes on what could not be carried."""
    emitted = dict(leaves(EMITTERS[engine](plan)))
    stated = dict(leaves(given))
    skip = FILE_REFERENCES.get(engine, frozenset())
    carried: dict[KeyPath, Any] = {}
    for path, value in stated.items():
        if path in skip or (path in emitted and same(emitted[path], value)):
            continue
        if value is None and _unstated_null(engine, path, emitted):
            continue
        carried[path] = value
    for path, value in emitted.items():
        covered = any(path[:n] in stated for n in range(1, len(path) + 1)) or any(
            key[: len(path)] == path for key in stated)
        if covered or path in DERIVED.get(engine, frozenset()):
            continue
        if not same(default(engine, path, plan), value):
            # Remove the outermost block the input did not state at all (`optimizer`), not each leaf.
            top = next(path[:n] for n in range(1, len(path) + 1)
                       if not any(key[:n] == path[:n] for key in stated))
            carried[top] = None
    notes: list[str] = []
    for path in list(carried):
        decided = DECIDED[engine].get(path)
        if decided is not None and carried[path] is not None and not decided[1](plan, carried[path]):
            notes.append(f"{'.'.join(map(str, path))} = {carried[path]!r} disagrees with the imported "
                         f"{decided[0]} and {NOT_CARRIED}: check the recipe's {decided[0]}")
            del carried[path]
    if engine == "verl":
        return _verl(carried, notes)
    named = [".".join(map(str, p)) for p in carried if carried[p] is not None]
    nulls = [".".join(map(str, p)) for p in carried if carried[p] is None and p in stated]
    if named:
        notes.append(f"carried verbatim in native.{engine} (compile writes them back): " + ", ".join(named))
    if nulls:
        notes.append(f"stated null, carried as null in native.{engine} (compile leaves them out): "
                     + ", ".join(nulls))
    return _nested(carried), notes


def _unstated_null(engine: str, path: KeyPath, emitted: dict[KeyPath, Any]) -> bool:
    """A stated null that says no more than leaving the key out: the engine's default is
    null there, and compile writes nothing at or below the key for a null to remove."""
    return engine in TABLED and null_is_default(TABLED[engine], tuple(map(str, path))) and not any(
        key[: len(path)] == path for key in emitted)


def _nested(carried: dict[KeyPath, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in carried.items():
        node = out
        for part in path[:-1]:
            node = node.setdefault(str(part), {})
        node[str(path[-1])] = value
    return out


def _verl(carried: dict[KeyPath, Any], notes: list[str]) -> tuple[list[str], list[str]]:
    """verl's native section is override lines; an added key cannot be removed from
    Hydra's composed config by an override, so it is named instead."""
    kept = {".".join(map(str, p)): v for p, v in carried.items() if v is not None}
    added = [".".join(map(str, p)) for p, v in carried.items() if v is None]
    if kept:
        notes.append("carried verbatim in native.verl: " + ", ".join(kept))
    if added:
        notes.append("compile also writes overrides the input left to verl's defaults: " + ", ".join(added))
    return [override_line(key, value) for key, value in kept.items()], notes
