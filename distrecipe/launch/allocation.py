"""The allocation a platform gives this node: SLURM, SkyPilot, dstack, Kubeflow, torchrun's `PET_*`.

Every platform that runs a job on several machines starts one copy of the job's
command on each and tells it, in variables of its own, how many nodes there are,
which one this is and where node 0 is. `read_allocation` turns whichever set is
present into one `Allocation` (the platform's name kept, for `run.json`), and
`check_allocation` holds it to the recipe: a node or rank count that differs is
refused naming both values and where each came from, before anything starts.
Launchers then run with the platform's ranks (`LaunchRequest.per_node`): DeepSpeed
with `--no_ssh --node_rank`, torchrun with a static `--node-rank`, Accelerate with
`--machine_rank`, so node rank 0 holds global rank 0.

The variables read (node rank; nodes; node 0; ranks or GPUs per node):

* SLURM (`srun`): `SLURM_NODEID`; `SLURM_JOB_NODELIST`; its first host; `SLURM_GPUS_ON_NODE`.
* SkyPilot: `SKYPILOT_NODE_RANK`; `SKYPILOT_NUM_NODES`; the first of `SKYPILOT_NODE_IPS`;
  `SKYPILOT_NUM_GPUS_PER_NODE`.
* dstack: `DSTACK_NODE_RANK`; `DSTACK_NODES_NUM`; `DSTACK_MASTER_NODE_IP`; `DSTACK_GPUS_PER_NODE`.
* PyTorchJob: `PET_NODE_RANK`, else `RANK`; `PET_NNODES`; `MASTER_ADDR`/`MASTER_PORT`;
  `PET_NPROC_PER_NODE`.
* Kubeflow Trainer v2, or torchrun's variables set by hand: `PET_NODE_RANK`; `PET_NNODES`;
  `PET_MASTER_ADDR`/`PET_MASTER_PORT`; `PET_NPROC_PER_NODE`.

The `PET_*` names are torchrun's own (every `--flag` defaults to `PET_FLAG`); Kubeflow
Trainer v2 sets them in its pods (told apart by Kubernetes' `KUBERNETES_SERVICE_HOST`),
PyTorchJob adds `MASTER_ADDR` and `RANK` (the pod's node rank, not a process rank). A
process inside torchrun's own workers (`TORCHELASTIC_RUN_ID`) is not a node. The
first platform found in the list's order, SkyPilot and dstack before Kubernetes
before SLURM, is the one read: a SkyPilot or dstack job on a SLURM cluster still sees
SLURM's variables, but runs one copy per node as SkyPilot or dstack ranks them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from distrecipe.errors import LaunchError, Position
from distrecipe.job import Plan
from distrecipe.launch.slurm import expand_nodelist, max_hosts
from distrecipe.output import one_line

Platform = Literal["slurm", "skypilot", "dstack", "pytorchjob", "kubeflow-trainer", "torchrun"]
"""Where the allocation came from, as recorded in `run.json`."""

NAMES: dict[Platform, str] = {
    "slurm": "SLURM", "skypilot": "SkyPilot", "dstack": "dstack", "pytorchjob": "PyTorchJob",
    "kubeflow-trainer": "Kubeflow Trainer", "torchrun": "torchrun's PET_* variables",
}

_HOST = re.compile(r"^[A-Za-z0-9_.:%\[\]-]{1,253}$")
"""A host name or an IPv4/IPv6 address: one word, no spaces, quotes or line breaks (it
goes into a hostfile line and a launcher's argv)."""
_KEY = re.compile(r"[^A-Za-z0-9_.-]+")
KEY_LENGTH = 64
"""The longest job id kept in a run directory's name."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Allocation:
    """What a platform tells each node about the job, and which variable said each thing."""

    platform: Platform
    node_rank: int
    nodes: int
    """How many nodes the platform started (hosts listed or counted)."""
    hosts: tuple[str, ...] = ()
    """Every node's address in rank order, where the platform lists them."""
    master_addr: str | None = None
    master_port: int | None = None
    ranks_per_node: int | None = None
    """Processes per node the platform asks for (`PET_NPROC_PER_NODE`), when a number."""
    gpus_per_node: int | None = None
    """GPUs the platform gave each node."""
    per_node: bool = True
    """distrecipe runs once on every node (every platform here but SLURM's batch step)."""
    job_key: str | None = None
    """This run's name on the platform, the same on every node (`runs/<name>-<key>/node<N>`)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Field name → the variable it was read from, for messages and `run.json`."""

    def record(self) -> dict[str, object]:
        """What `run.json` keeps of it."""
        return {"platform": self.platform, "node_rank": self.node_rank, "nodes": self.nodes,
                "master_addr": self.master_addr, "master_port": self.master_port,
                "ranks_per_node": self.ranks_per_node, "gpus_per_node": self.gpus_per_node,
                "per_node": self.per_node, "variables": dict(self.sources)}


def read_allocation(env: Mapping[str, str]) -> Allocation | None:
    """The allocation this process runs in, or None on a machine of its own."""
    for reader in (_skypilot, _dstack, _kubernetes, _slurm):
        allocation = reader(env)
        if allocation is not None:
            return allocation
    return None


def _skypilot(env: Mapping[str, str]) -> Allocation | None:
    if "SKYPILOT_NODE_RANK" not in env:
        return None
    ips = _hosts(env, "SKYPILOT_NODE_IPS")
    nodes = _count(env, "SKYPILOT_NUM_NODES", default=len(ips) or None)
    if ips and len(ips) != nodes:
        raise LaunchError(f"SKYPILOT_NODE_IPS lists {len(ips)} address(es) but SKYPILOT_NUM_NODES={nodes}")
    return Allocation(platform="skypilot", node_rank=_number(env, "SKYPILOT_NODE_RANK"), nodes=nodes,
                      hosts=ips, master_addr=ips[0] if ips else None,
                      gpus_per_node=_optional(env, "SKYPILOT_NUM_GPUS_PER_NODE"),
                      job_key=_key("skypilot", env.get("SKYPILOT_TASK_ID")),
                      sources={"node_rank": "SKYPILOT_NODE_RANK", "nodes": "SKYPILOT_NUM_NODES",
                               "master_addr": "SKYPILOT_NODE_IPS",
                               "gpus_per_node": "SKYPILOT_NUM_GPUS_PER_NODE"})


def _dstack(env: Mapping[str, str]) -> Allocation | None:
    if "DSTACK_NODE_RANK" not in env:
        return None
    ips = _hosts(env, "DSTACK_NODES_IPS")
    nodes = _count(env, "DSTACK_NODES_NUM", default=len(ips) or None)
    master = env.get("DSTACK_MASTER_NODE_IP") or (ips[0] if ips else None)
    return Allocation(platform="dstack", node_rank=_number(env, "DSTACK_NODE_RANK"), nodes=nodes,
                      hosts=ips if len(ips) == nodes else (),
                      master_addr=None if master is None else _host(master, "DSTACK_MASTER_NODE_IP"),
                      gpus_per_node=_optional(env, "DSTACK_GPUS_PER_NODE"),
                      job_key=_key("dstack", env.get("DSTACK_RUN_ID") or env.get("DSTACK_RUN_NAME")),
                      sources={"node_rank": "DSTACK_NODE_RANK", "nodes": "DSTACK_NODES_NUM",
                               "master_addr": "DSTACK_MASTER_NODE_IP",
                               "gpus_per_node": "DSTACK_GPUS_PER_NODE"})


def _kubernetes(env: Mapping[str, str]) -> Allocation | None:
    """`PET_*` (torchrun's own variables): Kubeflow Trainer v2, PyTorchJob, or set by hand."""
    if not ("PET_NNODES" in env or "PET_NODE_RANK" in env) or "TORCHELASTIC_RUN_ID" in env:
        return None
    legacy = "MASTER_ADDR" in env and "RANK" in env
    platform: Platform = ("pytorchjob" if legacy else
                          "kubeflow-trainer" if "KUBERNETES_SERVICE_HOST" in env else "torchrun")
    rank_from = "PET_NODE_RANK" if "PET_NODE_RANK" in env or not legacy else "RANK"
    addr_from = "PET_MASTER_ADDR" if "PET_MASTER_ADDR" in env or not legacy else "MASTER_ADDR"
    port_from = "PET_MASTER_PORT" if "PET_MASTER_PORT" in env or not legacy else "MASTER_PORT"
    nnodes = env.get("PET_NNODES", "1")
    low, colon, high = nnodes.partition(":")
    if colon and low != high:
        raise LaunchError(f"PET_NNODES={_shown(nnodes)} is an elastic range; distrecipe runs the recipe's "
                          "fixed cluster.nodes (give the job a fixed node count)")
    nodes = _count({"PET_NNODES": low}, "PET_NNODES", default=1)
    proc = env.get("PET_NPROC_PER_NODE")
    ranks = None if proc in (None, "auto", "gpu", "cpu") else _number(env, "PET_NPROC_PER_NODE")
    port = env.get(port_from)
    return Allocation(platform=platform, node_rank=_number(env, rank_from), nodes=nodes,
                      master_addr=_host(env[addr_from], addr_from) if env.get(addr_from) else None,
                      master_port=None if port is None else _port(port, port_from),
                      ranks_per_node=ranks,
                      sources={"node_rank": rank_from, "nodes": "PET_NNODES", "master_addr": addr_from,
                               "master_port": port_from, "ranks_per_node": "PET_NPROC_PER_NODE"})


def _slurm(env: Mapping[str, str]) -> Allocation | None:
    if "SLURM_JOB_ID" not in env:
        return None
    nodelist_from = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    if not env.get(nodelist_from):
        raise LaunchError("inside SLURM but SLURM_JOB_NODELIST is not set")
    hosts = tuple(expand_nodelist(env[nodelist_from]))
    # The batch step also sees SLURM_NTASKS; only an srun step has a step id.
    in_step = "SLURM_STEP_ID" in env
    per_node = in_step and len(hosts) > 1 and env.get("SLURM_NTASKS") == str(len(hosts))
    key = f"slurm{_job(env)}"
    step = env.get("SLURM_STEP_ID")
    if step not in (None, "0"):
        # A batch script may `srun` several launches: SLURM's own `job.step` notation.
        key += f".{_number(env, 'SLURM_STEP_ID')}"
    restarts = _number(env, "SLURM_RESTART_COUNT")
    if restarts:  # a requeued job keeps its id
        key += f"-restart{restarts}"
    return Allocation(platform="slurm", node_rank=_number(env, "SLURM_NODEID"), nodes=len(hosts),
                      hosts=hosts, master_addr=hosts[0], per_node=per_node, job_key=key,
                      gpus_per_node=_optional(env, "SLURM_GPUS_ON_NODE"),
                      sources={"node_rank": "SLURM_NODEID", "nodes": nodelist_from,
                               "master_addr": nodelist_from, "gpus_per_node": "SLURM_GPUS_ON_NODE"})


def check_allocation(allocation: Allocation, plan: Plan) -> None:
    """Refuse an allocation the recipe does not fit, naming both values and their sources.

    SLURM's batch step (distrecipe once, its launcher fanning out) may hold more hosts
    than the recipe uses; everywhere else the platform started a copy on every node, and
    each must be one of the recipe's nodes.
    """
    name, recipe, dims = NAMES[allocation.platform], plan.recipe, plan.dims
    fans_out = allocation.platform == "slurm" and not allocation.per_node
    if allocation.nodes != dims.nodes and not (fans_out and allocation.nodes > dims.nodes):
        raise LaunchError(
            f"the recipe asks for {dims.nodes} node(s) ({_stated(plan, 'cluster.nodes')}), {name} gives "
            f"{allocation.nodes} ({_said(allocation, 'nodes')})", _where(plan, "cluster.nodes"))
    checks = [("ranks_per_node", allocation.ranks_per_node, "processes")]
    if recipe.cluster.device == "gpu":
        checks.append(("gpus_per_node", allocation.gpus_per_node, "GPUs"))
    for what, value, unit in checks:
        if value is not None and value != dims.gpus_per_node:
            raise LaunchError(
                f"the recipe runs {dims.gpus_per_node} rank(s) per node "
                f"({_stated(plan, 'cluster.gpus_per_node')}), {name} gives {value} {unit} per node "
                f"({_said(allocation, what)})", _where(plan, "cluster.gpus_per_node"))


def _stated(plan: Plan, key: str) -> str:
    """The recipe's key, and resolution's word for its value where the recipe wrote none
    (a written one is the error's position)."""
    if key in plan.recipe.where:
        return key
    return f"{key}: {plan.provenance.get(key, 'default')}"


def _where(plan: Plan, key: str) -> Position:
    """The value's position, else its section's, else the recipe's start: one positioned line."""
    return plan.recipe.at(key, key.rpartition(".")[0])


def _said(allocation: Allocation, what: str) -> str:
    return allocation.sources.get(what, what)


def _shown(text: str) -> str:
    return repr(one_line(text if len(text) <= 80 else text[:80] + "..."))


def _number(env: Mapping[str, str], name: str) -> int:
    """A count a platform sets (0 when unset), refused by name when it is not one."""
    value = env.get(name) or "0"
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise LaunchError(f"{name}={_shown(value)} is not a number")
    return int(value)


def _optional(env: Mapping[str, str], name: str) -> int | None:
    return _number(env, name) if env.get(name) else None


def _count(env: Mapping[str, str], name: str, *, default: int | None) -> int:
    """A node count: at least 1, at most what a recipe may ask for."""
    if not env.get(name):
        if default is None:
            raise LaunchError(f"{name} is not set")
        return default
    count = _number(env, name)
    if not 1 <= count <= max_hosts():
        raise LaunchError(f"{name}={count} is not a node count (1 to {max_hosts():,})")
    return count


def _hosts(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A newline-separated address list (SkyPilot's, dstack's), bounded and each one word."""
    text = env.get(name, "")
    if text.count("\n") >= max_hosts():
        raise LaunchError(f"{name} lists more than {max_hosts():,} hosts, the most a recipe may ask for")
    return tuple(_host(line.strip(), name) for line in text.splitlines() if line.strip())


def _host(text: str, name: str) -> str:
    if not _HOST.match(text):
        raise LaunchError(f"{name} holds {_shown(text)}, which is not a host name or address")
    return text


def _port(text: str, name: str) -> int:
    port = _number({name: text}, name)
    if not 1 <= port <= 65535:
        raise LaunchError(f"{name}={port} is not a TCP port")
    return port


def _job(env: Mapping[str, str]) -> str:
    job = env["SLURM_JOB_ID"]
    if not (job.isascii() and job.isdigit() and len(job) <= 20):
        raise LaunchError(f"SLURM_JOB_ID={_shown(job)} is not a number")
    return job


def _key(platform: str, job: str | None) -> str | None:
    """A platform's job id as part of a directory name: its letters, digits, `.`, `_`, `-`."""
    if not job:
        return None
    cleaned = _KEY.sub("-", job).strip(".-")[:KEY_LENGTH]
    return f"{platform}-{cleaned}" if cleaned else None
