"""SLURM: read the allocation from `SLURM_*`, and write a batch script that uses it.

Inside an allocation, distrecipe runs once per node (`srun --ntasks-per-node=1`);
each copy reads its node rank and the node list from SLURM and starts the recipe's
own launcher for its node, so the engines' rendezvous does the rest. The batch
script is therefore short: `#SBATCH` lines from the plan and `launch.slurm`, and one
`srun python -m distrecipe launch …` line (verl: a Ray cluster first).
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.output import shell_word
from distrecipe.schemas import recipe_schema

_GROUP = re.compile(r"\[([^\]]*)\]")

Segment = str | list[tuple[int, int, int]]
"""A piece of one host pattern: literal text, or a bracket group's (low, high, width) ranges."""


def max_hosts() -> int:
    """The most hosts a node list may name: the most nodes a recipe may ask for (the
    schema's `cluster.nodes` maximum). SLURM_JOB_NODELIST comes from the environment, and
    `n[1-999999999]` would otherwise be expanded into memory without bound."""
    return int(recipe_schema()["properties"]["cluster"]["properties"]["nodes"]["maximum"])


def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's compressed host list (`gpu[01-03,07],login1`) as host names, in order.

    The hosts are counted before any is built, so a list naming more than `max_hosts`
    is refused at once, whatever its size.
    """
    items = [_parse_item(item) for item in _split_top_level(nodelist)]
    limit, total = max_hosts(), 0
    for item in items:
        total += _count(item, limit)
        if total > limit:
            raise LaunchError(f"SLURM node list {_shown(nodelist)} names more than {limit:,} hosts, "
                              "the most a recipe may ask for")
    return ["".join(parts) for item in items for parts in itertools.product(*map(_names, item))]


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "...")


def _split_top_level(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _parse_item(item: str) -> list[Segment]:
    """`rack[1-2]-n[01-03]` as `["rack", [(1, 2, 1)], "-n", [(1, 3, 2)]]`."""
    segments: list[Segment] = []
    at = 0
    for match in _GROUP.finditer(item):
        segments.append(item[at: match.start()])
        ranges = []
        for part in match.group(1).split(","):
            low, _, high = part.partition("-")
            high = high or low
            # Python refuses int() of over 4,300 digits; no host number has twenty.
            readable = low.isdigit() and high.isdigit() and max(len(low), len(high)) <= 20
            if not (readable and int(low) <= int(high)):
                raise LaunchError(f"cannot read SLURM node list {_shown(item)}")
            ranges.append((int(low), int(high), len(low)))
        segments.append(ranges)
        at = match.end()
    segments.append(item[at:])
    return segments


def _count(item: list[Segment], limit: int) -> int:
    """How many hosts `item` names, or just over `limit` once it names more."""
    count = 1
    for segment in item:
        if not isinstance(segment, str):
            count *= sum(high - low + 1 for low, high, _ in segment)
            if count > limit:
                return limit + 1
    return count


def _names(segment: Segment) -> list[str]:
    if isinstance(segment, str):
        return [segment]
    return [str(number).zfill(width) for low, high, width in segment for number in range(low, high + 1)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Allocation:
    """What a SLURM job step tells each node about the job."""

    hosts: tuple[str, ...]
    node_rank: int
    job_id: str
    per_node: bool
    """True inside an `srun` step with one task per node (distrecipe runs on every node)."""
    step_id: str | None = None
    """The `srun` step (None in the batch script itself); one job may run several."""
    restarts: int = 0
    """SLURM_RESTART_COUNT: how often the job was requeued (preemption, node failure)."""

    @property
    def master_addr(self) -> str:
        return self.hosts[0]

    @property
    def run_key(self) -> str:
        """This run's name within SLURM, the same on every node and new on every run.

        The job id alone is not enough: a requeued job keeps its id, and a batch script
        may `srun` several launches. SLURM's own `job.step` notation is used for steps
        after the first, and `-restartN` for a requeued job.
        """
        key = self.job_id
        if self.step_id not in (None, "0"):
            key += f".{self.step_id}"
        return key + (f"-restart{self.restarts}" if self.restarts else "")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Allocation | None:
        """The allocation this process runs in, or None outside SLURM."""
        if "SLURM_JOB_ID" not in env:
            return None
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        if not nodelist:
            raise LaunchError("inside SLURM but SLURM_JOB_NODELIST is not set")
        hosts = tuple(expand_nodelist(nodelist))
        # The batch step also sees SLURM_NTASKS; only an srun step has a step id.
        in_step = "SLURM_STEP_ID" in env
        per_node = in_step and len(hosts) > 1 and env.get("SLURM_NTASKS") == str(len(hosts))
        return cls(hosts=hosts, node_rank=_number(env, "SLURM_NODEID"),
                   job_id=env["SLURM_JOB_ID"], per_node=per_node, step_id=env.get("SLURM_STEP_ID"),
                   restarts=_number(env, "SLURM_RESTART_COUNT"))


def _number(env: Mapping[str, str], name: str) -> int:
    """A count SLURM sets (0 when unset), refused by name when it is not one."""
    value = env.get(name) or "0"
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise LaunchError(f"{name}={_shown(value)} is not a number")
    return int(value)


PLACEHOLDER = "SET-launch.slurm.{key}"
"""What an unset cluster-specific `#SBATCH` value is written as: sbatch rejects it (an
unknown partition, a malformed time) and the script's first command refuses to go on."""
CPUS_PER_GPU = 8
"""Default CPUs per GPU rank: the launcher, the rank, and its data-loader workers."""
RAY_PORT = 6379


def sbatch_lines(plan: Plan, runs_root: Path) -> tuple[list[str], list[str]]:
    """The `#SBATCH` lines, and the recipe keys still written as placeholders."""
    slurm = plan.recipe.launch.slurm
    per_rank = CPUS_PER_GPU if plan.recipe.cluster.device == "gpu" else 1
    cpus = slurm.cpus_per_task or plan.dims.gpus_per_node * per_rank
    log = runs_root / f"{plan.recipe.name}-slurm%j"
    lines = [f"--job-name={shell_word(plan.recipe.name)}", f"--nodes={plan.dims.nodes}",
             "--ntasks-per-node=1"]
    if plan.recipe.cluster.device == "gpu":
        lines.append(f"--gpus-per-node={plan.dims.gpus_per_node}")
    lines += [f"--cpus-per-task={cpus}", f"--output={shell_word(f'{log}.out')}",
              f"--error={shell_word(f'{log}.err')}",
              "--open-mode=append"]  # a requeued job adds to its log instead of truncating it
    placeholders = []
    for key, value in (("partition", slurm.partition), ("account", slurm.account), ("time", slurm.time)):
        if value is None:
            placeholders.append(f"launch.slurm.{key}")
            value = PLACEHOLDER.format(key=key)
        if value != "default":
            lines.append(f"--{key}={shell_word(value)}")
    return [f"#SBATCH {line}" for line in lines], placeholders


def batch_script(plan: Plan, launch_argv: Sequence[str], *, runs_root: Path, ray: str = "ray") -> str:
    """An sbatch script: the plan's nodes, GPUs and CPUs, then one distrecipe per node.

    `launch_argv` is the `distrecipe launch …` command (without `--slurm`) each node
    runs, with an absolute interpreter. verl on several nodes instead starts a Ray head
    on the first node and Ray workers on the others, then one launch on the head, as
    verl's multi-node guide does; `ray` is the Ray command to use.
    """
    sbatch, placeholders = sbatch_lines(plan, runs_root)
    lines = ["#!/bin/bash", *sbatch, "set -euo pipefail"]
    if placeholders:
        lines.append(f"echo 'distrecipe: set {', '.join(placeholders)} (or pass --set KEY=VALUE to "
                     "launch --slurm); this script still has placeholders' >&2; exit 2")
    cpus = next(line for line in sbatch if "--cpus-per-task=" in line).split("=")[1]
    # srun does not inherit --cpus-per-task from the batch step (SLURM 22.05+), so it is repeated.
    step = f"srun --ntasks-per-node=1 --cpus-per-task={cpus} --kill-on-bad-exit=1"
    if plan.backend == "verl" and plan.dims.nodes > 1:
        gpus = f"--num-cpus={cpus} --num-gpus={plan.dims.gpus_per_node} --block &"
        join = f'{shlex.quote(ray)} start --address="$head_ip:{RAY_PORT}"'
        lines += [
            "# verl's multi-node recipe: a Ray head on the first node, workers on the others,",
            "# then verl's trainer (through distrecipe) on the head.",
            'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
            'head=${nodes[0]}',
            'head_ip=$(srun --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | cut -d" " -f1)',
            f'srun --nodes=1 --ntasks=1 -w "$head" {shlex.quote(ray)} start --head '
            f'--node-ip-address="$head_ip" --port={RAY_PORT} {gpus}',
            "sleep 10",
            'for node in "${nodes[@]:1}"; do',
            f'  srun --nodes=1 --ntasks=1 -w "$node" {join} {gpus}',
            "done",
            "sleep 10",
            f'RAY_ADDRESS="$head_ip:{RAY_PORT}" srun --overlap --nodes=1 --ntasks=1 -w "$head" '
            f"{shlex.join(launch_argv)}",
        ]
    else:
        lines += [
            "# Each node's distrecipe reads SLURM_JOB_NODELIST / SLURM_NODEID and starts the",
            f"# {plan.backend} launcher for its node; node 0's host is the rendezvous.",
            f"{step} {shlex.join(launch_argv)}",
        ]
    return "\n".join(lines) + "\n"
