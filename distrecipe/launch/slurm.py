"""SLURM: its node lists, and a batch script that runs the recipe on every node.

Inside an allocation, distrecipe runs once per node (`srun --ntasks-per-node=1`);
each copy reads its node rank and the node list from SLURM (`launch.allocation`) and
starts the recipe's own launcher for its node, so the engines' rendezvous does the rest. The batch
script is therefore short: `#SBATCH` lines from the plan and `launch.slurm`, and one
`srun python -m distrecipe launch …` line (verl and OpenRLHF: a Ray cluster first).
"""

from __future__ import annotations

import itertools
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from distrecipe.engines.runner import RAY_TRAINERS
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


PLACEHOLDER = "SET-launch.slurm.{key}"
"""What an unset cluster-specific `#SBATCH` value is written as: sbatch rejects it (an
unknown partition, a malformed time or CPU count) and the script's first command refuses
to go on."""
SAVE_BEFORE_LIMIT = 300
"""Seconds before the time limit SLURM warns the job (`--signal=B:USR1@300`) when it resumes
(`checkpoint.resume: auto`): SLURM sends the signal within 60 s of that moment, and the
ranks need a step and a save before the limit kills them."""
RAY_PORT = 6379
RAY_WAIT = 600
"""Seconds the batch script waits for the Ray head, then for every node, to join
(`DISTRECIPE_RAY_WAIT` in the job's environment overrides it) before it gives up."""
RAY_NODES = ("awk '/^(Active|Idle):/{a=1; next} /^[A-Za-z]/{a=0} a && $2 ~ /^node_/{n+=$1} "
             "END{print n+0}'")
"""Counts the nodes `ray status` lists (` 1 node_<id>` lines under `Active:` and, with
Ray's v2 autoscaler, `Idle:`, where a node that runs nothing yet is)."""


def cpus_per_task(plan: Plan) -> int | None:
    """The CPUs each node's launch asks for: `launch.slurm.cpus_per_task` when a number;
    None when it is `default`, unset under `--exclusive` (the whole node), or unset."""
    value = plan.recipe.launch.slurm.cpus_per_task
    return value if isinstance(value, int) else None


def sbatch_lines(plan: Plan, runs_root: Path, chdir: Path) -> tuple[list[str], list[str]]:
    """The `#SBATCH` lines, and the recipe keys still written as placeholders.

    Nothing a cluster's owners decide is guessed: partition, account, time and CPUs are
    placeholders until stated (`default` leaves a line out for the cluster's own default;
    `--exclusive` without a CPU count takes the whole node). Memory is asked only when
    stated (`launch.slurm.mem`), else the partition's default applies. Paths are absolute
    and the job starts in `chdir` (`--chdir`), so what the script names means the same on
    every node whatever directory sbatch was run from.
    """
    slurm = plan.recipe.launch.slurm
    log = runs_root / f"{plan.recipe.name}-slurm%j"
    lines = [f"--job-name={shell_word(plan.recipe.name)}", f"--nodes={plan.dims.nodes}",
             "--ntasks-per-node=1"]
    if plan.recipe.cluster.device == "gpu":
        lines.append(f"--gpus-per-node={plan.dims.gpus_per_node}")
    placeholders = []
    if slurm.cpus_per_task is None and not slurm.exclusive:
        placeholders.append("launch.slurm.cpus_per_task")
        lines.append(f"--cpus-per-task={PLACEHOLDER.format(key='cpus_per_task')}")
    elif isinstance(slurm.cpus_per_task, int):
        lines.append(f"--cpus-per-task={slurm.cpus_per_task}")
    if slurm.mem not in (None, "default"):
        lines.append(f"--mem={shell_word(str(slurm.mem))}")
    if slurm.exclusive:
        lines.append("--exclusive")
    lines += [f"--chdir={shell_word(str(chdir))}", f"--output={shell_word(f'{log}.out')}",
              f"--error={shell_word(f'{log}.err')}",
              "--open-mode=append"]  # a requeued job adds to its log instead of truncating it
    if resumes(plan):
        # Warn the batch shell before the time limit (it passes the signal to the ranks, which
        # save), and let SLURM requeue the job: the next attempt resumes from that checkpoint.
        lines += [f"--signal=B:USR1@{SAVE_BEFORE_LIMIT}", "--requeue"]
    for key, value in (("partition", slurm.partition), ("account", slurm.account), ("time", slurm.time)):
        if value is None:
            placeholders.append(f"launch.slurm.{key}")
            value = PLACEHOLDER.format(key=key)
        if value != "default":
            lines.append(f"--{key}={shell_word(value)}")
    return [f"#SBATCH {line}" for line in lines], placeholders


def resumes(plan: Plan) -> bool:
    """The job picks up its own latest checkpoint when started again (`checkpoint.resume: auto`)."""
    return plan.recipe.checkpoint is not None and plan.recipe.checkpoint.resume == "auto"


SAVE_AND_REQUEUE = [
    "# SIGUSR1 before the time limit (--signal=B:USR1): pass it to the step (srun hands it to each",
    "# node's distrecipe, which hands it to the ranks: they save and stop), then requeue the job;",
    "# the next attempt resumes from the latest complete checkpoint (checkpoint.resume: auto).",
    "asked=0",
    "trap 'asked=1; echo \"distrecipe: SIGUSR1: asking the ranks to save before the time limit\" >&2; "
    "kill -USR1 \"$step\" 2>/dev/null || true' USR1",
]
"""The batch script's handler of SLURM's warning, installed before the step starts."""
AWAIT_AND_REQUEUE = [
    "set +e",
    'wait "$step"; status=$?',
    "# A trapped signal ends `wait` early: wait again until the step has ended.",
    'while kill -0 "$step" 2>/dev/null; do wait "$step"; status=$?; done',
    "set -e",
    'if [ "$asked" = 1 ]; then scontrol requeue "$SLURM_JOB_ID"; fi',
    'exit "$status"',
]


def batch_script(plan: Plan, launch_argv: Sequence[str], *, runs_root: Path, chdir: Path,
                 ray: str) -> str:
    """An sbatch script: the plan's nodes, GPUs and CPUs, then one distrecipe per node.

    `launch_argv` is the `distrecipe launch …` command (without `--slurm`) each node
    runs, with an absolute interpreter. verl or OpenRLHF on several nodes instead starts a
    Ray head on the first node and Ray workers on the others, then one launch on the head,
    as verl's multi-node guide and OpenRLHF's SLURM example do. `ray` is the Ray command distrecipe resolved
    (`launch.spec.executable`: beside its interpreter, else on this PATH), an absolute
    path, never a word each node's PATH decides. The script waits for the head, then for
    every node, to be listed by `ray status` (at most `RAY_WAIT` seconds each), and stops
    saying how many joined, rather than start the trainer on a cluster that is not all there.
    """
    sbatch, placeholders = sbatch_lines(plan, runs_root, chdir)
    lines = ["#!/bin/bash", *sbatch, "set -euo pipefail"]
    if placeholders:
        lines.append(f"echo 'distrecipe: set {', '.join(placeholders)} (or pass --set KEY=VALUE to "
                     "launch --slurm); this script still has placeholders' >&2; exit 2")
    cpus = cpus_per_task(plan)
    # srun does not inherit --cpus-per-task from the batch step (SLURM 22.05+), so it is repeated.
    step = "srun --ntasks-per-node=1" + (f" --cpus-per-task={cpus}" if cpus else "") + " --kill-on-bad-exit=1"
    trainer = RAY_TRAINERS[plan.backend][0] if plan.backend in RAY_TRAINERS else None
    if trainer is not None and plan.dims.nodes > 1:
        if not Path(ray).is_absolute():
            raise LaunchError(f"{trainer} on {plan.dims.nodes} nodes starts a Ray cluster, and Ray's `ray` "
                              f"command is neither beside {sys.executable} nor on PATH: install Ray "
                              "there (pip install 'distrecipe[verl]')")
        gpus = (f"--num-cpus={cpus} " if cpus else "") + f"--num-gpus={plan.dims.gpus_per_node} --block &"
        address = f"$head_ip:{RAY_PORT}"
        lines += [
            f"# {trainer}'s multi-node recipe: a Ray head on the first node, workers on the others,",
            f"# then {trainer}'s trainer (through distrecipe) on the head once every node has joined.",
            f"ray={shlex.quote(ray)}",
            'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
            'head=${nodes[0]}',
            'head_ip=$(srun --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | cut -d" " -f1)',
            f"ray_wait=${{DISTRECIPE_RAY_WAIT:-{RAY_WAIT}}}",
            "ray_nodes() {  # the nodes of the Ray cluster, as `ray status` lists them",
            f'  "$ray" status --address="{address}" 2>/dev/null | {RAY_NODES}',
            "}",
            "wait_for_ray_nodes() {  # until $1 nodes have joined, for at most $ray_wait seconds",
            "  local deadline=$((SECONDS + ray_wait))",
            '  until [ "$(ray_nodes)" -ge "$1" ]; do',
            '    if [ "$SECONDS" -ge "$deadline" ]; then',
            f'      echo "distrecipe: $(ray_nodes) of $1 Ray node(s) joined the head at {address} within '
            '$ray_wait s (DISTRECIPE_RAY_WAIT); the ray start errors are above" >&2',
            "      exit 1",
            "    fi",
            "    sleep 2",
            "  done",
            "}",
            f'srun --nodes=1 --ntasks=1 -w "$head" "$ray" start --head '
            f'--node-ip-address="$head_ip" --port={RAY_PORT} {gpus}',
            "wait_for_ray_nodes 1",
            'for node in "${nodes[@]:1}"; do',
            f'  srun --nodes=1 --ntasks=1 -w "$node" "$ray" start --address="{address}" {gpus}',
            "done",
            f"wait_for_ray_nodes {plan.dims.nodes}",
            f'RAY_ADDRESS="{address}" srun --overlap --nodes=1 --ntasks=1 -w "$head" '
            f"{shlex.join(launch_argv)}",
        ]
    else:
        lines += [
            "# Each node's distrecipe reads SLURM_JOB_NODELIST / SLURM_NODEID and starts the",
            f"# {plan.backend} launcher for its node; node 0's host is the rendezvous.",
        ]
        if resumes(plan):
            lines += [*SAVE_AND_REQUEUE, f"{step} {shlex.join(launch_argv)} &", "step=$!", *AWAIT_AND_REQUEUE]
        else:
            lines.append(f"{step} {shlex.join(launch_argv)}")
    return "\n".join(lines) + "\n"
