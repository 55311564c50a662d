"""Everything a launch decides before the job starts: configs, program, hosts, run directory.

Pure functions of the resolved `Plan` and the environment, so `launch --dry-run`
shows exactly what a real launch would run. Messages for the user go through `say`
(the command prints them) rather than being printed here, which keeps this layer free
of the command line.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from distrecipe.engines.native import is_dir, is_file
from distrecipe.engines.runner import RAY_TRAINERS
from distrecipe.errors import LaunchError, RecipeError
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.keys import did_you_mean
from distrecipe.launch.allocation import Allocation, check_allocation, read_allocation
from distrecipe.launch.detect import hold_port
from distrecipe.launch.handoff import Handoff, handoff
from distrecipe.launch.kinds import KindChoice, backend_for, infer
from distrecipe.launch.launchers import GIVEN_PORT
from distrecipe.launch.rundir import default_run_dir
from distrecipe.launch.secrets import REDACTED, is_secret, redact_argv
from distrecipe.launch.spec import TINY_TRAINER, LaunchRequest, LaunchSpec, Program
from distrecipe.plan.fit import judgeable
from distrecipe.plan.report import estimate
from distrecipe.plan.units import GiB, gb
from distrecipe.recipe import ProgramKind
from distrecipe.translator.programs import refusal
from distrecipe.translator.resolve import variant
from distrecipe.translator.targets import TARGETS, EmitOptions, emitted_targets

Say = Callable[[str], None]
"""Where a one-line note for the user goes (the command prints it to stderr)."""


@dataclass(frozen=True, slots=True)
class Configs:
    """The config files the job reads, and the emitters' inexact-mapping findings."""

    files: dict[str, str]
    findings: tuple[Finding, ...]


def emit_configs(plan: Plan, kind: ProgramKind | None = None) -> Configs:
    """Every config file the job reads.

    An emitter that cannot express the recipe raises (`equivalence.refuse_errors`), so
    what comes back here are warnings and notes only.
    """
    files: dict[str, str] = {}
    findings: list[Finding] = []
    for name in emitted_targets(plan, kind):
        output = TARGETS[name](plan, EmitOptions(launched=True))
        findings += output.findings
        files.update(output.files)
    return Configs(files, tuple(findings))


def parse_program(plan: Plan, words: Sequence[str]) -> Program:
    """The program after `--` (`script.py args…` or `-m module args…`), else the recipe's.

    verl's and OpenRLHF's program is their own PPO entry point (`RAY_TRAINERS`): words after
    `--` are further Hydra overrides (verl) or command-line options (OpenRLHF) unless they
    start with `-m module` (a custom entry). Without a program, every other backend runs
    the reference trainer.
    """
    entry = RAY_TRAINERS[plan.backend][1] if plan.backend in RAY_TRAINERS else None
    if words and entry is not None and words[0] != "-m":
        return Program(target=entry, module=True, args=tuple(words))
    if words:
        if words[0] == "-m":
            if len(words) < 2:
                raise LaunchError("-m needs a module name")
            return Program(target=words[1], module=True, args=tuple(words[2:]))
        return Program(target=words[0], args=tuple(words[1:]))
    if plan.recipe.launch.script is not None:
        return Program(target=plan.recipe.launch.script, args=plan.recipe.launch.args)
    if entry is not None:
        return Program(target=entry, module=True, args=plan.recipe.launch.args)
    return Program(target=TINY_TRAINER, module=True, args=plan.recipe.launch.args)


def check_program_file(plan: Plan, program: Program, *, given: bool) -> None:
    """Refuse a script that is not there, before a rank starts (each would fail alike).

    `given`: the script was named after `--`, else it is the recipe's `launch.script`, refused
    at its key. A module (`-m`, the reference trainer, verl's entry point) is the job's
    interpreter's to find; a directory runs when it holds a `__main__.py`, as `python DIR` does.
    """
    if program.module:
        return
    path = Path(program.target)
    if is_file(path) or (is_dir(path) and is_file(path / "__main__.py")):
        return
    what, where = ((f"the program {program.target} (after --)", None) if given
                   else (f"launch.script {program.target}", plan.recipe.at("launch.script")))
    if is_dir(path):
        raise LaunchError(f"{what} is a directory without a __main__.py", where)
    parent = path.parent
    try:
        names = sorted(entry.name for entry in parent.iterdir()) if is_dir(parent) else []
    except OSError:
        names = []
    near = [name if parent == Path() else str(parent / name) for name in names]
    raise LaunchError(f"{what} does not exist{did_you_mean(program.target, near)}", where)


def choose_kind(plan: Plan, program: Program, *, kind: ProgramKind | None,
                backend_given: bool) -> tuple[Plan, KindChoice]:
    """The program's kind (`--program-kind`, `launch.program_kind`, else read from the script),
    and the plan with a launcher that can serve it (only a defaulted launcher is changed)."""
    current = plan.backend
    if kind is not None:
        choice = KindChoice(kind, "--program-kind")
    elif plan.recipe.launch.program_kind != "auto":
        choice = KindChoice(plan.recipe.launch.program_kind, "launch.program_kind in the recipe")
    else:
        choice = infer(program, current)
    defaulted = not backend_given and "launch.backend" in plan.provenance
    backend = backend_for(choice.kind, current, defaulted=defaulted, strategy=plan.recipe.strategy)
    if backend != current:
        plan = variant(plan, f"the {choice.kind} program's", launch={"backend": backend})
    return plan, choice


def check_program(plan: Plan, kind: ProgramKind) -> None:
    """Refuse a plan whose parallelism the program cannot carry (`translator.programs`), at the key."""
    found = refusal(plan, kind)
    if found is not None:
        (key,) = found.keys
        raise RecipeError(f"program kind {kind} cannot run this recipe: {found.message}; change {key} "
                          "(plan --search --program-kind offers what it runs)", plan.recipe.at(key),
                          keys=found.keys)


def _size(n: float) -> str:
    return f"{gb(n)} ({n / GiB:.1f} GiB)"


def check_fit(plan: Plan, *, allow_no_fit: bool, say: Say) -> dict[str, object]:
    """Refuse a plan `plan` says does not fit, unless `allow_no_fit`; what was judged, for run.json.

    The estimate is `distrecipe plan`'s (`plan.report.estimate`). A plan whose memory cannot
    be judged (no GPU memory, CPU ranks, no model shape, a batch the script decides) is not
    refused: `fits` is then null, nothing is invented. Only the verdict *does not fit* is
    refused; a *tight* one goes ahead with lint's DR372 warning naming the band. Where the job
    holds models `plan` cannot price (OpenRLHF's critic and reward model), a fit is a lower
    bound, and launch says so.
    """
    record: dict[str, object] = {"fits": None, "verdict": None, "needed_bytes": None,
                                 "gpu_memory_bytes": plan.gpu_memory, "allow_no_fit": allow_no_fit}
    if plan.script_batch or not judgeable(plan):
        return record
    est = estimate(plan)
    record.update(fits=est.fits, verdict=est.verdict.word if est.verdict else None, needed_bytes=est.need)
    if est.fits is not False:
        if est.fits and est.rollout is not None and est.rollout.unpriced:
            say(f"distrecipe: the plan fits as a lower bound: it prices the command distrecipe writes, "
                f"not {', '.join(est.rollout.unpriced)} (options after `--` that change the models are "
                "not read)")
        return record
    assert est.budget is not None  # fits is False only against a budget
    kept = est.verdict.headroom if est.verdict else 0.0
    why = (f"{est.label} needs {_size(est.need)} per GPU of {_size(est.budget)}"
           + (f" less cluster.headroom {_size(kept)}" if kept else "")
           + (f"; {est.rollout.trainer}'s rollout share is below its engine's floor"
              if est.starved and est.rollout is not None else ""))
    if not allow_no_fit:
        raise LaunchError(f"the plan does not fit: {why} (distrecipe plan shows what to change); "
                          "--allow-no-fit launches it anyway",
                          plan.recipe.at("cluster.gpu_memory", "cluster.gpu", "cluster"))
    say(f"distrecipe: --allow-no-fit: the plan does not fit ({why}); launching anyway")
    return record


def hand_off(plan: Plan, program: Program, kind: ProgramKind, *, run_dir: Path,
             configs: Mapping[str, str], allow_override: bool) -> tuple[Program, Handoff]:
    """The program with what its kind reads from the recipe, the user's arguments checked."""
    given = handoff(kind, plan, user_args=program.args, run_dir=run_dir, configs=configs,
                    allow_override=allow_override)
    return replace(program, args=given.args, env=given.env), given


def allocation_of(plan: Plan, environ: Mapping[str, str]) -> Allocation | None:
    """The platform's allocation (`launch.allocation`), held to the recipe, or None."""
    allocation = read_allocation(environ)
    if allocation is not None:
        check_allocation(allocation, plan)
    return allocation


def run_directory(plan: Plan, *, run_dir: str | None, runs_root: str, node_rank: int | None,
                  environ: Mapping[str, str]) -> Path:
    """The run directory asked for, else one per job (and per node on a platform that names its run)."""
    if run_dir:
        return Path(run_dir).resolve()
    allocation = allocation_of(plan, environ)
    return default_run_dir(
        Path(runs_root), plan.recipe.name, job_key=allocation.job_key if allocation else None,
        node_rank=node_rank if node_rank is not None else (allocation.node_rank if allocation else 0),
    ).resolve()


@contextmanager
def one_node_port(plan: Plan, *, say: Say) -> Iterator[int | None]:
    """The master port a one-node job's launcher is given, held here until the job has ended.

    None where the port is not this machine's to choose (several nodes) or the launcher
    picks its own (`GIVEN_PORT`). The recipe's port if free, else one the kernel picks:
    held, not probed and released, so launches started together never share one.
    """
    if plan.dims.nodes > 1 or plan.backend not in GIVEN_PORT:
        yield None
        return
    with hold_port(plan.recipe.launch.master_port) as held:
        port: int = held.getsockname()[1]
        if port != plan.recipe.launch.master_port:
            say(f"distrecipe: port {plan.recipe.launch.master_port} is in use here; this one-node job "
                f"uses {port}")
        yield port


def build_request(plan: Plan, *, program: Program, run_dir: Path, configs: dict[str, str],
                  node_rank: int | None, environ: Mapping[str, str], dry_run: bool,
                  say: Say, held_port: int | None = None) -> LaunchRequest:
    """Node rank, master and hosts: the command line, the recipe, then the platform, then one node.

    A node rank from `--node-rank` or from a platform that starts distrecipe on every
    node (`Allocation.per_node`) makes each launcher start this node's ranks only, with
    that rank. A one-node job uses `held_port` (`one_node_port`) when the caller holds
    one; a dry run shows missing multi-node hosts as placeholders.
    """
    allocation = allocation_of(plan, environ)
    rank = node_rank if node_rank is not None else (allocation.node_rank if allocation else 0)
    if not 0 <= rank < plan.dims.nodes:
        where = f" ({allocation.sources['node_rank']})" if allocation and node_rank is None else ""
        raise LaunchError(f"node rank {rank}{where} is outside the recipe's {plan.dims.nodes} node(s)")
    master = allocation_master(plan, allocation, say) or plan.recipe.launch.master_addr
    hosts = allocation.hosts if allocation else ()
    if dry_run and plan.dims.nodes > 1 and not hosts:
        # A dry run on a laptop still shows the multi-node command's exact shape, with
        # host names that cannot be mistaken for real ones.
        hosts = tuple(f"<node-{i}>" for i in range(plan.dims.nodes))
        master = master or hosts[0]
        say(f"distrecipe: dry run outside an allocation: the {plan.dims.nodes} hosts are shown as "
            f"{hosts[0]}..{hosts[-1]}")
    port = plan.recipe.launch.master_port
    if allocation and allocation.master_port is not None and "launch.master_port" not in plan.recipe.where:
        port = allocation.master_port  # the platform's (Kubeflow opens it on the pod); a stated one wins
    if plan.dims.nodes == 1:
        master = master or "127.0.0.1"
        port = port if held_port is None else held_port
    return LaunchRequest(
        plan=plan, program=program, run_dir=run_dir, configs=configs, node_rank=rank,
        master_addr=master, master_port=port,
        hosts=hosts,
        per_node=node_rank is not None or (allocation.per_node if allocation else False),
        environ=dict(environ), allocation=allocation,
    )


def allocation_master(plan: Plan, allocation: Allocation | None, say: Say) -> str | None:
    """Node 0's address as the platform says it, where the platform decides it over the
    recipe: inside a SLURM allocation, node rank 0 is the allocation's first node
    (`SLURM_NODEID` 0, whatever `launch.master_addr` a recipe carries from another
    cluster), so the rendezvous is there, and a recipe address that differs is named.
    Elsewhere, the recipe's address (else the platform's) serves: None here when the
    recipe states one."""
    if allocation is None:
        return None
    stated = plan.recipe.launch.master_addr
    if allocation.platform != "slurm" or stated is None:
        return allocation.master_addr if stated is None else None
    first = allocation.master_addr
    if stated != first:
        where = plan.recipe.where.get("launch.master_addr")
        said = "" if where is None else (f" ({where.file})" if where.file.startswith("--set ")
                                          else f" ({where.file}:{where.line})")
        variable = allocation.sources.get("master_addr", "SLURM_JOB_NODELIST")
        say(f"distrecipe: launch.master_addr {stated}{said} is not this SLURM allocation's first node "
            f"{first} ({variable}), where node rank 0 runs: the rendezvous is on {first}")
    return first


def node_argv(plan: Plan, *, python: str, recipe: str, overrides: Sequence[str], runs_root: str,
              timeout: float | None, program: Sequence[str], program_kind: ProgramKind | None,
              allow_override: bool, allow_no_fit: bool = False) -> list[str]:
    """The `distrecipe launch` a platform runs on every node: this launch, pinned down.

    The backend is spelled out, so every node runs what this command resolved; the
    node's rank and node 0's address come from the platform's variables on each node.
    """
    argv = [python, "-m", "distrecipe", "launch", recipe]
    argv += [word for key in overrides for word in ("--set", key)]
    argv += ["--target", plan.backend, "--runs-root", runs_root]
    argv += ["--program-kind", program_kind] if program_kind is not None else []
    argv += ["--allow-override"] if allow_override else []
    argv += ["--allow-no-fit"] if allow_no_fit else []
    argv += ["--timeout", str(timeout)] if timeout is not None else []
    argv += ["--", *program] if program else []
    return argv


def names_script(plan: Plan, program: Sequence[str]) -> bool:
    """Whether the program's first word is a script's path: `-m module`, verl's Hydra
    overrides and OpenRLHF's options name no file."""
    return bool(program) and program[0] != "-m" and plan.backend not in RAY_TRAINERS


def slurm_argv(plan: Plan, *, recipe: str, overrides: Sequence[str], runs_root: str,
               timeout: float | None, program: Sequence[str], program_kind: ProgramKind | None,
               allow_override: bool, allow_no_fit: bool = False) -> list[str]:
    """`node_argv` for an sbatch job: the interpreter and every path absolute (the job
    starts elsewhere, with another PATH), the script's too."""
    words = list(program)
    if names_script(plan, words):
        words[0] = str(Path(words[0]).resolve())
    return node_argv(plan, python=sys.executable, recipe=str(Path(recipe).resolve()), overrides=overrides,
                     runs_root=str(Path(runs_root).resolve()), timeout=timeout, program=words,
                     program_kind=program_kind, allow_override=allow_override, allow_no_fit=allow_no_fit)


def dry_run_text(spec: LaunchSpec, run_dir: Path, files: Sequence[str], kind: KindChoice) -> str:
    """Exact argv and added env as JSON, the program's kind and why, and a copy-pasteable
    shell line; secrets redacted."""
    env = {name: REDACTED if is_secret(name, value) else value for name, value in spec.env.items()}
    argv = redact_argv(spec.argv)
    return json.dumps({
        "program_kind": kind.kind,
        "program_kind_reason": kind.reason,
        "argv": argv,
        "env": env,
        "run_dir": str(run_dir),
        "files": sorted(files),
        "shell": shlex.join(["env", *[f"{name}={value}" for name, value in env.items()], *argv]),
    }, indent=2)
