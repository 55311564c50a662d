"""Everything a launch decides before the job starts: configs, program, hosts, run directory.

Pure functions of the resolved `Plan` and the environment, so `launch --dry-run`
shows exactly what a real launch would run. Messages for the user go through `say`
(the command prints them) rather than being printed here, which keeps this layer free
of the command line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.findings import Finding
from distrecipe.launch.detect import local_port
from distrecipe.launch.launchers.verl import ENTRY as VERL_ENTRY
from distrecipe.launch.rundir import default_run_dir
from distrecipe.launch.secrets import REDACTED, is_secret, redact_argv
from distrecipe.launch.slurm import Allocation
from distrecipe.launch.spec import TINY_TRAINER, LaunchRequest, LaunchSpec, Program
from distrecipe.recipe import Plan
from distrecipe.translator.targets import TARGETS, EmitOptions

Say = Callable[[str], None]
"""Where a one-line note for the user goes (the command prints it to stderr)."""


def emitted_targets(plan: Plan) -> tuple[str, ...]:
    """Which emitters' files the backend's job reads.

    torchrun carries no engine config of its own, but a ZeRO plan's script (the
    reference trainer included) still reads DeepSpeed's.
    """
    backend = plan.launch.backend
    if backend == "deepspeed" or (backend == "torchrun" and plan.strategy == "zero"):
        return ("deepspeed",)
    if backend in ("accelerate", "accelerate-deepspeed"):
        return ("accelerate",)  # on the DeepSpeed path it also writes the ds_config it names
    if backend == "verl":
        return ("verl",)
    return ()


@dataclass(frozen=True, slots=True)
class Configs:
    """The config files the job reads, and the emitters' inexact-mapping findings."""

    files: dict[str, str]
    findings: tuple[Finding, ...]


def emit_configs(plan: Plan) -> Configs:
    """Every config file the job reads.

    An emitter that cannot express the recipe raises (`equivalence.refuse_errors`), so
    what comes back here are warnings and notes only.
    """
    files: dict[str, str] = {}
    findings: list[Finding] = []
    for name in emitted_targets(plan):
        output = TARGETS[name](plan, EmitOptions())
        findings += output.findings
        files.update(output.files)
    return Configs(files, tuple(findings))


def parse_program(plan: Plan, words: Sequence[str]) -> Program:
    """The program after `--` (`script.py args…` or `-m module args…`), else the recipe's.

    verl's program is its own PPO entry point: words after `--` are further Hydra
    overrides unless they start with `-m module` (a custom entry). Without a program,
    every other backend runs the reference trainer.
    """
    if words and plan.launch.backend == "verl" and words[0] != "-m":
        return Program(target=VERL_ENTRY, module=True, args=tuple(words))
    if words:
        if words[0] == "-m":
            if len(words) < 2:
                raise LaunchError("-m needs a module name")
            return Program(target=words[1], module=True, args=tuple(words[2:]))
        return Program(target=words[0], args=tuple(words[1:]))
    if plan.launch.script is not None:
        return Program(target=plan.launch.script, args=plan.launch.args)
    if plan.launch.backend == "verl":
        return Program(target=VERL_ENTRY, module=True, args=plan.launch.args)
    return Program(target=TINY_TRAINER, module=True, args=plan.launch.args)


def run_directory(plan: Plan, *, run_dir: str | None, runs_root: str, node_rank: int | None,
                  environ: Mapping[str, str]) -> Path:
    """The run directory asked for, else one per job (and per node inside SLURM)."""
    if run_dir:
        return Path(run_dir).resolve()
    allocation = Allocation.from_env(environ)
    return default_run_dir(
        Path(runs_root), plan.name, slurm_run=allocation.run_key if allocation else None,
        node_rank=node_rank if node_rank is not None else (allocation.node_rank if allocation else 0),
    ).resolve()


def build_request(plan: Plan, *, program: Program, run_dir: Path, configs: dict[str, str],
                  node_rank: int | None, environ: Mapping[str, str], probe_port: bool,
                  say: Say) -> LaunchRequest:
    """Node rank, master and hosts: the command line, the recipe, then SLURM, then one node.

    With `probe_port` (a real launch), a one-node job whose port is taken moves to a free
    one; without it (a dry run), missing multi-node hosts are shown as placeholders.
    """
    allocation = Allocation.from_env(environ)
    if allocation and len(allocation.hosts) < plan.nodes:
        raise LaunchError(f"the recipe asks for {plan.nodes} nodes, the SLURM allocation has "
                          f"{len(allocation.hosts)}: {', '.join(allocation.hosts)}")
    rank = node_rank if node_rank is not None else (allocation.node_rank if allocation else 0)
    if not 0 <= rank < plan.nodes:
        raise LaunchError(f"node rank {rank} is outside the recipe's {plan.nodes} node(s)")
    master = plan.launch.master_addr or (allocation.master_addr if allocation else None)
    hosts = allocation.hosts if allocation else ()
    if not probe_port and plan.nodes > 1 and not hosts:
        # A dry run on a laptop still shows the multi-node command's exact shape, with
        # host names that cannot be mistaken for real ones.
        hosts = tuple(f"<node-{i}>" for i in range(plan.nodes))
        master = master or hosts[0]
        say(f"distrecipe: dry run outside a SLURM allocation: the {plan.nodes} hosts are shown as "
            f"{hosts[0]}..{hosts[-1]}")
    port = plan.launch.master_port
    if plan.nodes == 1:
        master = master or "127.0.0.1"
        if probe_port and (free := local_port(port)) != port:
            say(f"distrecipe: port {port} is taken here; this one-node job uses {free}")
            port = free
    return LaunchRequest(
        plan=plan, program=program, run_dir=run_dir, configs=configs, node_rank=rank,
        master_addr=master, master_port=port,
        hosts=hosts,
        per_node=allocation.per_node if allocation else False,
        environ=dict(environ),
    )


def slurm_argv(plan: Plan, *, recipe: str, overrides: Sequence[str], runs_root: str,
               timeout: float | None, program: Sequence[str]) -> list[str]:
    """The `distrecipe launch` each node of an sbatch job runs: this launch, pinned down.

    Paths become absolute (the batch job starts elsewhere) and the backend is spelled
    out, so every node runs what this command resolved.
    """
    if plan.launch.backend == "verl" and plan.nodes > 1:
        raise LaunchError("--slurm with verl: verl runs from node 0 on a Ray cluster; start Ray on "
                          "every node (ray start) and launch on node 0 with RAY_ADDRESS set")
    argv = ["distrecipe", "launch", str(Path(recipe).resolve())]
    argv += [word for key in overrides for word in ("--set", key)]
    argv += ["--target", plan.launch.backend, "--runs-root", str(Path(runs_root).resolve())]
    argv += ["--timeout", str(timeout)] if timeout is not None else []
    argv += ["--", *program] if program else []
    return argv


def dry_run_text(spec: LaunchSpec, run_dir: Path, files: Sequence[str]) -> str:
    """Exact argv and added env as JSON, plus a copy-pasteable shell line; secrets redacted."""
    env = {name: REDACTED if is_secret(name, value) else value for name, value in spec.env.items()}
    argv = redact_argv(spec.argv)
    return json.dumps({
        "argv": argv,
        "env": env,
        "run_dir": str(run_dir),
        "files": sorted(files),
        "shell": shlex.join(["env", *[f"{name}={value}" for name, value in env.items()], *argv]),
    }, indent=2)
