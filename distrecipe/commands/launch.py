"""`distrecipe launch`: recipe → emitted configs → the engine's own launcher, supervised.

Order matters for provenance: resolve, emit, build the exact argv, write the run
directory, and only then start the job, so even a job that never gets going leaves
a record of what was attempted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import get_args

import click

from distrecipe.api import load_plan
from distrecipe.commands.options import overrides_option, recipe_argument
from distrecipe.errors import LaunchError
from distrecipe.launch.detect import local_port
from distrecipe.launch.launchers import LAUNCHERS
from distrecipe.launch.launchers.verl import ENTRY as VERL_ENTRY
from distrecipe.launch.rundir import WRITTEN, RunDir, default_run_dir
from distrecipe.launch.slurm import Allocation, batch_script
from distrecipe.launch.spec import TINY_TRAINER, LaunchRequest, LaunchSpec, Program
from distrecipe.launch.supervise import LAUNCH_ID, new_launch_id, supervise
from distrecipe.recipe import Backend, Plan
from distrecipe.source import read_text
from distrecipe.translator.targets import TARGETS, EmitOptions

NOT_STARTED = 127
"""Recorded as the exit code when the launcher itself could not be started (the shell's code)."""
BACKENDS: tuple[Backend, ...] = get_args(Backend)
"""The recipe's `launch.backend` vocabulary, offered as `--target`."""


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


def emit_configs(plan: Plan) -> dict[str, str]:
    """Every config file the job reads; warnings to stderr, errors refuse the launch."""
    files: dict[str, str] = {}
    for name in emitted_targets(plan):
        output = TARGETS[name](plan, EmitOptions())
        for finding in output.findings:
            click.echo(f"{plan.source}: {finding}", err=True)  # emitter findings have no position
        errors = [f.code for f in output.findings if f.severity == "error"]
        if errors:
            raise LaunchError(f"{name} cannot run this recipe ({', '.join(errors)})")
        files.update(output.files)
    return files


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


def load(recipe: str, overrides: Sequence[str], target: Backend | None,
         environ: Mapping[str, str]) -> Plan:
    """Resolve the recipe; GPUs are detected only when it says `gpus_per_node: auto`."""
    plan = load_plan(recipe, overrides, environ=environ, must_detect=True)
    if target is not None:
        plan = dataclasses.replace(plan, launch=dataclasses.replace(plan.launch, backend=target))
    return plan


def build_request(plan: Plan, *, program: Program, run_dir: Path, configs: dict[str, str],
                  node_rank: int | None, environ: Mapping[str, str], probe_port: bool) -> LaunchRequest:
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
        click.echo(f"distrecipe: dry run outside a SLURM allocation: the {plan.nodes} hosts are shown as "
                   f"{hosts[0]}..{hosts[-1]}", err=True)
    port = plan.launch.master_port
    if plan.nodes == 1:
        master = master or "127.0.0.1"
        if probe_port and (free := local_port(port)) != port:
            click.echo(f"distrecipe: port {port} is taken here; this one-node job uses {free}", err=True)
            port = free
    return LaunchRequest(
        plan=plan, program=program, run_dir=run_dir, configs=configs, node_rank=rank,
        master_addr=master, master_port=port,
        hosts=hosts,
        per_node=allocation.per_node if allocation else False,
        environ=dict(environ),
    )


def dry_run_text(spec: LaunchSpec, run_dir: Path, files: Sequence[str]) -> str:
    """Exact argv and added env as JSON, plus a copy-pasteable shell line."""
    assignments = [f"{name}={value}" for name, value in spec.env.items()]
    return json.dumps({
        "argv": list(spec.argv),
        "env": spec.env,
        "run_dir": str(run_dir),
        "files": sorted(files),
        "shell": shlex.join(["env", *assignments, *spec.argv]),
    }, indent=2)


def launch(*, recipe: str, program: Sequence[str] = (), overrides: Sequence[str] = (),
           target: Backend | None = None, run_dir: str | None = None, runs_root: str = "runs",
           node_rank: int | None = None, timeout: float | None = None, dry_run: bool = False,
           slurm: bool = False, environ: Mapping[str, str] | None = None) -> int:
    """Launch RECIPE's job (or describe it); returns the job's exit code."""
    env = dict(os.environ if environ is None else environ)
    plan = load(recipe, overrides, target, env)
    if slurm:
        if plan.launch.backend == "verl" and plan.nodes > 1:
            raise LaunchError("--slurm with verl: verl runs from node 0 on a Ray cluster; start Ray on "
                              "every node (ray start) and launch on node 0 with RAY_ADDRESS set")
        argv = ["distrecipe", "launch", str(Path(recipe).resolve())]
        argv += [word for key in overrides for word in ("--set", key)]
        argv += ["--target", plan.launch.backend, "--runs-root", str(Path(runs_root).resolve())]
        argv += ["--timeout", str(timeout)] if timeout is not None else []
        argv += ["--", *program] if program else []
        click.echo(batch_script(plan, argv), nl=False)
        return 0
    allocation = Allocation.from_env(env)
    path = Path(run_dir) if run_dir else default_run_dir(
        Path(runs_root), plan.name, slurm_run=allocation.run_key if allocation else None,
        node_rank=node_rank if node_rank is not None else (allocation.node_rank if allocation else 0))
    path = path.resolve()
    configs = emit_configs(plan)
    request = build_request(plan, program=parse_program(plan, program), run_dir=path, configs=configs,
                            node_rank=node_rank, environ=env, probe_port=not dry_run)
    spec = LAUNCHERS[plan.launch.backend](request)
    files = {**configs, **spec.files}
    if dry_run:
        click.echo(dry_run_text(spec, path, [*files, *WRITTEN]))
        return 0
    launch_id = new_launch_id()
    job_env = {**env, **spec.env, LAUNCH_ID: launch_id}
    record = RunDir(path)
    record.start(plan=plan, recipe_text=read_text(recipe), files=files,
                 argv=spec.argv, env=job_env, cwd=os.getcwd(), overrides=overrides)
    click.echo(f"distrecipe: run directory {path}", err=True)
    click.echo(f"distrecipe: {shlex.join(spec.argv)}", err=True)
    sys.stderr.flush()
    try:
        outcome = supervise(spec.argv, job_env, launch_id=launch_id, timeout=timeout)
    except LaunchError:
        record.finish(NOT_STARTED)
        raise
    record.finish(outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out)
    click.echo(f"distrecipe: exit code {outcome.exit_code}", err=True)
    return outcome.exit_code


@click.command("launch", context_settings={"ignore_unknown_options": True})
@recipe_argument
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
@overrides_option
@click.option("--target", "-t", type=click.Choice(BACKENDS), default=None,
              help="Launcher to use instead of the recipe's launch.backend.")
@click.option("--dry-run", is_flag=True, help="Print the exact argv and env as JSON; run and write nothing.")
@click.option("--slurm", is_flag=True, help="Print an sbatch script that runs this launch on every node.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Run directory (default: RUNS_ROOT/<name>-<time>-<pid>).")
@click.option("--runs-root", type=click.Path(file_okay=False), default="runs", show_default=True)
@click.option("--node-rank", type=click.IntRange(min=0), default=None,
              help="This node's rank (default: SLURM_NODEID inside SLURM, else 0).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds before the job is stopped (exit code 124).")
def command(recipe: str, program: tuple[str, ...], overrides: tuple[str, ...], target: str | None,
            dry_run: bool, slurm: bool, run_dir: str | None, runs_root: str, node_rank: int | None,
            timeout: float | None) -> int:
    """Run RECIPE's job through its engine's own launcher.

    PROGRAM, after `--`, is `script.py ARGS...` or `-m module ARGS...` (for verl: more
    Hydra overrides). Without one, the reference trainer runs a real tiny training.
    The configs, argv, environment and outcome are recorded in a run directory first.
    Exit code: the job's; 128+N after signal N; 124 on --timeout.
    """
    backend = next((b for b in BACKENDS if b == target), None)  # click checked the choice
    return launch(recipe=recipe, program=program, overrides=overrides, target=backend, run_dir=run_dir,
                  runs_root=runs_root, node_rank=node_rank, timeout=timeout, dry_run=dry_run,
                  slurm=slurm)
