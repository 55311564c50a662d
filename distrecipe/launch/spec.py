"""What a launcher builder gets and gives: a request in, an exact argv + env out.

Builders are pure functions of a `LaunchRequest` (no probing, no files written), so
`--dry-run` prints exactly what a real launch would run and tests can compare argv
lists without starting anything.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.launch.allocation import Allocation

TINY_TRAINER = "distrecipe.launch.tiny_train"
"""The reference trainer, run when neither the recipe nor the command line names a program."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Program:
    """The user's training program: a script path or a module, and its arguments."""

    target: str
    module: bool = False
    """Run `target` as `python -m target` (every launcher has a flag for that)."""
    args: tuple[str, ...] = ()
    """Its arguments: the user's, with what its kind reads from the recipe (`launch.handoff`)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables its kind reads (the run's plan and config paths)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchRequest:
    """Everything a builder needs; the caller has already read the platform and the recipe."""

    plan: Plan
    program: Program
    run_dir: Path
    """Where the emitted configs live; argv refers to files in it."""
    configs: dict[str, str] = field(default_factory=dict)
    """Emitted config file name → text, written into `run_dir` before the job starts."""
    node_rank: int = 0
    master_addr: str | None = "127.0.0.1"
    """Node 0's address; None when several nodes were asked for and nobody said where."""
    master_port: int = 29500
    hosts: tuple[str, ...] = ()
    """The allocation's host names in rank order (SLURM's, SkyPilot's), first one is node 0."""
    per_node: bool = False
    """True when distrecipe runs once on every node (a platform, or `--node-rank`): launchers
    start this node's ranks only, with `node_rank`, and never fan out."""
    environ: dict[str, str] = field(default_factory=dict)
    """The caller's environment, read (never copied into the spec) for user choices."""
    allocation: Allocation | None = None
    """The platform's allocation these ranks came from, for the run's record."""


    def master(self) -> str:
        """The rendezvous address, for the launchers that need one."""
        if self.master_addr is None:
            raise LaunchError(f"{self.plan.dims.nodes} nodes need launch.master_addr (node 0's address) "
                              "or a platform that names it (SLURM, SkyPilot, dstack, Kubeflow's "
                              "PET_MASTER_ADDR)")
        return self.master_addr


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchSpec:
    """The exact command: argv (never a shell string) and the variables it adds."""

    argv: tuple[str, ...]
    env: dict[str, str]
    """Only what distrecipe adds to the caller's environment."""
    files: dict[str, str] = field(default_factory=dict)
    """Extra files the builder needs in the run directory (e.g. a hostfile)."""


def executable(name: str) -> str:
    """A console script from this interpreter's environment first, then from PATH.

    The launcher must import the same torch/engine as the ranks it starts; a `deepspeed`
    from another environment on PATH would silently mix versions.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name) or name


def job_env(request: LaunchRequest) -> dict[str, str]:
    """Variables every launcher passes on: the run directory and files, CPU threading."""
    env = {"DISTRECIPE_RUN_DIR": str(request.run_dir), **request.program.env}
    if request.plan.recipe.cluster.device == "cpu" and "OMP_NUM_THREADS" not in request.environ:
        # N CPU ranks on one machine each default to every core; oversubscription makes
        # a 2-rank demo many times slower. torchrun sets 1, DeepSpeed sets nothing.
        cores = os.cpu_count() or 1
        env["OMP_NUM_THREADS"] = str(max(1, cores // request.plan.dims.gpus_per_node))
    return env


def program_argv(program: Program, module_flag: str) -> list[str]:
    """The program part of a launcher's argv: `[module_flag] target args...`."""
    return [*([module_flag] if program.module else []), program.target, *program.args]
