"""Kubernetes training jobs as facts: Kubeflow Trainer's TrainJob, KubeRay's RayJob, PyTorchJob.

What the operators do with a manifest that their CRDs do not say, read from their
sources at the release tags the tests pin (`tests/k8s/crds/PROVENANCE.csv`):

* Kubeflow Trainer v2.3.0 (`kubeflow/trainer`): the torch plugin injects `PET_NNODES`,
  `PET_NPROC_PER_NODE`, `PET_NODE_RANK`, `PET_MASTER_ADDR`, `PET_MASTER_PORT` into the
  `node` container and its webhook refuses a TrainJob that sets them
  (`pkg/runtime/framework/plugins/torch/torch.go:56-87`, `pkg/constants/constants.go:300`);
  without `numProcPerNode`, `PET_NPROC_PER_NODE` is `auto` when the node's resources name a
  GPU, else the CPU request (or limit), at least 1 (`torch.go:117-176`, `getNumCPUPerNode`
  at :228), so a TrainJob that sets only memory runs one process per node.
* KubeRay v1.7.0 (`ray-project/kuberay`, `ray-operator/controllers/ray/utils/validation.go`),
  checked when the controller reconciles, not when the manifest is applied: a RayJob name of
  at most 47 characters (`constant.go:381`: the RayCluster's 53 less the 6 of its suffix)
  and a DNS-1035 label (:533-541); worker groups with both `minReplicas` and `maxReplicas`
  without autoscaling, never negative, min ≤ max (:103-140); `suspend` and
  `ttlSecondsAfterFinished` only with `shutdownAfterJobFinishes` (:543-553, :753).
* training-operator v1.9.0 (`kubeflow/training-operator`,
  `pkg/webhooks/pytorch/pytorchjob_webhook.go:80-160`): a DNS-1035 name, replica types
  `Master` and `Worker` only, a container named `pytorch` with an image in each, exactly
  one `Master`, `Worker` replicas at least 1; its controller sets `PET_NNODES` to all
  replicas, `PET_NODE_RANK` to the Master's 0 and the Workers' 1..N-1
  (`pkg/controller.v1/pytorch/envvar.go:43-130`).

`breaches` applies them to a manifest as plain data; lint words each as a finding
(`lint/rules/k8s.py`), and `launch --k8s` writes manifests that have none. Pure: no
Kubernetes client, no network.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from distrecipe.keys import get, integer, section
from distrecipe.source import KeyPath

ManifestKind = Literal["trainjob", "rayjob", "pytorchjob"]

API_VERSIONS: dict[ManifestKind, tuple[str, str]] = {
    "trainjob": ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    "rayjob": ("ray.io/v1", "RayJob"),
    "pytorchjob": ("kubeflow.org/v1", "PyTorchJob"),
}
"""The `apiVersion` and `kind` each manifest is written with (the CRDs' served versions)."""

RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
"""What Kubeflow Trainer's torch plugin injects and refuses to be given (torchrun's own
`PET_*` flag defaults: `torch/distributed/argparse_util.py`)."""
TRAINER_PORT = 29500
"""`PET_MASTER_PORT` of a TrainJob (`constants.ContainerTrainerPort`)."""
TRAINER_CONTAINER = "node"
TRAINER_JOB = "node"
"""The replicated job of the `torch-distributed` runtime that runs the trainer's nodes (the
one labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`): what a runtime patch names."""
PYTORCH_CONTAINER = "pytorch"
PYTORCH_REPLICAS = ("Master", "Worker")
GPU = "nvidia.com/gpu"
"""The GPU resource name `launch --k8s` writes (NVIDIA's device plugin)."""

NAME_LIMIT = 63
"""A DNS-1035 label's length limit (TrainJob's CEL rule, PyTorchJob's webhook)."""
RAYJOB_NAME_LIMIT = 47
"""KubeRay's `MaxRayJobNameLength`: the RayCluster it creates appends 6 characters."""
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
COMMAND_ITEMS = 128
"""`trainer.command` and `trainer.args` each hold at most 128 words (TrainJob's CRD)."""

_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+]?[0-9]+)?")
_FACTORS = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
            "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def kind_of(data: Any) -> ManifestKind | None:
    """Which job a manifest is, by its `apiVersion` group and `kind`; None for any other."""
    if not isinstance(data, dict):
        return None
    api, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return None
    for name, (version, written) in API_VERSIONS.items():
        if kind == written and api.partition("/")[0] == version.partition("/")[0]:
            return name
    return None


def job_name(name: str, limit: int = NAME_LIMIT) -> str:
    """A recipe name (letters, digits, `.`, `_`, `-`) as a DNS-1035 label of at most `limit`."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label[:1].isalpha():
        label = f"job-{label}".rstrip("-")
    return label[:limit].rstrip("-")


def quantity_value(value: Any) -> int | None:
    """`resource.Quantity.Value()`: the amount rounded up to a whole number (`500m` CPU is 1),
    None for what is not a quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    number, suffix = Fraction(match[1]), match[2] or ""
    if suffix in _FACTORS:  # a binary or decimal SI suffix ("E" is exa, "Ei" exbi)
        amount = number * _FACTORS[suffix]
    else:  # a decimal exponent: e3, E+6
        exponent = int(suffix[1:].lstrip("+"))
        if number and exponent > 19:  # beyond int64 whatever the digits: Value() saturates there
            return INT64_MAX
        amount = number * 10**exponent
    return min(math.ceil(amount), INT64_MAX)


INT64_MAX = 2**63 - 1
"""Where `resource.Quantity.Value()` stops: an int64."""


def gpus(resources: Any) -> int:
    """GPUs a container's resources ask for, as Trainer counts them (`runtime.GetNumGPUPerNode`:
    any resource whose name holds `gpu`, requests first, then limits)."""
    for part in ("requests", "limits"):
        section = resources.get(part) if isinstance(resources, dict) else None
        for name, amount in (section.items() if isinstance(section, dict) else ()):
            if "gpu" in str(name).lower() and (count := quantity_value(amount)):
                return count
    return 0


def trainer_processes(trainer: dict[str, Any]) -> tuple[int | None, str]:
    """What `PET_NPROC_PER_NODE` a TrainJob's `trainer` gives (None: torchrun's `auto`, one per
    GPU it sees), and why, as the torch plugin decides it."""
    written = trainer.get("numProcPerNode")
    if written is not None:
        return integer(written), "numProcPerNode"
    resources = trainer.get("resourcesPerNode")
    if gpus(resources):
        return None, "auto: resourcesPerNode names a GPU"
    cpu = quantity_value(get(resources, "requests", "cpu")) or quantity_value(get(resources, "limits", "cpu"))
    cpu = cpu or 0
    return max(1, cpu), ("the CPU count of resourcesPerNode" if cpu else
                         "no numProcPerNode and no GPU or CPU in resourcesPerNode")


@dataclass(frozen=True, slots=True)
class Breach:
    """One rule a manifest breaks: its code, the key it is about, and the operator's words."""

    code: str
    path: KeyPath
    message: str


def breaches(kind: ManifestKind, data: dict[str, Any]) -> Iterator[Breach]:
    """Every webhook and controller rule `data` breaks, in the order of its keys."""
    yield from _name(kind, data)
    spec = section(data, "spec")
    if kind == "trainjob":
        yield from _trainjob(spec)
    elif kind == "rayjob":
        yield from _rayjob(spec)
    else:
        yield from _pytorchjob(spec)


def _name(kind: ManifestKind, data: dict[str, Any]) -> Iterator[Breach]:
    name = get(data, "metadata", "name")
    if not isinstance(name, str):
        return
    limit = RAYJOB_NAME_LIMIT if kind == "rayjob" else NAME_LIMIT
    written = API_VERSIONS[kind][1]
    if len(name) > limit:
        why = " (the RayCluster it creates appends 6 characters to 53)" if kind == "rayjob" else ""
        yield Breach("DR390", ("metadata", "name"), f"{written} name {name!r} has {len(name)} characters, "
                     f"more than {limit}{why}: try {job_name(name, limit)!r}")
    elif not DNS1035.fullmatch(name):
        yield Breach("DR390", ("metadata", "name"), f"{written} name {name!r} is not a DNS-1035 label "
                     "(lower-case letters, digits and '-', starting with a letter): "
                     f"try {job_name(name, limit)!r}")


def _trainjob(spec: dict[str, Any]) -> Iterator[Breach]:
    trainer = spec.get("trainer")
    if not isinstance(trainer, dict):
        return
    env = trainer.get("env")
    for index, item in enumerate(env if isinstance(env, list) else []):
        name = item.get("name") if isinstance(item, dict) else None
        if name in RESERVED_ENV:
            yield Breach("DR391", ("spec", "trainer", "env", index, "name"),
                         f"the torch runtime sets {name} itself and refuses a TrainJob that sets it "
                         f"(must not have reserved envs: {', '.join(RESERVED_ENV)})")
    written = trainer.get("numProcPerNode")
    if isinstance(written, str):
        yield Breach("DR392", ("spec", "trainer", "numProcPerNode"),
                     f"numProcPerNode {written!r} is refused since Trainer v2.2, where it became an "
                     "integer: write the processes per node (the GPUs of each node)")
    elif written is None and "resourcesPerNode" in trainer:
        processes, why = trainer_processes(trainer)
        resources = trainer.get("resourcesPerNode")
        cpu = get(resources, "requests", "cpu") is not None or get(resources, "limits", "cpu") is not None
        # A CPU count the file states is the process count it asks for (a CPU job, as Trainer's
        # examples run); the breach is a GPU node whose override names neither GPU nor CPU.
        if processes is not None and not cpu:
            yield Breach("DR392", ("spec", "trainer", "resourcesPerNode"),
                         f"without numProcPerNode, each node runs {processes} process(es) ({why}), "
                         "whatever GPUs the runtime's nodes have; state numProcPerNode")


def _rayjob(spec: dict[str, Any]) -> Iterator[Breach]:
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    if spec.get("suspend") is True and not shutdown:
        yield Breach("DR395", ("spec", "suspend"), "a RayJob with shutdownAfterJobFinishes false may not "
                     "be suspended (KubeRay's ValidateRayJobSpec)")
    ttl = integer(spec.get("ttlSecondsAfterFinished"))
    if ttl and not shutdown:
        yield Breach("DR395", ("spec", "ttlSecondsAfterFinished"), "a RayJob with shutdownAfterJobFinishes "
                     "false cannot have ttlSecondsAfterFinished (KubeRay's ValidateRayJobSpec)")
    cluster = spec.get("rayClusterSpec")
    if not isinstance(cluster, dict):
        return
    if not shutdown:
        yield Breach("DR396", ("spec",), "without shutdownAfterJobFinishes: true the Ray cluster (and its "
                     "GPUs) stays up after the job ends")
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    groups = cluster.get("workerGroupSpecs")
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, dict):
            path = ("spec", "rayClusterSpec", "workerGroupSpecs", index)
            yield from _worker_group(group, path, autoscaling)


def _worker_group(group: dict[str, Any], path: KeyPath, autoscaling: bool) -> Iterator[Breach]:
    name = group.get("groupName", path[-1])
    low, high, replicas = (group.get(key) for key in ("minReplicas", "maxReplicas", "replicas"))
    if not autoscaling and (low is None or high is None):
        yield Breach("DR394", path, f"worker group {name} must set both minReplicas and maxReplicas when "
                     "autoscaling is disabled (KubeRay's ValidateRayClusterSpec)")
    for key, value in (("minReplicas", low), ("maxReplicas", high)):
        if isinstance(value, int) and value < 0:
            yield Breach("DR394", (*path, key), f"worker group {name} has negative {key} {value}")
    if isinstance(low, int) and isinstance(high, int):
        if low > high:
            yield Breach("DR394", (*path, "minReplicas"),
                         f"worker group {name} has minReplicas {low} greater than maxReplicas {high}")
        elif isinstance(replicas, int) and not low <= replicas <= high and not autoscaling:
            yield Breach("DR394", (*path, "replicas"), f"worker group {name} asks for {replicas} replicas "
                         f"outside [{low}, {high}]: KubeRay starts {min(max(replicas, low), high)}")


def _pytorchjob(spec: dict[str, Any]) -> Iterator[Breach]:
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, dict):
        return
    root = ("spec", "pytorchReplicaSpecs")
    for role, replica in replicas.items():
        if role not in PYTORCH_REPLICAS:
            yield Breach("DR393", (*root, role), f"replica type {role!r} is not supported: "
                         f"{' or '.join(PYTORCH_REPLICAS)}")
            continue
        replica = replica if isinstance(replica, dict) else {}
        count = replica.get("replicas")
        if role == "Master" and count != 1:
            yield Breach("DR393", (*root, role, "replicas"),
                         f"Master replicas must be 1 (is {'unset' if count is None else count})")
        elif role == "Worker" and isinstance(count, int) and count < 1:
            yield Breach("DR393", (*root, role, "replicas"),
                         f"Worker replicas must be at least 1 (is {count})")
        containers = get(replica, "template", "spec", "containers")
        containers = containers if isinstance(containers, list) else []
        if not any(isinstance(c, dict) and c.get("name") == PYTORCH_CONTAINER for c in containers):
            yield Breach("DR393", (*root, role, "template", "spec", "containers"),
                         f"{role} must have a container named {PYTORCH_CONTAINER!r} (the operator "
                         "sets the rendezvous variables and ports in it)")
        for index, container in enumerate(containers):
            if isinstance(container, dict) and not container.get("image"):
                yield Breach("DR393", (*root, role, "template", "spec", "containers", index),
                             f"{role} container {container.get('name', index)} has no image")


def nodes_and_processes(kind: ManifestKind, data: dict[str, Any]) -> tuple[int | None, int | None, str]:
    """The nodes a job starts, the processes (or GPUs) on each, and which keys said so.

    A TrainJob: `numNodes` (else the runtime's 1) × the processes `trainer_processes`
    gives; a PyTorchJob: all replicas × `nprocPerNode`; a RayJob: its workers × the GPUs
    of one worker (verl's `trainer.nnodes × n_gpus_per_node` must fit in them).
    """
    spec = section(data, "spec")
    if kind == "trainjob":
        trainer = section(spec, "trainer")
        processes, why = trainer_processes(trainer)
        return integer(trainer.get("numNodes", 1)), processes, f"numNodes × {why}"
    if kind == "pytorchjob":
        replicas = section(spec, "pytorchReplicaSpecs")
        counts = [integer(r.get("replicas", 1)) if isinstance(r, dict) else None for r in replicas.values()]
        nodes = sum(c for c in counts if c) if counts and all(counts) else None
        nproc = spec.get("nprocPerNode")
        return nodes, integer(int(nproc)) if isinstance(nproc, str) and nproc.isdigit() else None, \
            "the replicas × nprocPerNode"
    groups = get(spec, "rayClusterSpec", "workerGroupSpecs")
    groups = [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
    if len(groups) != 1:
        return None, None, "its worker groups"
    containers = get(groups[0], "template", "spec", "containers")
    first = containers[0] if isinstance(containers, list) and containers else {}
    return integer(groups[0].get("replicas")), gpus(section(first, "resources")) or None, \
        "workerGroupSpecs[0].replicas × its nvidia.com/gpu"


def rayjob_gpus(data: dict[str, Any]) -> tuple[int, str]:
    """The GPUs a RayJob's cluster has, head included (verl counts every node's), and how."""
    cluster = section(data, "spec", "rayClusterSpec")
    containers = get(cluster, "headGroupSpec", "template", "spec", "containers")
    head = gpus(section(containers[0], "resources")) if isinstance(containers, list) and containers and \
        isinstance(containers[0], dict) else 0
    total, parts = head, [f"the head's {head}"]
    groups = cluster.get("workerGroupSpecs")
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        listed = get(group, "template", "spec", "containers")
        first = listed[0] if isinstance(listed, list) and listed and isinstance(listed[0], dict) else {}
        replicas, each = integer(get(group, "replicas")) or 0, gpus(section(first, "resources"))
        total += replicas * each
        parts.append(f"workerGroupSpecs[{index}]: {replicas} × {each}")
    return total, ", ".join(parts)
