"""The run directory: what was started, with what, and how it ended.

Written before the job starts, so a job that hangs or is killed still leaves its
provenance: the resolved plan (`plan.json`, also the reference trainer's input),
the recipe text as written, every emitted config, and `run.json` with argv, the
environment the job got, the versions of distrecipe and the engines, and start time;
end time and exit code are added when it ends. Secrets (`launch/secrets.py`) are
redacted in all of them: the environment, argv, and `launch.args` wherever it is
written (the plan, the recipe text, the `--set` overrides).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from distrecipe import __version__
from distrecipe.errors import LaunchError
from distrecipe.launch.secrets import REDACTED, redact_argv, redact_env
from distrecipe.output import to_json, write_files
from distrecipe.recipe import RL, Buckets, Launch, Model, Native, Offload, Optimizer, Plan, Slurm

ENGINES = ("torch", "deepspeed", "accelerate", "transformers", "verl", "ray")
RUN_RECORD = "run.json"
PLAN_FILE = "plan.json"
RECIPE_FILE = "recipe.yaml"
WRITTEN = (PLAN_FILE, RECIPE_FILE, RUN_RECORD)
"""What `RunDir.start` writes besides the emitted configs (a dry run lists them too)."""


def versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata (importing an engine costs seconds)."""
    found: dict[str, str | None] = {"distrecipe": __version__}
    for name in ENGINES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def plan_json(plan: Plan) -> str:
    """The resolved plan as JSON: every field, plus the derived world size."""
    data = dataclasses.asdict(plan)
    data["world"] = plan.world
    return to_json(data)


SECTIONS: dict[str, type[Any]] = {"offload": Offload, "model": Model, "optimizer": Optimizer,
                                  "rl": RL, "launch": Launch, "buckets": Buckets, "native": Native}
"""The Plan's fields that are sections, rebuilt from their JSON objects by `read_plan`."""


def read_plan(text: str) -> Plan:
    """The Plan `plan_json` wrote (JSON lists back to the sections' tuples)."""
    data: dict[str, Any] = json.loads(text)
    data.pop("world")  # derived, a property of the Plan
    data["launch"]["slurm"] = Slurm(**data["launch"]["slurm"])
    for key, section in SECTIONS.items():
        if data[key] is not None:
            data[key] = section(**{k: tuple(v) if isinstance(v, list) else v for k, v in data[key].items()})
    return Plan(**data)


ARGS_PATH = ("launch", "args")
WITHHELD = ("# distrecipe: the recipe text is withheld from the run directory: its launch.args could\n"
            "# not be redacted in place; plan.json has the resolved recipe, secrets redacted.\n")
"""What `recipe.yaml` holds instead of a text whose secrets could not be located (see
`redact_args_yaml`): the copy is for reading, the plan is what the job used."""


def redact_plan(plan: Plan) -> Plan:
    """The plan with the secrets in `launch.args` replaced (`redact_argv`)."""
    args = tuple(redact_argv(plan.launch.args))
    return dataclasses.replace(plan, launch=dataclasses.replace(plan.launch, args=args))


def redact_args_yaml(text: str, path: tuple[str, ...]) -> str | None:
    """YAML `text` with the secrets in the argument list at `path` rewritten in place.

    Each hidden word's scalar becomes a quoted string (`redact_argv`'s replacement);
    the rest of the text is kept character for character, comments included, so the
    copy still reads as what the user wrote. None when the result still holds a secret
    there (the list is reached some way this does not follow: a merge key) or the text
    is JSON that YAML cannot read (a key over 1,024 characters).
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        for key in path:
            node = _child(node, key)
        if isinstance(node, yaml.SequenceNode) and all(isinstance(n, yaml.ScalarNode) for n in node.value):
            hidden = redact_argv([item.value for item in node.value])
            edits = {(item.start_mark.index, item.end_mark.index, word)
                     for item, word in zip(node.value, hidden, strict=True) if word != item.value}
            for start, end, word in sorted(edits, reverse=True):
                span = text[start:end]
                text = text[:start] + json.dumps(word) + span[len(span.rstrip()):] + text[end:]
        data = yaml.safe_load(text)
        for key in path:
            data = data.get(key) if isinstance(data, dict) else None
    except (yaml.YAMLError, RecursionError):
        return None
    if isinstance(data, list) and redact_argv([str(word) for word in data]) != [str(word) for word in data]:
        return None
    return text


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            named = isinstance(key_node, yaml.ScalarNode) and key_node.value == key
            if named and isinstance(value, yaml.Node):
                return value
    return None


def redact_override(item: str) -> str:
    """A `--set KEY=VALUE` as recorded: a value that sets `launch.args` (or `launch`) redacted."""
    key, sep, value = item.partition("=")
    path = tuple(part.strip() for part in key.split("."))
    if not sep or path != ARGS_PATH[: len(path)]:
        return item
    redacted = redact_args_yaml(value, ARGS_PATH[len(path):])
    return f"{key}={REDACTED if redacted is None else redacted}"


def default_run_dir(root: Path, name: str, *, slurm_run: str | None = None, node_rank: int = 0) -> Path:
    """`runs/<name>-<UTC time>-<pid>`, or per SLURM run and node (nodes may share a disk).

    `slurm_run` is `Allocation.run_key`: every node of one run computes the same name
    without talking to the others, and a requeued job or a later step gets a new one.
    """
    if slurm_run is not None:
        path = root / f"{name}-slurm{slurm_run}" / f"node{node_rank}"
    else:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = root / f"{name}-{stamp}-{os.getpid()}"
    # The name is a slug by the schema and SLURM's ids are numbers, but the directory
    # is where the run writes: it is checked, resolved, to lie inside the runs root.
    inside = root.resolve()
    if inside not in path.resolve().parents:
        raise LaunchError(f"run directory {path} would lie outside the runs root {inside}")
    return path


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class RunDir:
    """One run's directory; `start` writes everything, `finish` records the outcome."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.record: dict[str, Any] = {}
        self._started = 0.0

    def start(self, *, plan: Plan, recipe_text: str, files: Mapping[str, str],
              argv: tuple[str, ...], env: Mapping[str, str], cwd: str,
              overrides: Sequence[str] = (), overridden: Sequence[Mapping[str, str]] = (),
              program_kind: Mapping[str, str] | None = None) -> None:
        if self.path.exists() and any(self.path.iterdir()):
            raise LaunchError(f"run directory {self.path} already holds a run; choose another --run-dir")
        self._started = time.monotonic()
        redacted = redact_args_yaml(recipe_text, ARGS_PATH)
        self.record = {
            "argv": redact_argv(argv),
            "cwd": cwd,
            "overrides": [redact_override(item) for item in overrides],
            "program_kind": dict(program_kind or {}),
            "overridden": [dict(item) for item in overridden],
            "env": redact_env(env),
            "versions": versions(),
            "start": now(),
            "end": None,
            "exit_code": None,
        }
        write_files(self.path, {
            **files,
            PLAN_FILE: plan_json(redact_plan(plan)),
            RECIPE_FILE: WITHHELD if redacted is None else redacted,
            RUN_RECORD: self._text(),
        })

    def finish(self, exit_code: int, *, signal: str | None = None, timed_out: bool = False) -> None:
        self.record.update(end=now(), seconds=round(time.monotonic() - self._started, 3),
                           exit_code=exit_code, signal=signal, timed_out=timed_out)
        write_files(self.path, {RUN_RECORD: self._text()})

    def _text(self) -> str:
        return to_json(self.record)
