"""The run directory: what was started, with what, and how it ended.

Written before the job starts, so a job that hangs or is killed still leaves its
provenance: the resolved plan (`plan.json`, also the reference trainer's input),
the recipe text as written, every emitted config, and `run.json` with argv, the
environment the job got, the platform's allocation it ran in (`launch.allocation`),
the versions of distrecipe and the engines, and start time;
end time and exit code are added when it ends. Secrets (`launch/secrets.py`) are
redacted in what is written for reading: the environment, argv, `launch.args` in the
plan, and the recipe text and `--set` overrides wherever a secret stands in them
(`native`, a list of words, a comment). What the job itself reads keeps its values:
an emitted config and `plan.json`'s `native` hold a secret written there (DeepSpeed's
`comet.api_key`, the Trainer's `hub_token`), as the engine needs it.

The job's output is kept combined in `stdout.log` / `stderr.log` (`launch.output`), and
each rank's apart under `ranks/` where the launcher itself can split it while the
terminal still shows it:

* torchrun, and Accelerate (which hands `--log_dir`/`--tee` to torchrun):
  `ranks/<rdzv run id>_<random>/attempt_<restart>/<local rank>/stdout.log`, `stderr.log`
  (and `error.json` for a rank that raised), torch elastic's own layout
  (`DefaultLogsSpecs.reify`); the global rank is node rank × GPUs per node + local rank,
  and each node has its own run directory.
* combined only: DeepSpeed's launcher (its `--enable_each_rank_log` sends every rank's
  output to `<time>_rank<N>.log` instead of the terminal), verl and Ray (the driver
  collects the workers' output), the reference trainer under either launcher as theirs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from distrecipe import __version__
from distrecipe.errors import LaunchError
from distrecipe.job import Plan, plan_dict, plan_from_dict
from distrecipe.launch.recipe_text import redact_override, redact_recipe_yaml
from distrecipe.launch.secrets import redact_argv, redact_env
from distrecipe.output import to_json, write_files
from distrecipe.translator.resolve import variant

ENGINES = ("torch", "deepspeed", "accelerate", "transformers", "verl", "ray")
RUN_RECORD = "run.json"
PLAN_FILE = "plan.json"
RECIPE_FILE = "recipe.yaml"
RANK_LOGS = "ranks"
"""Each rank's stdout and stderr, where the launcher splits them (see the module docstring)."""
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
    """The resolved plan as JSON (`job.plan_dict`)."""
    return to_json(plan_dict(plan))


def read_plan(text: str) -> Plan:
    """The Plan `plan_json` wrote."""
    return plan_from_dict(json.loads(text))


WITHHELD = ("# distrecipe: the recipe text is withheld from the run directory: a secret in it could\n"
            "# not be redacted in place; plan.json has the resolved recipe.\n")
"""What `recipe.yaml` holds instead of a text whose secrets could not be located (see
`redact_recipe_yaml`): the copy is for reading, the plan is what the job used."""


def redact_plan(plan: Plan) -> Plan:
    """The plan with the secrets in `launch.args` replaced (`redact_argv`): the job gets its
    arguments on its command line, while `native` stays, since the job reads it from here
    (`api.current()`), as its engine reads the emitted configs."""
    args = tuple(redact_argv(plan.recipe.launch.args))
    return variant(plan, launch={"args": args})


def default_run_dir(root: Path, name: str, *, job_key: str | None = None, node_rank: int = 0) -> Path:
    """`runs/<name>-<UTC time>-<pid>`, or per platform run and node (nodes may share a disk).

    `job_key` is `Allocation.job_key` (`slurm77`, `skypilot-<task id>`): every node of one
    run computes the same name without talking to the others, and a requeued job or a
    later step gets a new one.
    """
    if job_key is not None:
        path = root / f"{name}-{job_key}" / f"node{node_rank}"
    else:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = root / f"{name}-{stamp}-{os.getpid()}"
    # The name is a slug by the schema and the platforms' ids are cleaned, but the directory
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
              program_kind: Mapping[str, str] | None = None,
              allocation: Mapping[str, object] | None = None,
              fit: Mapping[str, object] | None = None,
              checkpoint: Mapping[str, object] | None = None) -> None:
        if self.path.exists() and any(self.path.iterdir()):
            raise LaunchError(f"run directory {self.path} already holds a run; choose another --run-dir")
        self._started = time.monotonic()
        redacted = redact_recipe_yaml(recipe_text)
        self.record = {
            "argv": redact_argv(argv),
            "cwd": cwd,
            "overrides": [redact_override(item) for item in overrides],
            "program_kind": dict(program_kind or {}),
            "overridden": [dict(item) for item in overridden],
            "allocation": dict(allocation) if allocation is not None else None,
            "fit": dict(fit) if fit is not None else None,
            "checkpoint": dict(checkpoint) if checkpoint is not None else None,
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
        }, private=True)

    def finish(self, exit_code: int, *, signal: str | None = None, timed_out: bool = False) -> None:
        self.record.update(end=now(), seconds=round(time.monotonic() - self._started, 3),
                           exit_code=exit_code, signal=signal, timed_out=timed_out)
        write_files(self.path, {RUN_RECORD: self._text()}, private=True)

    def _text(self) -> str:
        return to_json(self.record)
