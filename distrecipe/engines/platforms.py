"""Job files of the platforms that run a training on many machines, as configs to review.

A Kubeflow TrainJob, a KubeRay RayJob, a PyTorchJob or a SkyPilot task in a repository
says how many nodes a job gets, how many processes (or GPUs) each, and which command
runs on them; that command names the ds_config, the Accelerate YAML, the recipe or the
verl overrides the job trains with. So a job file gives those configs their world, and
the counts on both sides must agree (lint's DR397). This module reads both: the world
(`job_world`) and the commands, as shell words with their positions in the file
(`job_commands`): a manifest's `command`/`args` list (a `sh -c SCRIPT` read as the
script), a RayJob's `entrypoint` and a SkyPilot task's `run`, both shell text.

SkyPilot's task keys are its own schema's (`sky.utils.schemas.get_task_schema`, 0.14.1);
`resources.accelerators` is `NAME:COUNT`, a `{NAME: COUNT}` mapping, or a list of
choices (`any_of`, `ordered`), and `run` runs on every one of `num_nodes` nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from distrecipe.engines.k8s import ManifestKind, gpus, kind_of, nodes_and_processes
from distrecipe.engines.shell import Word, commands
from distrecipe.errors import Position
from distrecipe.keys import CLOSE, get, integer, section
from distrecipe.overrides import split_override
from distrecipe.source import Document, KeyPath

PlatformKind = Literal["trainjob", "rayjob", "pytorchjob", "skypilot"]
PLATFORMS: frozenset[str] = frozenset({"trainjob", "rayjob", "pytorchjob", "skypilot"})

SKYPILOT_KEYS = frozenset({
    "_metadata", "api_server_access", "config", "envs", "event_callback", "file_mounts",
    "file_mounts_mapping", "inputs", "managed_secrets", "name", "num_nodes", "outputs", "pool",
    "resources", "run", "secrets", "service", "setup", "volume_mounts", "volumes", "workdir",
})
"""A SkyPilot task's top-level keys (its task schema, SkyPilot 0.14.1)."""
SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
LAUNCH_FLAGS = frozenset({"--dry-run", "--slurm", "--k8s", "--skypilot", "--allow-override", "--exclusive",
                          "--help"})
"""`distrecipe launch`'s options that take no value (every other one takes the next word)."""


def platform_kind(data: Any) -> PlatformKind | None:
    """A manifest by its `apiVersion` and `kind`; a SkyPilot task by its keys (the task
    schema's, or a near-certain misspelling of one, which `sky launch` refuses: lint's
    DR399), with `run`, or `num_nodes` with `resources`."""
    manifest: ManifestKind | None = kind_of(data)
    if manifest is not None:
        return manifest
    if not isinstance(data, dict) or not data or not all(_skypilot_key(key) for key in data):
        return None
    if isinstance(data.get("run"), str) or ("num_nodes" in data and "resources" in data):
        return "skypilot"
    return None


def _skypilot_key(key: object) -> bool:
    if key in SKYPILOT_KEYS:
        return True
    import difflib

    return isinstance(key, str) and bool(difflib.get_close_matches(key, SKYPILOT_KEYS, n=1, cutoff=CLOSE))


@dataclass(frozen=True, slots=True)
class World:
    """A job's nodes and processes per node, and where the file says each."""

    nodes: int | None
    per_node: int | None
    said: str

    @property
    def ranks(self) -> int | None:
        return self.nodes * self.per_node if self.nodes and self.per_node else None


def job_world(kind: PlatformKind, data: dict[str, Any]) -> World:
    """The job's world. A TrainJob whose processes torchrun decides (`auto`) runs one per
    GPU of its `resourcesPerNode`; a RayJob's is its workers × their GPUs (what verl's
    `trainer.nnodes × n_gpus_per_node` must fit in)."""
    if kind == "skypilot":
        count = accelerator_count(get(data, "resources"))
        nodes = data.get("num_nodes", 1)
        return World(integer(nodes), count, "num_nodes × resources.accelerators")
    nodes, per_node, said = nodes_and_processes(kind, data)
    if kind == "trainjob" and per_node is None:
        per_node = gpus(get(data, "spec", "trainer", "resourcesPerNode")) or None
        said = "numNodes × the GPUs of resourcesPerNode (numProcPerNode auto)"
    return World(nodes, per_node, said)


def accelerator_count(resources: Any) -> int | None:
    """The accelerators per node `resources` asks for; None when unstated or the choices differ."""
    if not isinstance(resources, dict):
        return None
    choices = [r for key in ("any_of", "ordered") for r in (resources.get(key) or [])
               if isinstance(resources.get(key), list)]
    if choices:
        counts = {accelerator_count({**resources, **c, "any_of": None, "ordered": None})
                  for c in choices if isinstance(c, dict)}
        return counts.pop() if len(counts) == 1 else None
    written = resources.get("accelerators")
    options = written if isinstance(written, list) else [written]
    counts = {_count(option) for option in options}
    return counts.pop() if len(counts) == 1 else None


def _count(written: Any) -> int | None:
    if isinstance(written, dict) and len(written) == 1:
        value = next(iter(written.values()))
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1 \
            else 1 if value is None else None
    if isinstance(written, str) and written:
        _, colon, count = written.partition(":")
        if not colon:
            return 1
        try:
            number = float(count)
        except ValueError:
            return None
        return int(number) if number >= 1 else None
    return None


def job_commands(kind: PlatformKind, doc: Document) -> list[list[Word]]:
    """Every command the job runs, as words positioned in the file."""
    data = doc.data if isinstance(doc.data, dict) else {}
    if kind == "skypilot":
        return _script(doc, ("run",))
    if kind == "rayjob":
        return _script(doc, ("spec", "entrypoint"))
    found: list[list[Word]] = []
    for container in _containers(kind, data):
        words = [*_listed(doc, (*container, "command")), *_listed(doc, (*container, "args"))]
        if len(words) >= 3 and (words[0].value or "").rsplit("/", 1)[-1] in SHELLS and (
                words[1].value or "").startswith("-") and "c" in (words[1].value or ""):
            found += _script(doc, _listed_path(doc, (*container, "command"), (*container, "args"), 2))
        elif words:
            found.append(words)
    return found


def _containers(kind: PlatformKind, data: dict[str, Any]) -> list[KeyPath]:
    if kind == "trainjob":
        return [("spec", "trainer")]
    replicas = section(data, "spec", "pytorchReplicaSpecs")
    out: list[KeyPath] = []
    for role in replicas:
        containers = get(replicas, role, "template", "spec", "containers")
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            if isinstance(container, dict) and container.get("name") == "pytorch":
                out.append(("spec", "pytorchReplicaSpecs", role, "template", "spec", "containers", index))
        if out:
            break  # the Master (or the first role): every replica runs the same command
    return out


def _listed(doc: Document, path: KeyPath) -> list[Word]:
    items = _at(doc.data, path)  # through the containers list: `keys.get` reads mappings only
    out = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        text = str(item) if isinstance(item, (str, int, float)) and not isinstance(item, bool) else ""
        # the kubelet replaces $(VAR) with the container's variable: unknown here
        out.append(Word(text, None if "$(" in text else text, doc.where((*path, index))))
    return out


def _listed_path(doc: Document, command: KeyPath, args: KeyPath, index: int) -> KeyPath:
    """The path of the `index`-th word of `command + args`."""
    written = _at(doc.data, command)
    count = len(written) if isinstance(written, list) else 0
    return (*command, index) if index < count else (*args, index - count)


def _script(doc: Document, path: KeyPath) -> list[list[Word]]:
    """A shell script held in one YAML string, its words positioned in the file."""
    text = _at(doc.data, path)
    if not isinstance(text, str):
        return []
    at = doc.where(path)
    return [[Word(w.text, w.value, _shifted(doc, at, w.where)) for w in command]
            for command in commands(text, doc.file)]


def _at(data: Any, path: KeyPath) -> Any:
    """The value at `path`, through lists too (`keys.get` reads mappings only)."""
    for part in path:
        listed = isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data)
        if not (listed or (isinstance(data, dict) and part in data)):
            return None
        data = data[part]
    return data


def _shifted(doc: Document, at: Position, inside: Position) -> Position:
    """A position in a script string as a position in the file the string is written in."""
    line = doc.lines[at.line - 1] if 0 < at.line <= len(doc.lines) else ""
    indicator = line[at.col - 1: at.col]
    if indicator in ("|", ">"):  # `run: |`: the script starts on the next line, indented
        following = doc.lines[at.line] if at.line < len(doc.lines) else ""
        indent = len(following) - len(following.lstrip(" "))
        return Position(doc.file, at.line + inside.line, inside.col + indent)
    quoted = indicator in ("'", '"')
    return Position(doc.file, at.line + inside.line - 1,
                    inside.col + (at.col - 1 + quoted if inside.line == 1 else 0))


def named_recipe(words: list[Word]) -> Word | None:
    """The recipe of a `distrecipe launch RECIPE` (or `python -m distrecipe launch RECIPE`)."""
    values = [w.value or "" for w in words]
    start = 1 if values and values[0].rsplit("/", 1)[-1] == "distrecipe" else (
        3 if len(values) > 2 and values[0].rsplit("/", 1)[-1].startswith("python") and values[1:3] == [
            "-m", "distrecipe"] else None)
    if start is None or values[start: start + 1] != ["launch"]:
        return None
    index = start + 1
    while index < len(words):
        value = words[index].value
        if value is None or value == "--":
            return None
        if not value.startswith("-"):
            return words[index]
        index += 1 if "=" in value or value in LAUNCH_FLAGS else 2
    return None


def verl_overrides(words: list[Word]) -> dict[str, Word] | None:
    """The `key=value` overrides of `python -m verl.trainer.main_ppo …`, by key (None when
    the command is not verl's)."""
    values = [w.value or "" for w in words]
    if "verl.trainer.main_ppo" not in values[1:3] and not any(v.endswith("main_ppo.py") for v in values[:2]):
        return None
    found: dict[str, Word] = {}
    for word in words:
        item = None if word.value is None else split_override(word.value)
        if item is not None and item.prefix != "~" and item.value is not None:  # a deletion sets nothing
            found[item.key] = Word(word.text, item.value, word.where)
    return found
