"""Which kind of config a file is, reading it with positions, and the files it names.

Kinds are told apart by the keys only one of them writes, so a file needs no naming
convention: `recipe:` marks a recipe, `distributed_type` an Accelerate config,
`actor_rollout_ref` (or `data` with `trainer`, or any of verl's groups in a script
that runs `verl.trainer.main_ppo`) verl, `base_model` with Axolotl's own keys
(`micro_batch_size`, `sequence_len`, ...) an Axolotl YAML, `finetuning_type`, `template`
or a training `stage` a LLaMA-Factory YAML, a field only TRL's trainer configs have
(`packing`, `num_generations`, `beta`) a TRL config, TrainingArguments' own names an HF
file, a launch script running `openrlhf.cli.train_*` an OpenRLHF command line, and
DeepSpeed's keys (or a near miss of one: `zero_optimisation`) a ds_config; a platform's job
file goes by its `apiVersion` and `kind` (TrainJob, RayJob, PyTorchJob) or by SkyPilot's
task keys (`engines.platforms`). verl is also written as Hydra overrides (`key=value`
lines, or a launch script); those are read into the same nested mapping, with each
override's position.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from distrecipe.engines import Kind
from distrecipe.engines.accelerate import MARKERS as ACCELERATE_MARKERS
from distrecipe.engines.argv import LAUNCHER_WORDS, launches, training_arguments
from distrecipe.engines.axolotl import is_axolotl
from distrecipe.engines.deepspeed import MARKERS as DS_MARKERS
from distrecipe.engines.hf import FLAG_TYPES
from distrecipe.engines.hf import MARKERS as HF_MARKERS
from distrecipe.engines.hydra import read_overrides, verl_commands
from distrecipe.engines.llamafactory import V1 as LLAMAFACTORY_V1
from distrecipe.engines.llamafactory import is_llamafactory
from distrecipe.engines.llamafactory import is_v1 as is_llamafactory_v1
from distrecipe.engines.openrlhf import is_command as is_openrlhf_command
from distrecipe.engines.openrlhf import read_command as read_openrlhf_command
from distrecipe.engines.platforms import platform_kind
from distrecipe.engines.shell import SCRIPT_SUFFIXES, is_script
from distrecipe.engines.trl import is_command as is_trl_command
from distrecipe.engines.trl import is_trl
from distrecipe.engines.trl import read_command as read_trl_command
from distrecipe.engines.verl import ENTRY as VERL_ENTRY
from distrecipe.engines.verl import VERL_ROOTS
from distrecipe.keys import get
from distrecipe.source import Document, parse_text, read_text

DATA_SUFFIXES = (".json", ".yaml", ".yml")
OVERRIDE_SUFFIXES = (".txt", ".args", *SCRIPT_SUFFIXES)
"""Files read line by line or as bash reads them: verl override files and launch scripts."""


def detect(doc: Document) -> Kind | None:
    """The config's kind from its keys, or None for a file that is none of ours."""
    data = doc.data
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if {"apiVersion", "kind"} <= keys and (manifest := platform_kind(data)) is not None:
        return manifest
    if "recipe" in keys:
        return "recipe"
    if is_openrlhf_command(data):
        return "openrlhf"
    if is_trl_command(data):
        return "trl"
    if keys & ACCELERATE_MARKERS:
        return "accelerate"
    if "actor_rollout_ref" in keys or {"data", "trainer"} <= keys or _runs_verl(doc, keys):
        return "verl"
    if is_llamafactory_v1(keys):
        return None  # read by LLaMA-Factory's v1 trainer, in a vocabulary of its own
    if is_axolotl(keys):
        return "axolotl"
    if is_llamafactory(data):
        return "llamafactory"
    if is_trl(keys):
        return "trl"
    if keys & HF_MARKERS:
        return "hf"
    if keys & DS_MARKERS or _near_deepspeed(keys):
        return "deepspeed"
    if not keys and is_script(doc.file):
        return _cut_kind(doc)
    return platform_kind(data)


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


def unsupported(doc: Document) -> str | None:
    """What a file distrecipe does not read is, when its keys tell (for the message that
    says it is not read): formats that look like a kind but are another's."""
    data = doc.data
    if not isinstance(data, dict):
        return None
    for keys, what in UNSUPPORTED:
        if keys <= set(data):
            return what
    return None


UNSUPPORTED: tuple[tuple[frozenset[str], str], ...] = tuple(
    (keys, "a LLaMA-Factory v1 config, which its v1 trainer reads, not HfArgumentParser")
    for keys in LLAMAFACTORY_V1)
"""(keys a file holds all of, what it is) for formats lint recognises but does not read."""


def _runs_verl(doc: Document, keys: set[str]) -> bool:
    """Overrides a script passes to verl's trainer (a critic-only or `algorithm.*` run sets
    neither `actor_rollout_ref` nor `data` with `trainer`): any of verl's groups, from a
    launch script's verl command (`hydra.verl_commands`) or an override file."""
    if is_script(doc.file):  # read from the arguments of a command that runs verl
        return bool(keys & set(VERL_ROOTS))
    return bool(keys) and keys <= set(VERL_ROOTS) and any(VERL_ENTRY in line for line in doc.lines)


def _near_deepspeed(keys: set[str]) -> bool:
    import difflib  # only files with no known key get here

    return any(difflib.get_close_matches(key, DS_MARKERS, n=1, cutoff=0.85) for key in keys)


def read_file(path: Path, *, keep_last: bool = False) -> Document:
    """Read and parse a config file of any kind distrecipe knows (see `read`)."""
    return read(path, read_text(path), keep_last=keep_last)


def read(path: Path, text: str, *, keep_last: bool = False) -> Document:
    """Parse `text` by its file's suffix: JSON fast, YAML carefully, overrides line by line;
    `keep_last`: a YAML key written twice is recorded, not refused (`source.parse_text`)."""
    name = str(path)
    suffix = path.suffix.lower()
    if suffix in OVERRIDE_SUFFIXES:
        if is_script(name) and "openrlhf.cli." in text and (command := read_openrlhf_command(text, name)):
            return command
        if is_script(name) and "trl " in text and (command := read_trl_command(text, name)):
            return command
        overrides = read_overrides(text, name)
        if overrides.data or not is_script(name):
            return overrides
        return script_arguments(text, name) or overrides
    return parse_text(text, name, keep_last=keep_last)


STREAM_KINDS: frozenset[Kind] = frozenset({"trainjob", "rayjob", "pytorchjob", "skypilot"})
"""The kinds whose reader takes a stream of several YAML documents: `kubectl apply` a
manifest file's objects, `sky launch` a pipeline's tasks. Every other tool reads one
(`yaml.safe_load`, OmegaConf) and refuses a stream."""


DUPLICATE_KEYS: dict[Kind, tuple[str, str | None]] = {
    "accelerate": ("Accelerate's loader (yaml.safe_load)", None),
    "hf": ("HfArgumentParser.parse_yaml_file (yaml.safe_load)", None),
    "axolotl": ("Axolotl's loader (yaml.safe_load)", None),
    "skypilot": ("SkyPilot's loader (yaml.safe_load)", None),
    "trl": ("TrlParser (yaml.safe_load)", None),
    "openrlhf": ("argparse", None),
    "verl": ("verl's loader (OmegaConf)", "found duplicate key {key}"),
    "llamafactory": ("LLaMA-Factory's loader (OmegaConf)", "found duplicate key {key}"),
    "trainjob": ("kubectl", 'mapping key "{key}" already defined at line {line}'),
    "rayjob": ("kubectl", 'mapping key "{key}" already defined at line {line}'),
    "pytorchjob": ("kubectl", 'mapping key "{key}" already defined at line {line}'),
    "deepspeed": ("DeepSpeed's loader", "Duplicate keys in DeepSpeed config: ['{key}']"),
    "recipe": ("distrecipe", "duplicate key '{key}' (first defined at line {line})"),
}
"""Who reads a YAML file of each kind, and what it says of a key written twice in one mapping:
None where it keeps the last value silently (PyYAML's `yaml.safe_load`), else its refusal
(OmegaConf's loader, kubectl's, DeepSpeed's `dict_raise_error_on_duplicate_keys`, the recipe
loader's), with `{key}` and the first one's `{line}`."""


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


DS_REFERRERS: tuple[Kind, ...] = ("accelerate", "hf", "axolotl", "llamafactory")
"""The kinds that name a ds_config."""


def ds_reference(kind: Kind | None, data: Any) -> str | None:
    """The ds_config an Accelerate (`deepspeed_config_file`), HF, Axolotl or LLaMA-Factory
    (`deepspeed`) config names."""
    path = ("deepspeed_config", "deepspeed_config_file") if kind == "accelerate" else ("deepspeed",)
    ref = get(data, *path) if kind in DS_REFERRERS else None
    return ref if isinstance(ref, str) and ref else None


def referenced_path(referrer: Path, ref: str) -> Path:
    """Where a config's reference to another file points.

    The engines open it relative to the directory the job is launched from, which
    is usually where lint runs too (the repository root); a path relative to the
    referring file's own directory is tried first, as configs kept side by side use it.
    """
    beside = referrer.parent / ref
    return beside if is_file(beside) or not is_file(Path(ref)) else Path(ref)


@cache
def repository_root(directory: Path) -> Path | None:
    """The nearest directory at or above `directory` holding `.git` (a checkout's root)."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def launched_path(referrer: Path, ref: str) -> Path:
    """Where a tool that opens paths from the directory it runs in (Axolotl, LLaMA-Factory:
    the repository's root) finds `ref` named in `referrer`: under the referrer's repository
    when it is there, else from the working directory."""
    root = repository_root(Path(os.path.abspath(referrer.parent)))
    if root is not None and is_file(root / ref):
        return root / ref
    return Path(ref)


def is_file(path: Path) -> bool:
    """`path.is_file()`, and False for names no file can have (too long, NUL, surrogates)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """`path.is_dir()`, and False for names no directory can have, as `is_file`."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False
