"""SkyPilot: a task file whose `run` starts the recipe's launch on every node SkyPilot gives.

SkyPilot runs a task's `run` commands on each of its `num_nodes` nodes, in the synced
`workdir`, with `SKYPILOT_NODE_RANK`, `SKYPILOT_NODE_IPS` and `SKYPILOT_NUM_NODES` set.
`distrecipe launch` reads those itself (`launch.allocation`), so `run` is one plain
command with no shell arithmetic, the same on every node; the allocation is checked
against the recipe there, and each node's launcher starts its own ranks with its
rank. verl on several nodes is the exception, as in verl's own SkyPilot example
(`examples/skypilot/verl-ppo.yaml`): node 0 starts a Ray head and, once every node has
joined, the trainer; the others join the head's Ray cluster.

The paths in `run` are relative to the workdir (SkyPilot copies it to every node), so
the recipe and the script must lie inside it. No distrecipe release is on the package
index, so `setup` installs the distrecipe this launch runs from its source tree: from
the workdir when the tree lies in it (`pip install -e .`), else from a `file_mounts`
copy of the tree on each node (`DISTRECIPE_MOUNT`); a distrecipe installed without its
source (a wheel) has nothing to ship, and `launch.skypilot.setup` must say how.

The accelerators come from `cluster.gpu` (SkyPilot's names, `ACCELERATORS`) or
`launch.skypilot.accelerator`; with neither, the file says `SET-cluster.gpu:N`, which
SkyPilot's catalog refuses at `sky launch` (or which `sky launch --gpus NAME:N` replaces).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

import distrecipe
from distrecipe.engines.runner import RAY_TRAINERS
from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.launch.prepare import names_script, node_argv
from distrecipe.launch.slurm import RAY_PORT
from distrecipe.recipe import Gpu, ProgramKind

ACCELERATORS: dict[Gpu, str] = {
    "a100-40gb": "A100", "a100-80gb": "A100-80GB", "h100": "H100",
    "h100-pcie": "H100",  # SkyPilot's catalogs list PCIe H100s as H100 too
    "h200": "H200", "gh200": "GH200", "b200": "B200", "l40s": "L40S", "l4": "L4", "a10g": "A10G",
    "mi300x": "MI300X",
}
"""`cluster.gpu` → the accelerator name SkyPilot's catalogs use (`sky show-gpus`)."""
PLACEHOLDER = "SET-cluster.gpu"
"""The accelerator name written when the recipe names no GPU: no catalog has it."""
DISTRECIPE_MOUNT = "~/distrecipe"
"""Where each node gets distrecipe's source tree (`file_mounts`) when the workdir lacks it."""
PYTHON = "python3"
"""The interpreter `run` calls on the nodes: the image's, where `setup` installed distrecipe."""
EXTRAS: dict[str, tuple[str, ...]] = {
    "deepspeed": ("deepspeed",), "accelerate": ("accelerate",),
    "accelerate-deepspeed": ("accelerate", "deepspeed"), "torchrun": (), "verl": ("verl",),
}
"""The distrecipe extras each launcher needs on the nodes (torchrun: torch alone)."""


def accelerators(plan: Plan) -> tuple[str, str | None]:
    """`resources.accelerators` (`H100:8`), and a note when it is the placeholder."""
    stated = plan.recipe.launch.skypilot.accelerator
    gpu = plan.recipe.cluster.gpu
    name = stated or (ACCELERATORS[gpu] if gpu is not None else None)
    count = plan.dims.gpus_per_node
    if name is not None:
        return f"{name}:{count}", None
    return f"{PLACEHOLDER}:{count}", (
        f"distrecipe: the recipe names no GPU model (cluster.gpu): resources.accelerators is written "
        f"{PLACEHOLDER}:{count}, which sky launch refuses; set cluster.gpu or "
        f"launch.skypilot.accelerator, or pass sky launch --gpus NAME:{count}")


def source_tree() -> Path | None:
    """The source tree this distrecipe runs from (the directory of its pyproject.toml), or
    None for one installed without it."""
    root = Path(distrecipe.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    try:
        named = pyproject.is_file() and 'name = "distrecipe"' in pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return root if named else None


def default_setup(plan: Plan, kind: ProgramKind, workdir: Path) -> tuple[str, dict[str, str]]:
    """The setup that installs this distrecipe, with the extras the job's launcher (and an
    HF program) needs, from its source tree, and the `file_mounts` that ship the tree when
    the workdir does not hold it (see the module's docstring)."""
    source = source_tree()
    if source is None:
        raise LaunchError(f"this distrecipe ({Path(distrecipe.__file__).parent}) is installed without its "
                          "source tree and no release of it is on the package index, so the nodes cannot "
                          "install it: set launch.skypilot.setup to commands that do (a wheel in the "
                          "workdir, a git checkout), or run launch --skypilot from a distrecipe checkout")
    if plan.backend not in EXTRAS:
        raise LaunchError(f"distrecipe has no extra that installs {plan.backend} (OpenRLHF's wheel pins "
                          "vLLM, flash-attn and Ray builds of its own): set launch.skypilot.setup to "
                          "commands that install it, or use an image that has it")
    extras = EXTRAS[plan.backend] + (("hf",) if kind == "hf" else ())
    suffix = f"[{','.join(extras)}]" if extras else ""
    torch = "" if extras else " torch"
    if source.is_relative_to(workdir):
        where = os.path.relpath(source, workdir)
        target = shlex.quote((where if where != "." else ".") + suffix)
        return f"{PYTHON} -m pip install -e {target}{torch}", {}
    home = DISTRECIPE_MOUNT.removeprefix("~/")
    return f'{PYTHON} -m pip install -e "$HOME/{home}{suffix}"{torch}', {DISTRECIPE_MOUNT: str(source)}


def workdir_of(plan: Plan, cwd: Path) -> Path:
    """The directory SkyPilot syncs: `launch.skypilot.workdir`, else `cwd`; absolute."""
    stated = plan.recipe.launch.skypilot.workdir
    workdir = (cwd / stated if stated is not None else cwd).resolve()
    if not workdir.is_dir():
        raise LaunchError(f"launch.skypilot.workdir {workdir} is not a directory")
    return workdir


def inside(path: str, *, workdir: Path, cwd: Path, what: str) -> str:
    """`path` (relative to `cwd`) as the nodes see it: relative to the workdir they run in."""
    full = (cwd / path).resolve()
    try:
        return str(full.relative_to(workdir))
    except ValueError:
        raise LaunchError(f"the {what} {full} lies outside the SkyPilot workdir {workdir}, the one "
                          "directory SkyPilot copies to the nodes; set launch.skypilot.workdir to a "
                          "directory that holds it") from None


def skypilot_argv(plan: Plan, *, recipe: str, overrides: Sequence[str], runs_root: str,
                  timeout: float | None, program: Sequence[str], program_kind: ProgramKind | None,
                  allow_override: bool, workdir: Path, cwd: Path, allow_no_fit: bool = False) -> list[str]:
    """`node_argv` for a SkyPilot task: the recipe's and the script's paths relative to the
    workdir every node runs in (a script given by an absolute path outside it is kept, as
    a file of the node's image), the image's `python3`. The runs root is where the nodes
    write: a relative one lies in their workdir, as it would here."""
    words = list(program)
    if names_script(plan, words):
        image_file = Path(words[0]).is_absolute() and not Path(words[0]).resolve().is_relative_to(workdir)
        words[0] = words[0] if image_file else inside(words[0], workdir=workdir, cwd=cwd, what="script")
    return node_argv(plan, python=PYTHON, recipe=inside(recipe, workdir=workdir, cwd=cwd, what="recipe"),
                     overrides=overrides, runs_root=runs_root, timeout=timeout, program=words,
                     program_kind=program_kind, allow_override=allow_override, allow_no_fit=allow_no_fit)


def skypilot_task(plan: Plan, kind: ProgramKind, *, recipe: str, overrides: Sequence[str], runs_root: str,
                  timeout: float | None, program: Sequence[str], program_kind: ProgramKind | None,
                  allow_override: bool, cwd: Path, allow_no_fit: bool = False) -> tuple[str, list[str]]:
    """The task file `launch --skypilot` prints, and notes for the user (a placeholder GPU)."""
    workdir = workdir_of(plan, cwd)
    argv = skypilot_argv(plan, recipe=recipe, overrides=overrides, runs_root=runs_root, timeout=timeout,
                         program=program, program_kind=program_kind, allow_override=allow_override,
                         workdir=workdir, cwd=cwd, allow_no_fit=allow_no_fit)
    note = accelerators(plan)[1] if plan.recipe.cluster.device == "gpu" else None
    stated = plan.recipe.launch.skypilot.setup
    setup, mounts = (stated, {}) if stated else default_setup(plan, kind, workdir)
    return task_yaml(plan, argv, workdir=workdir, setup=setup, file_mounts=mounts), [note] if note else []


def task_yaml(plan: Plan, launch_argv: Sequence[str], *, workdir: Path, setup: str, ray: str = "ray",
              file_mounts: dict[str, str] | None = None) -> str:
    """The SkyPilot task: name, nodes, resources, workdir, file mounts, setup, and `run` on
    every node.

    `launch_argv` is the `distrecipe launch …` each node runs (paths relative to the
    workdir); verl on several nodes wraps it in a Ray cluster, `ray` being Ray's command.
    """
    resources: dict[str, Any]
    if plan.recipe.cluster.device == "gpu":
        resources = {"accelerators": accelerators(plan)[0]}
    else:  # CPU ranks: as many cores, at least, on each node
        resources = {"cpus": f"{plan.dims.gpus_per_node}+"}
    task = {"name": plan.recipe.name, "num_nodes": plan.dims.nodes, "resources": resources,
            "workdir": str(workdir), **({"file_mounts": file_mounts} if file_mounts else {}),
            "setup": setup.rstrip("\n") + "\n", "run": run_block(plan, launch_argv, ray=ray)}
    header = (f"# SkyPilot task for {plan.recipe.name} ({plan.dims.nodes} node(s) × "
              f"{plan.dims.gpus_per_node} rank(s), {plan.backend}), written by distrecipe launch "
              "--skypilot.\n# sky launch -c NAME this.yaml; each node's distrecipe reads SKYPILOT_NODE_RANK "
              "and SKYPILOT_NODE_IPS.\n")
    return header + yaml.dump(task, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                              allow_unicode=True, width=10_000)


def run_block(plan: Plan, launch_argv: Sequence[str], *, ray: str) -> str:
    """`run`: the launch itself, or for verl or OpenRLHF on several nodes a Ray cluster around it."""
    launch = shlex.join(launch_argv)
    trainer = RAY_TRAINERS[plan.backend][0] if plan.backend in RAY_TRAINERS else None
    if trainer is None or plan.dims.nodes == 1:
        return launch + "\n"
    ray_word, nodes, gpus = shlex.quote(ray), plan.dims.nodes, plan.dims.gpus_per_node
    head = f"127.0.0.1:{RAY_PORT}"
    return "\n".join([
        f"# {trainer}'s multi-node recipe: a Ray head on node 0, the other nodes join it, and once",
        f"# all {nodes} are in, {trainer}'s trainer (through distrecipe) runs on the head.",
        'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then',
        f"  {ray_word} start --head --port={RAY_PORT} --num-gpus={gpus} --disable-usage-stats",
        f'  until [ "$({ray_word} status --address={head} 2>/dev/null | grep -c node_)" -ge {nodes} ]; do',
        "    sleep 5",
        "  done",
        f"  RAY_ADDRESS={head} {launch}",
        "else",
        '  head_ip=$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
        f'  until {ray_word} start --address="$head_ip:{RAY_PORT}" --num-gpus={gpus} '
        "--disable-usage-stats; do",
        "    sleep 5",
        "  done",
        "fi",
    ]) + "\n"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (`setup`, `run`) as literal blocks, as people write them."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)
