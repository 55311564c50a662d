"""`distrecipe launch`: recipe → emitted configs → the engine's own launcher, supervised.

Order matters for provenance: resolve, emit, build the exact argv, write the run
directory, and only then start the job, so even a job that never gets going leaves
a record of what was attempted. When it ends, `measured.json` records what it used
(`launch.measure`). What is decided before the start lives in
`launch.prepare`; this module runs it and reports.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import get_args

import click

from distrecipe.api import plan_of_recipe
from distrecipe.commands.echo import echo_findings, echo_name_note, lint_refusal
from distrecipe.commands.layouts import check_rollout_layout, check_split
from distrecipe.commands.lint import project_config
from distrecipe.commands.options import overrides_option, recipe_argument
from distrecipe.errors import LaunchError
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.launch.attempts import record_attempt
from distrecipe.launch.k8s import k8s_manifest
from distrecipe.launch.launchers import LAUNCHERS
from distrecipe.launch.measure import write_measured
from distrecipe.launch.prepare import (
    build_request,
    check_fit,
    check_program,
    check_program_file,
    choose_kind,
    dry_run_text,
    emit_configs,
    hand_off,
    one_node_port,
    parse_program,
    run_directory,
    slurm_argv,
)
from distrecipe.launch.resume import check as check_resume
from distrecipe.launch.resume import resume
from distrecipe.launch.rundir import WRITTEN, RunDir
from distrecipe.launch.secrets import redact_argv
from distrecipe.launch.skypilot import skypilot_task
from distrecipe.launch.slurm import batch_script
from distrecipe.launch.spec import executable
from distrecipe.launch.supervise import LAUNCH_ID, new_launch_id, supervise
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import Report, check_recipe, check_written
from distrecipe.recipe import Backend, K8sKind, ProgramKind
from distrecipe.source import Document, read_text
from distrecipe.translator.load import read_recipe
from distrecipe.translator.programs import script_duties
from distrecipe.translator.resolve import variant
from distrecipe.translator.targets import launch_world

NOT_STARTED = 127
"""Recorded as the exit code when the launcher itself could not be started (the shell's code)."""
BACKENDS: tuple[Backend, ...] = get_args(Backend)
"""The recipe's `launch.backend` vocabulary, offered as `--target`."""
KINDS: tuple[ProgramKind, ...] = get_args(ProgramKind)
"""The recipe's `launch.program_kind` vocabulary, offered as `--program-kind`."""


def load(recipe: str, overrides: Sequence[str], target: Backend | None,
         environ: Mapping[str, str]) -> tuple[Document, Plan]:
    """The recipe as written (overrides applied) and its plan; GPUs are detected only
    when it says `gpus_per_node: auto`."""
    document, declared = read_recipe(recipe, overrides)
    plan = plan_of_recipe(declared, environ=environ, must_detect=True)
    if target is not None:
        plan = variant(plan, "--target", launch={"backend": target})
    return document, plan


LEFT_TO_FIT = "DR370"
"""Lint's no-fit error, which `check_fit` decides for launch (with `--allow-no-fit`)."""
LEFT_TO_RESUME = "DR106"
"""Lint's checkpoint check, which `launch.resume` makes for launch (with the pickled states)."""


def check_lint(document: Document, plan: Plan, config: LintConfig) -> list[Finding]:
    """Lint's checks on the recipe, as `compile` runs them: an error refuses the launch, so
    launch never starts what compile would not write, and refuses the layouts compile
    refuses at their position. Returns what they said."""
    check_split(plan.recipe, plan)
    if plan.backend == "verl":
        check_rollout_layout(plan.recipe, plan)
    said = [f for f in check_recipe(document, plan, config) if f.code not in (LEFT_TO_FIT, LEFT_TO_RESUME)]
    _refuse(Report(said))
    return said


def check_configs(document: Document, plan: Plan, files: Mapping[str, str], said: list[Finding],
                  config: LintConfig) -> None:
    """Lint's checks on the config files the job reads, as `compile` runs them on what it
    writes; a fact `said` at the recipe is not repeated."""
    _refuse(check_written(files, recipe=document, said=said, config=config, world=launch_world(plan)))


def _refuse(report: Report) -> None:
    refused = lint_refusal(report, outcome="nothing launched")
    if refused is not None:
        raise LaunchError(refused)


def _say(line: str) -> None:
    click.echo(line, err=True)


def launch(*, recipe: str, program: Sequence[str] = (), overrides: Sequence[str] = (),
           target: Backend | None = None, run_dir: str | None = None, runs_root: str = "runs",
           node_rank: int | None = None, timeout: float | None = None, dry_run: bool = False,
           slurm: bool = False, skypilot: bool = False, k8s: bool = False,
           environ: Mapping[str, str] | None = None,
           program_kind: ProgramKind | None = None, allow_override: bool = False,
           allow_no_fit: bool = False) -> int:
    """Launch RECIPE's job (or describe it); returns the job's exit code."""
    env = dict(os.environ if environ is None else environ)
    document, plan = load(recipe, overrides, target, env)
    echo_name_note(plan)
    user_program = parse_program(plan, program)
    if not (slurm or skypilot or k8s):  # those files run the script on their nodes, which check it there
        check_program_file(plan, user_program, given=bool(program))
    plan, kind = choose_kind(plan, user_program, kind=program_kind, backend_given=target is not None)
    check_program(plan, kind.kind)
    fit = check_fit(plan, allow_no_fit=allow_no_fit, say=_say)
    config = project_config()
    said = check_lint(document, plan, config)
    elsewhere = slurm or skypilot or k8s  # the nodes' own launch opens the checkpoint's pickles
    found = check_resume(plan, kind.kind, user_program.args, cwd=Path.cwd(), deep=not elsewhere)
    if elsewhere and found is not None:
        _say(f"distrecipe: {found.said}")
    if slurm or skypilot:  # what every node's launch would refuse, refused before the nodes are booked
        hand_off(plan, user_program, kind.kind, run_dir=Path("/run"),
                 configs=emit_configs(plan, kind.kind).files, allow_override=allow_override)
    if slurm:
        argv = slurm_argv(plan, recipe=recipe, overrides=overrides, runs_root=runs_root,
                          timeout=timeout, program=program, program_kind=program_kind,
                          allow_override=allow_override, allow_no_fit=allow_no_fit)
        root = Path(runs_root).resolve()
        root.mkdir(parents=True, exist_ok=True)  # SLURM writes --output there and creates no directory
        script = batch_script(plan, argv, runs_root=root, chdir=Path.cwd(), ray=executable("ray"))
        click.echo(script, nl=False)
        return 0
    if skypilot:
        task, notes = skypilot_task(plan, kind.kind, recipe=recipe, overrides=overrides, runs_root=runs_root,
                                    timeout=timeout, program=program, program_kind=program_kind,
                                    allow_override=allow_override, cwd=Path.cwd(), allow_no_fit=allow_no_fit)
        for note in notes:
            _say(note)
        click.echo(task, nl=False)
        return 0
    if k8s:
        manifest, notes = k8s_manifest(plan, kind.kind, recipe=recipe, overrides=overrides, program=program,
                                       program_kind=program_kind, allow_override=allow_override,
                                       timeout=timeout, allow_no_fit=allow_no_fit)
        for note in notes:
            _say(note)
        click.echo(manifest, nl=False)
        return 0
    path = run_directory(plan, run_dir=run_dir, runs_root=runs_root, node_rank=node_rank, environ=env)
    configs = emit_configs(plan, kind.kind)
    echo_findings(plan.recipe.source, (*configs.findings, *script_duties(plan, kind.kind)))
    check_configs(document, plan, configs.files, said, config)
    _say(f"distrecipe: program kind {kind.kind}: {kind.reason}")
    user_program, given = hand_off(plan, user_program, kind.kind, run_dir=path, configs=configs.files,
                                   allow_override=allow_override)
    for item in given.overridden:
        _say(f"distrecipe: --allow-override: {item.argument} {item.given} replaces the recipe's "
             f"{item.recipe} ({item.key})")
    resumed = resume(plan, kind.kind, user_program, configs.files, cwd=Path.cwd(), found=found)
    user_program, configs = resumed.program, dataclasses.replace(configs, files=resumed.configs)
    if resumed.said:
        _say(f"distrecipe: {resumed.said}")
    if dry_run:
        request = build_request(plan, program=user_program, run_dir=path, configs=configs.files,
                                node_rank=node_rank, environ=env, dry_run=True, say=_say)
        spec = LAUNCHERS[plan.backend](request)
        click.echo(dry_run_text(spec, path, [*configs.files, *spec.files, *WRITTEN], kind))
        return 0
    with one_node_port(plan, say=_say) as port:  # held until the job has ended
        request = build_request(plan, program=user_program, run_dir=path, configs=configs.files,
                                node_rank=node_rank, environ=env, dry_run=False, say=_say,
                                held_port=port)
        spec = LAUNCHERS[plan.backend](request)
        launch_id = new_launch_id()
        job_env = {**env, **spec.env, LAUNCH_ID: launch_id}
        record = RunDir(path)
        record.start(plan=plan, recipe_text=read_text(recipe), files={**configs.files, **spec.files},
                     argv=spec.argv, env=job_env, cwd=os.getcwd(), overrides=overrides,
                     overridden=[dataclasses.asdict(item) for item in given.overridden],
                     program_kind=dataclasses.asdict(kind),
                     allocation=request.allocation.record() if request.allocation else None, fit=fit,
                     checkpoint=resumed.record or None)
        click.echo(f"distrecipe: run directory {path}", err=True)
        click.echo(f"distrecipe: {shlex.join(redact_argv(spec.argv))}", err=True)
        sys.stderr.flush()
        try:
            outcome = supervise(spec.argv, job_env, launch_id=launch_id, timeout=timeout, keep_output=path)
        except LaunchError:
            record.finish(NOT_STARTED)
            record_attempt(path, env, record.record)
            raise
        record.finish(outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out)
        record_attempt(path, env, record.record)
        write_measured(plan, peaks=outcome.peaks, run_dir=path, exit_code=outcome.exit_code)
    click.echo(f"distrecipe: exit code {outcome.exit_code}", err=True)
    return outcome.exit_code


@click.command("launch", context_settings={"ignore_unknown_options": True})
@recipe_argument
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
@overrides_option
@click.option("--target", "-t", type=click.Choice(BACKENDS), default=None,
              help="Launcher to use instead of the recipe's launch.backend.")
@click.option("--program-kind", type=click.Choice(KINDS), default=None,
              help="How the script reads the recipe (default: launch.program_kind, else inferred "
                   "from the script's imports).")
@click.option("--allow-override", is_flag=True,
              help="Let program arguments replace values the recipe decided (recorded in run.json).")
@click.option("--allow-no-fit", is_flag=True,
              help="Launch a recipe distrecipe plan says does not fit GPU memory (recorded in run.json).")
@click.option("--dry-run", is_flag=True, help="Print the exact argv and env as JSON; run and write nothing.")
@click.option("--slurm", is_flag=True, help="Print an sbatch script that runs this launch on every node.")
@click.option("--skypilot", is_flag=True, help="Print a SkyPilot task that runs this launch on every node "
              "(settings: --set launch.skypilot.accelerator|workdir|setup=...).")
@click.option("--k8s", is_flag=True, help="Print a Kubernetes manifest: a TrainJob, or a RayJob for verl.")
@click.option("--k8s-kind", type=click.Choice(get_args(K8sKind)), default=None,
              help="--k8s: the manifest (= --set launch.k8s.kind=...; pytorchjob is the legacy operator's).")
@click.option("--image", default=None, help="--k8s: the container image (= --set launch.k8s.image=...).")
@click.option("--partition", default=None, help="--slurm: the partition (= --set launch.slurm.partition=…).")
@click.option("--account", default=None, help="--slurm: the account (= --set launch.slurm.account=...).")
@click.option("--time", "time_limit", default=None,
              help="--slurm: the wall-time limit, e.g. 2-00:00:00 (= --set launch.slurm.time=...).")
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=None,
              help="--slurm: CPUs per node's launch (= --set launch.slurm.cpus_per_task=...).")
@click.option("--mem", default=None, help="--slurm: memory per node, 512G or 0 for all (= launch.slurm.mem).")
@click.option("--exclusive", is_flag=True, default=None, help="--slurm: whole nodes.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Run directory (default: RUNS_ROOT/<name>-<time>-<pid>).")
@click.option("--runs-root", type=click.Path(file_okay=False), default="runs", show_default=True)
@click.option("--node-rank", type=click.IntRange(min=0), default=None,
              help="This node's rank (default: the platform's, e.g. SLURM_NODEID, else 0).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds before the job is stopped (exit code 124).")
def command(recipe: str, program: tuple[str, ...], overrides: tuple[str, ...], target: str | None,
            dry_run: bool, slurm: bool, skypilot: bool, k8s: bool, k8s_kind: str | None, image: str | None,
            run_dir: str | None, runs_root: str, node_rank: int | None, timeout: float | None,
            program_kind: str | None, allow_override: bool, allow_no_fit: bool, partition: str | None,
            account: str | None, time_limit: str | None, cpus_per_task: int | None, mem: str | None,
            exclusive: bool | None) -> int:
    """Run RECIPE's job through its engine's own launcher.

    PROGRAM, after `--`, is `script.py ARGS...` or `-m module ARGS...` (for verl: more
    Hydra overrides). Without one, the reference trainer runs a real tiny training.
    The configs, argv, environment and outcome are recorded in a run directory first.
    Exit code: the job's; 128+N after signal N; 124 on --timeout.
    """
    backend = next((b for b in BACKENDS if b == target), None)  # click checked the choice
    if slurm + skypilot + k8s > 1:
        raise click.UsageError("--slurm, --skypilot and --k8s each print one platform's job: give one")
    kind = next((k for k in KINDS if k == program_kind), None)
    slurm_settings = {"partition": partition, "account": account, "time": time_limit,
                      "cpus_per_task": cpus_per_task, "mem": mem, "exclusive": "true" if exclusive else None}
    overrides += tuple(f"launch.slurm.{key}={value}" for key, value in slurm_settings.items()
                       if value is not None)
    overrides += tuple(f"launch.k8s.{key}={value}" for key, value in (("kind", k8s_kind), ("image", image))
                       if value is not None)
    return launch(recipe=recipe, program=program, overrides=overrides, target=backend, run_dir=run_dir,
                  runs_root=runs_root, node_rank=node_rank, timeout=timeout, dry_run=dry_run,
                  slurm=slurm, skypilot=skypilot, k8s=k8s, program_kind=kind, allow_override=allow_override,
                  allow_no_fit=allow_no_fit)
