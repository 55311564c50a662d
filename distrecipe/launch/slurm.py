"""SLURM: read the allocation from `SLURM_*`, and write a batch script that uses it.

Inside an allocation, distrecipe runs once per node (`srun --ntasks-per-node=1`);
each copy reads its node rank and the node list from SLURM and starts the recipe's
own launcher for its node, so the engines' rendezvous does the rest. The batch
script is therefore short: `#SBATCH` lines from the plan and one `srun distrecipe
launch …` line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distrecipe.errors import LaunchError
from distrecipe.output import shell_word
from distrecipe.recipe import Plan

_GROUP = re.compile(r"\[([^\]]*)\]")


def expand_nodelist(nodelist: str) -> list[str]:
    """SLURM's compressed host list (`gpu[01-03,07],login1`) as host names, in order."""
    hosts: list[str] = []
    for item in _split_top_level(nodelist):
        hosts.extend(_expand_item(item))
    return hosts


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


def _expand_item(item: str) -> list[str]:
    match = _GROUP.search(item)
    if match is None:
        return [item]
    head, tail = item[: match.start()], item[match.end():]
    names: list[str] = []
    for part in match.group(1).split(","):
        low, _, high = part.partition("-")
        if not (low.isdigit() and (not high or high.isdigit())):
            raise LaunchError(f"cannot read SLURM node list {item!r}")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            names.extend(head + str(number).zfill(width) + rest for rest in _expand_item(tail))
    return names


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
        return cls(hosts=hosts, node_rank=int(env.get("SLURM_NODEID", "0")),
                   job_id=env["SLURM_JOB_ID"], per_node=per_node, step_id=env.get("SLURM_STEP_ID"),
                   restarts=int(env.get("SLURM_RESTART_COUNT") or 0))


def batch_script(plan: Plan, launch_argv: Sequence[str]) -> str:
    """An sbatch script: the plan's nodes and GPUs, then one distrecipe per node.

    `launch_argv` is the `distrecipe launch …` command (without `--slurm`) each node runs.
    """
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shell_word(plan.name)}",
        f"#SBATCH --nodes={plan.nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if plan.device == "gpu":
        lines.append(f"#SBATCH --gpus-per-node={plan.gpus_per_node}")
    lines += [
        "set -euo pipefail",
        "# Each node's distrecipe reads SLURM_JOB_NODELIST / SLURM_NODEID and starts the",
        f"# {plan.launch.backend} launcher for its node; node 0's host is the rendezvous.",
        f"srun --ntasks-per-node=1 {shlex.join(launch_argv)}",
    ]
    return "\n".join(lines) + "\n"
