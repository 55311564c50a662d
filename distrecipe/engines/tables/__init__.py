"""The engines' key tables, one per released version: which keys each section of a native
config accepts, their defaults, and whether the engine refuses an unknown key there or
silently ignores it.

`tables/ENGINE/RELEASE.json` is written by `scripts/engine_tables.py` from that release
of DeepSpeed, Accelerate, verl, transformers, TRL or OpenRLHF installed in a scratch directory
(introspected and probed, never transcribed); Axolotl's and LLaMA-Factory's by
`scripts/schema_tables.py` from their schema sources (`tests/corpus/schemas/`).
`tests/test_engine_tables.py` rebuilds the installed release's table and compares.

Which release judges is the user's (`release`): stated (`--engine-version`,
`[tool.distrecipe] engines`), else installed beside distrecipe, else the newest table.
A release without a table of its own is judged by the nearest older one, and says so.
Reading a table costs a JSON parse and no engine import, once (lint's fast path).
Why tables per release, and how drift is reviewed: `docs/engine-versions.md`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal, get_args

TableEngine = Literal["deepspeed", "accelerate", "verl", "hf", "axolotl", "llamafactory", "trl", "openrlhf"]
ENGINES: tuple[TableEngine, ...] = get_args(TableEngine)
LABELS: dict[TableEngine, str] = {
    "deepspeed": "DeepSpeed", "accelerate": "Accelerate", "verl": "verl", "hf": "transformers",
    "axolotl": "Axolotl", "llamafactory": "LLaMA-Factory", "trl": "TRL", "openrlhf": "OpenRLHF"}
PACKAGES: dict[TableEngine, str] = {
    "deepspeed": "deepspeed", "accelerate": "accelerate", "verl": "verl", "hf": "transformers",
    "axolotl": "axolotl", "llamafactory": "llamafactory", "trl": "trl", "openrlhf": "openrlhf"}
"""The distribution each engine installs as: how the installed release is found."""
NAMES: dict[str, TableEngine] = {**{engine: engine for engine in ENGINES}, "transformers": "hf",
                                 "llama-factory": "llamafactory", "llama_factory": "llamafactory"}
"""Every name a user may give an engine by (`--engine-version transformers=5.23`)."""
RELEASE = re.compile(r"\d+(\.\d+){0,3}((a|b|rc|\.dev|\.post)\d+)?")
"""A release number as the engines write theirs: `0.19.8`, `5.23`, `0.9.6.dev0`, `1.16.0rc1`."""


def release_key(version: str) -> tuple[tuple[int, ...], int, int]:
    """A release as a sortable key: `0.9.6.dev0` < `0.9.6rc1` < `0.9.6` < `0.9.6.post1`
    (PEP 440's order for the forms `RELEASE` accepts); a short number is padded (`5.23` = `5.23.0`)."""
    found = re.match(r"(\d+(?:\.\d+)*)(?:(\.dev|a|b|rc|\.post)(\d+))?", version)
    if found is None:
        return ((), 0, 0)
    numbers = tuple(int(part) for part in found[1].split("."))
    numbers = numbers + (0,) * max(0, 3 - len(numbers))
    phase = {".dev": -4, "a": -3, "b": -2, "rc": -1, None: 0, ".post": 1}[found[2]]
    return (numbers, phase, int(found[3] or 0))


@cache
def releases(engine: TableEngine) -> tuple[str, ...]:
    """The releases of `engine` with a table here, oldest first."""
    folder = resources.files(__package__).joinpath(engine)
    names = [entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json")]
    return tuple(sorted(names, key=release_key))


Origin = Literal["stated", "installed", "newest"]


@dataclass(frozen=True, slots=True)
class Release:
    """Which release of an engine the project runs, and which table judges it."""

    engine: TableEngine
    runs: str
    """The release the project runs: stated, installed, or (nothing known) the newest table's."""
    origin: Origin
    where: str
    """Who said so: `--engine-version`, `pyproject.toml`, `installed`, `newest table`."""
    table: str
    """The release whose table judges: `runs` itself, else the nearest older one with a table."""

    @property
    def note(self) -> str | None:
        """Why the judging table is not the release the project runs, when it is not."""
        name = LABELS[self.engine]
        if self.table == self.runs or release_key(self.table) == release_key(self.runs):
            return None
        known = releases(self.engine)
        if release_key(self.runs) > release_key(known[-1]):
            return (f"{name} {self.runs} ({self.where}) is newer than every table here: judged by "
                    f"{name} {self.table}'s, the newest (`make drift` reads the new release)")
        if release_key(self.runs) < release_key(known[0]):
            return (f"{name} {self.runs} ({self.where}) is older than every table here: judged by "
                    f"{name} {self.table}'s, the oldest")
        return (f"{name} {self.runs} ({self.where}) has no table of its own: judged by {name} "
                f"{self.table}'s, the nearest older release with one")


_stated: dict[TableEngine, tuple[str, str]] = {}
"""engine → (release, where it was stated): what `state` was told for this run."""


def state(versions: Mapping[TableEngine, tuple[str, str]]) -> None:
    """The releases the user states for this run (engine → (release, who said so)); the
    engines not named keep to what is installed. Called once by a command, before any rule."""
    if dict(versions) == _stated:
        return
    _stated.clear()
    _stated.update(versions)
    for chosen in (release, section, removed_keys):  # what depends on the release chosen
        chosen.cache_clear()


@cache
def installed(engine: TableEngine) -> str | None:
    """The release of `engine` installed beside distrecipe: the version in the name of the
    first `NAME-VERSION.dist-info` on `sys.path`, as `importlib.metadata.version` finds it,
    without importing that module (13 ms of lint's and compile's start-up) or the engine."""
    return _distributions().get(PACKAGES[engine])


@cache
def _distributions() -> dict[str, str]:
    """Each installed distribution's normalised name → its version, first on `sys.path` first."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # a zip, a missing directory
            continue
        for name in names:
            if not name.endswith(".dist-info"):
                continue
            dist, _, version = name.removesuffix(".dist-info").partition("-")
            if version:
                found.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), version)
    return found


@cache
def release(engine: TableEngine) -> Release:
    """The release that judges `engine`'s files in this run (see the module's docstring)."""
    known = releases(engine)
    if engine in _stated:
        runs, where = _stated[engine]
        origin: Origin = "stated"
    elif (found := installed(engine)) is not None:
        runs, where, origin = found, "installed", "installed"
    else:
        runs, where, origin = known[-1], "newest table", "newest"
    older = [name for name in known if release_key(name) <= release_key(runs)]
    return Release(engine, runs, origin, where, older[-1] if older else known[0])


def table_of(engine: TableEngine, version: str) -> dict[str, Any]:
    """The stored table of one release of `engine` (parsed once)."""
    return _parsed(engine, version)


@cache
def _parsed(engine: TableEngine, version: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(engine, f"{version}.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def is_comment_key(key: object) -> bool:
    """A key written as a comment (`comment`, `_comment`, `//…`, `#…`, any `_`-prefixed key):
    JSON has no comments, so people write them as keys; a note, never a misspelt setting."""
    return isinstance(key, str) and (key.lower() in ("comment", "comments")
                                     or key.startswith(("_", "//", "#")))


def table(engine: TableEngine) -> dict[str, Any]:
    """The table that judges `engine` in this run (`release`)."""
    return _parsed(engine, release(engine).table)


def label(engine: TableEngine) -> str:
    """`DeepSpeed 0.19.8`: the engine and the release whose table judged, for messages
    (`Axolotl 0.18.0 @067b021c` for a table read from sources at a commit)."""
    found = table(engine)
    at = f" @{found['commit'][:8]}" if "commit" in found else ""
    return f"{LABELS[engine]} {found['version']}{at}"


def history(engine: TableEngine, has: Callable[[dict[str, Any]], bool], noun: str = "key") -> str | None:
    """Where a key the judging release lacks exists in another release's table, as the
    words a finding adds: `a key of DeepSpeed ≥ 0.19.4; the project runs 0.18.9 (installed)`,
    or `removed in transformers 5.0.0 (last in 4.57.6)`. `has(table)` says whether a
    table has the key; None when no release here has it (a plain unknown key)."""
    chosen = release(engine)
    name = LABELS[engine]
    known = releases(engine)
    having = [version for version in known if has(_parsed(engine, version))]
    if not having:
        return None
    now = release_key(chosen.table)
    later = [version for version in having if release_key(version) > now]
    if later:
        return f"a {noun} of {name} ≥ {later[0]}; the project runs {chosen.runs} ({chosen.where})"
    last = having[-1]
    gone = next(version for version in known if release_key(version) > release_key(last))
    return f"removed in {name} {gone} (last in {last}); the project runs {chosen.runs} ({chosen.where})"


def key_history(engine: TableEngine, key: str) -> str | None:
    """`history` of a top-level key, for the tables whose `keys` are one flat mapping
    (Axolotl's, LLaMA-Factory's)."""
    return history(engine, lambda found: key in found["keys"])


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a native config as the engine reads it."""

    name: str
    """Dotted path (`zero_optimization.offload_param`); empty for the top level."""
    keys: dict[str, dict[str, Any]]
    """Accepted key → `{"default": …}` (absent when the engine reads it without one), and
    `alias_of`, `deprecated`, `replaced_by`, `choices` where the engine has them; for a
    pydantic field, the JSON `types` its annotation accepts (`refuses_bool` where a
    validator turns booleans away; see `lint.rules.value_types`)."""
    refuses_unknown: bool
    """True when the engine stops at start-up on a key not in `keys`; False when it
    silently ignores it."""
    auto_dropped: bool = False
    """True when the engine drops an `"auto"` value before checking keys (DeepSpeed's
    models do, leaving it to the HF Trainer), so even an unknown key with it passes."""

    def default(self, key: str) -> tuple[bool, Any]:
        """(True, the engine's default for `key`) or (False, None) when it has none."""
        entry = self.keys.get(key, {})
        return ("default" in entry, entry.get("default"))


@cache
def section(engine: Literal["deepspeed", "accelerate"], path: tuple[str, ...]) -> Section | None:
    """The section at `path` of a ds_config or an Accelerate config, or None when the
    engine does not read that path as a section (free-form or not a mapping)."""
    name = ".".join(path)
    found = table(engine)["sections"].get(name)
    if found is None:
        return None
    return Section(name, found["keys"], found["unknown_keys"] == "refused", found.get("auto_dropped", False))


@cache
def removed_keys(path: tuple[str, ...]) -> frozenset[str]:
    """ds_config keys at `path` that DeepSpeed removed and now refuses by name."""
    return frozenset(table("deepspeed")["removed"].get(".".join(path), ()))


VerlConfig = Literal["ppo_trainer", "ppo_megatron_trainer"]


def verl_tree(config: VerlConfig) -> dict[str, Any]:
    """verl's composed Hydra config `config`, whole, with its defaults (interpolations as written)."""
    tree: dict[str, Any] = table("verl")["configs"][config]
    return tree


def training_flags() -> dict[str, dict[str, Any]]:
    """How `HfArgumentParser(TrainingArguments)` reads each field from a command line: its
    conversion (`int`, `float`, `bool`, `str`, `enum`, `other`), `choices`, `nargs`."""
    flags: dict[str, dict[str, Any]] = table("hf")["flags"]
    return flags


def trainer_modules() -> frozenset[str]:
    """The judging verl release's trainer modules (`verl.trainer.main_ppo`, ...)."""
    return _names("verl", release("verl").table, "trainer_modules")


def training_arguments() -> frozenset[str]:
    """The fields `HfArgumentParser` accepts for the judging transformers' `TrainingArguments`."""
    return _names("hf", release("hf").table, "training_arguments")


@cache
def _names(engine: TableEngine, version: str, key: str) -> frozenset[str]:
    return frozenset(_parsed(engine, version).get(key, ()))


def training_defaults() -> dict[str, Any]:
    """`TrainingArguments`' default for each field that has a stable one (null included)."""
    defaults: dict[str, Any] = table("hf")["defaults"]
    return defaults
