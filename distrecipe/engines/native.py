"""Which kind of config a file is, reading it with positions, and the files it names.

Kinds are told apart by the keys only one of them writes, so a file needs no naming
convention: `recipe:` marks a recipe, `distributed_type` an Accelerate config,
`actor_rollout_ref` (or `data` with `trainer`, or any of verl's groups in a script
that runs `verl.trainer.main_ppo`) verl, TrainingArguments' own names an
HF file, and DeepSpeed's keys (or a near miss of one: `zero_optimisation`) a
ds_config. verl is also written as Hydra overrides (`key=value` lines, or a launch
script); those are read into the same nested mapping, with each override's position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrecipe.engines import Kind
from distrecipe.engines.accelerate import MARKERS as ACCELERATE_MARKERS
from distrecipe.engines.argv import LAUNCHER_WORDS, launches, training_arguments
from distrecipe.engines.deepspeed import MARKERS as DS_MARKERS
from distrecipe.engines.hf import FLAG_TYPES
from distrecipe.engines.hf import MARKERS as HF_MARKERS
from distrecipe.engines.hydra import read_overrides, verl_commands
from distrecipe.engines.verl import ENTRY as VERL_ENTRY
from distrecipe.engines.verl import VERL_ROOTS
from distrecipe.keys import get
from distrecipe.source import Document, parse_text, read_text

DATA_SUFFIXES = (".json", ".yaml", ".yml")
OVERRIDE_SUFFIXES = (".txt", ".sh", ".args")


def detect(doc: Document) -> Kind | None:
    """The config's kind from its keys, or None for a file that is none of ours."""
    data = doc.data
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if "recipe" in keys:
        return "recipe"
    if keys & ACCELERATE_MARKERS:
        return "accelerate"
    if "actor_rollout_ref" in keys or {"data", "trainer"} <= keys or _runs_verl(doc, keys):
        return "verl"
    if keys & HF_MARKERS:
        return "hf"
    if keys & DS_MARKERS or _near_deepspeed(keys):
        return "deepspeed"
    if not keys and doc.file.endswith(".sh"):
        return _cut_kind(doc)
    return None


def _cut_kind(doc: Document) -> Kind | None:
    """The kind of a launch script whose program gets none of its arguments because a
    comment ended the command (`shell.RawCommand.cut`): what the lost arguments are."""
    text = "\n".join(doc.lines)
    if any(command.unreached for command in verl_commands(text, doc.file)):
        return "verl"
    for launch in launches(text, doc.file) if any(word in text for word in LAUNCHER_WORDS) else ():
        if any((word.value or "").lstrip("-").replace("-", "_") in FLAG_TYPES for word in launch.unreached):
            return "hf"
    return None


def _runs_verl(doc: Document, keys: set[str]) -> bool:
    """Overrides a script passes to verl's trainer (a critic-only or `algorithm.*` run sets
    neither `actor_rollout_ref` nor `data` with `trainer`): any of verl's groups, from a
    launch script's verl command (`hydra.verl_commands`) or an override file."""
    if doc.file.endswith(".sh"):  # read from the arguments of a command that runs verl
        return bool(keys & set(VERL_ROOTS))
    return bool(keys) and keys <= set(VERL_ROOTS) and any(VERL_ENTRY in line for line in doc.lines)


def _near_deepspeed(keys: set[str]) -> bool:
    import difflib  # only files with no known key get here

    return any(difflib.get_close_matches(key, DS_MARKERS, n=1, cutoff=0.85) for key in keys)


def read_file(path: Path) -> Document:
    """Read and parse a config file of any kind distrecipe knows (see `read`)."""
    return read(path, read_text(path))


def read(path: Path, text: str) -> Document:
    """Parse `text` by its file's suffix: JSON fast, YAML carefully, overrides line by line."""
    name = str(path)
    suffix = path.suffix.lower()
    if suffix in OVERRIDE_SUFFIXES:
        overrides = read_overrides(text, name)
        if overrides.data or suffix != ".sh":
            return overrides
        return script_arguments(text, name) or overrides
    return parse_text(text, name)


def script_arguments(text: str, file: str) -> Document | None:
    """The TrainingArguments of a launch script's first launch command that passes any of
    the ones lint reads (`engines.hf.FLAG_TYPES`, as the workspace takes its world from)."""
    if not any(word in text for word in LAUNCHER_WORDS):
        return None
    lines = tuple(text.splitlines())
    for launch in launches(text, file):
        if any(name in FLAG_TYPES for name in launch.flags):
            return training_arguments(launch, file, lines)
    return None


def ds_reference(kind: Kind, data: Any) -> str | None:
    """The ds_config an Accelerate (`deepspeed_config_file`) or HF (`deepspeed`) config names."""
    path = ("deepspeed_config", "deepspeed_config_file") if kind == "accelerate" else ("deepspeed",)
    ref = get(data, *path) if kind in ("accelerate", "hf") else None
    return ref if isinstance(ref, str) and ref else None


def referenced_path(referrer: Path, ref: str) -> Path:
    """Where a config's reference to another file points.

    The engines open it relative to the directory the job is launched from, which
    is usually where lint runs too (the repository root); a path relative to the
    referring file's own directory is tried first, as configs kept side by side use it.
    """
    beside = referrer.parent / ref
    return beside if is_file(beside) or not is_file(Path(ref)) else Path(ref)


def is_file(path: Path) -> bool:
    """`path.is_file()`, and False for names no file can have (too long, NUL, surrogates)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False
