"""The world a config runs at: one value, `World(ranks, source)`, and every place that states it.

A file may state its own world (a recipe's cluster, Accelerate's `num_processes`, verl's
`trainer.*`, a launch script's launcher options); the user may state one (`--world`, or
`[tool.distrecipe] world` as the project's default); and the repository may say it
around the file (a launch script that names it, an Accelerate config that names it; for
the other kinds, an Accelerate config beside it). A ds_config has no world but what names
it: an Accelerate config beside it that names another ds_config, or none, runs another
job. Each file's worlds are read once per run, so one file is judged at one world. Lint
checks a file at the first of these, in that order, and keeps the others, so that two
that disagree are a finding (DR301, DR302) rather than one silently losing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from distrecipe.engines import Kind
from distrecipe.engines.platforms import PLATFORMS, job_world
from distrecipe.errors import Position
from distrecipe.keys import integer
from distrecipe.source import Document

WorldFrom = Literal["file", "option", "project", "launch", "named", "sibling"]
"""Who states a world: the file itself, `--world`, `[tool.distrecipe] world`, a launch
script that starts the file, an Accelerate config that names it (`deepspeed_config_file`),
or an Accelerate config beside it."""


@dataclass(frozen=True, slots=True)
class World:
    """A number of ranks and where lint read it (`--world`, `num_processes in acc.yaml`)."""

    ranks: int
    source: str
    """Where the number was read, for messages."""
    by: WorldFrom = "file"
    where: Position | None = None
    """The position of the statement, when it is in a file."""

    def __str__(self) -> str:
        return f"{self.ranks} from {self.source}"


def own_world(kind: Kind, doc: Document) -> World | None:
    """The world a file states about itself, at the key that says it."""
    data: Any = doc.data
    if not isinstance(data, dict):
        return None
    if kind in PLATFORMS:
        job = job_world(kind, data)  # type: ignore[arg-type]  # kind is a PlatformKind here
        return World(job.ranks, job.said, "file", doc.where(())) if job.ranks is not None else None
    if kind == "accelerate" and (n := integer(data.get("num_processes"))):
        return World(n, "num_processes", "file", doc.where(("num_processes",)))
    trainer = data.get("trainer") if kind == "verl" else None
    if isinstance(trainer, dict) and (gpus := integer(trainer.get("n_gpus_per_node"))):
        nodes = integer(trainer.get("nnodes")) or 1
        return World(nodes * gpus, "trainer.nnodes × trainer.n_gpus_per_node", "file",
                     doc.where(("trainer", "n_gpus_per_node")))
    cluster = data.get("cluster") if kind == "recipe" else None
    if isinstance(cluster, dict) and (gpus := integer(cluster.get("gpus_per_node"))):
        nodes = integer(cluster.get("nodes", 1)) or 1
        return World(nodes * gpus, f"cluster.nodes {nodes} × cluster.gpus_per_node {gpus}", "file",
                     doc.where(("cluster", "gpus_per_node")))
    return None


def chosen(worlds: tuple[World, ...]) -> World | None:
    """The world lint checks a file at: the first statement, in precedence order."""
    return worlds[0] if worlds else None
