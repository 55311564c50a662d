"""`launch --k8s`: the job as a Kubernetes manifest (TrainJob, RayJob for verl and OpenRLHF, PyTorchJob).

* A Kubeflow Trainer v2 `TrainJob` on the `torch-distributed` ClusterTrainingRuntime:
  `numNodes`, an explicit `numProcPerNode` (an integer since v2.2; left out, a node
  whose resources name no GPU gets one process per CPU, so a TrainJob that sets only
  memory runs one), `nvidia.com/gpu` and the stated CPU and memory per node, and a
  command that runs this launch on each node (`node_command`).
* A KubeRay `RayJob` for verl and OpenRLHF: a head without GPUs, one worker group of
  `cluster.nodes` workers (`replicas = minReplicas = maxReplicas`) with
  `gpus_per_node` GPUs each, the trainer's entry point (verl's `main_ppo` with the emitted
  overrides, OpenRLHF's `train_ppo_ray` with the emitted options) as the entrypoint
  (quoted for the `bash` KubeRay's submitter pastes it into), and
  `shutdownAfterJobFinishes` so the GPUs go back when the job ends.
* A `PyTorchJob` (kubeflow.org/v1, the training-operator's) only when asked for: a
  Master and nodes-1 Workers running the same command.

No API server can run where distrecipe is tested: the manifests are judged there by
the operators' own CRDs (pinned by release tag, unknown fields refused, defaults and
CEL rules applied), their webhook and controller rules (`engines.k8s`, lint's DR38x)
and Kubernetes' core schemas for the pod templates; the commands run as two local
process trees with the variables the operators inject, and the RayJob's entrypoint is
submitted to a two-raylet Ray cluster.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distrecipe.engines.k8s import (
    API_VERSIONS,
    COMMAND_ITEMS,
    GPU,
    NAME_LIMIT,
    PYTORCH_CONTAINER,
    RAYJOB_NAME_LIMIT,
    TRAINER_CONTAINER,
    TRAINER_JOB,
    ManifestKind,
    job_name,
)
from distrecipe.engines.runner import RAY_TRAINERS
from distrecipe.errors import LaunchError
from distrecipe.job import Plan
from distrecipe.launch.prepare import emit_configs, hand_off, parse_program
from distrecipe.recipe import ProgramKind
from distrecipe.translator.load import split_set

SHM_VOLUME = "dshm"
SHARED_MEMORY: dict[str, Any] = {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}
"""A memory-backed emptyDir for `/dev/shm`: a container gets 64 MiB there otherwise, which
NCCL's shared-memory transport and DataLoader workers (tensors passed through it) outgrow.
Its pages count against the container's memory limit; no `sizeLimit` is written."""
SHM_MOUNT: dict[str, str] = {"name": SHM_VOLUME, "mountPath": "/dev/shm"}
PATCH_MANAGER = "distrecipe"
"""The `manager` of the TrainJob's runtime patch (Trainer keys its patches by it)."""
PLACEHOLDER_IMAGE = "SET-launch.k8s.image"
"""The image written when none is stated: not a valid reference, so no pod starts."""
PET_OPTIONS = ("--node-rank", "$(PET_NODE_RANK)", "--set", "launch.master_addr=$(PET_MASTER_ADDR)",
               "--set", "launch.master_port=$(PET_MASTER_PORT)")
"""What each node is told on its command line: its rank and node 0's address, from the
variables the operator injects (the kubelet expands `$(NAME)` in a container's command)."""
WORKER_GROUP = "workers"


class _Dumper(yaml.SafeDumper):
    """Every container written out in full: no `&id001` anchors for a command two share."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeLaunch:
    """This `launch` command as every node repeats it (`slurm_argv`'s counterpart)."""

    recipe: str
    """The recipe's path as the image holds it: relative to the working directory."""
    overrides: tuple[str, ...] = ()
    program: tuple[str, ...] = ()
    program_kind: ProgramKind | None = None
    allow_override: bool = False
    allow_no_fit: bool = False
    timeout: float | None = None


def node_command(plan: Plan, python: str, node: NodeLaunch) -> list[str]:
    """What each node's container runs: `distrecipe launch` for that node.

    The operator starts one container per node with `PET_NNODES`, `PET_NODE_RANK`,
    `PET_MASTER_ADDR` and `PET_MASTER_PORT` set (Trainer's torch plugin; PyTorchJob's
    controller sets the same). Their values reach distrecipe as `PET_OPTIONS`; once
    `launch` reads the `PET_*` variables itself, this is the command without them.
    """
    argv = [python, "-m", "distrecipe", "launch", node.recipe]
    argv += [word for item in node.overrides if not _sets_k8s(item) for word in ("--set", item)]
    argv += ["--target", plan.backend]
    argv += ["--program-kind", node.program_kind] if node.program_kind is not None else []
    argv += ["--allow-override"] if node.allow_override else []
    argv += ["--allow-no-fit"] if node.allow_no_fit else []
    argv += ["--timeout", str(node.timeout)] if node.timeout is not None else []
    argv += list(PET_OPTIONS) if plan.dims.nodes > 1 else []
    argv += ["--", *node.program] if node.program else []
    return argv


def _sets_k8s(item: str) -> bool:
    """Whether a `--set` sets `launch.k8s.*`: the manifest's own settings, which each
    node's command leaves out."""
    split = split_set(item)
    return split is not None and split.path[:2] == ("launch", "k8s")


def manifest_kind(plan: Plan) -> ManifestKind:
    """`launch.k8s.kind` (`--k8s-kind`), else a RayJob for verl and OpenRLHF and a TrainJob
    for the rest."""
    stated = plan.recipe.launch.k8s.kind
    trainer = RAY_TRAINERS[plan.backend][0] if plan.backend in RAY_TRAINERS else None
    kind: ManifestKind = ("rayjob" if trainer else "trainjob") if stated == "auto" else stated
    where = plan.recipe.where.get("launch.k8s.kind")
    if kind == "rayjob" and trainer is None:
        raise LaunchError(f"a RayJob runs verl or OpenRLHF on a Ray cluster; launcher {plan.backend} runs "
                          "as a TrainJob (--k8s-kind trainjob)", where)
    if kind != "rayjob" and trainer is not None:
        raise LaunchError(f"{trainer} runs on a Ray cluster, which a {API_VERSIONS[kind][1]} does not start: "
                          "use --k8s-kind rayjob", where)
    return kind


def k8s_manifest(plan: Plan, kind: ProgramKind, *, recipe: str, overrides: Sequence[str] = (),
                 program: Sequence[str] = (), program_kind: ProgramKind | None = None,
                 allow_override: bool = False, timeout: float | None = None,
                 cwd: Path | None = None, allow_no_fit: bool = False) -> tuple[str, list[str]]:
    """The manifest's YAML text, and notes for the user (a placeholder, a renamed job)."""
    manifest = manifest_kind(plan)
    notes: list[str] = []
    settings = plan.recipe.launch.k8s
    limit = RAYJOB_NAME_LIMIT if manifest == "rayjob" else NAME_LIMIT
    name = job_name(plan.recipe.name, limit)
    if name != plan.recipe.name:
        notes.append(f"distrecipe: the recipe's name {plan.recipe.name} is not a Kubernetes job name "
                     f"(a DNS-1035 label of at most {limit} characters): the job is named {name}")
    if settings.image is None:
        notes.append(f"distrecipe: set launch.k8s.image (or --image): the manifest's image is the "
                     f"placeholder {PLACEHOLDER_IMAGE}, which no node can pull")
    user_program = parse_program(plan, program)
    configs = emit_configs(plan, kind)  # an engine's refusal is the user's now, not on the cluster
    given, _ = hand_off(plan, user_program, kind, run_dir=Path("/run"), configs=configs.files,
                        allow_override=allow_override)
    metadata = {"name": name, **({"namespace": settings.namespace} if settings.namespace else {})}
    if manifest == "rayjob":
        entry = [settings.python, *(["-m"] if given.module else []), given.target, *given.args]
        spec = rayjob_spec(plan, ray_entrypoint(entry, notes, RAY_TRAINERS[plan.backend][0]))
    else:
        node = NodeLaunch(recipe=image_path(recipe, cwd or Path.cwd(), notes), overrides=tuple(overrides),
                          program=tuple(program), program_kind=program_kind, allow_override=allow_override,
                          allow_no_fit=allow_no_fit, timeout=timeout)
        command = node_command(plan, settings.python, node)
        spec = trainjob_spec(plan, command) if manifest == "trainjob" else pytorchjob_spec(plan, command)
    api, written = API_VERSIONS[manifest]
    document = {"apiVersion": api, "kind": written, "metadata": metadata, "spec": spec}
    header = (f"# {written} for recipe {plan.recipe.name}: {plan.dims.nodes} node(s) x "
              f"{plan.dims.gpus_per_node} {'GPU' if plan.recipe.cluster.device == 'gpu' else 'CPU'} rank(s)\n"
              "# written by `distrecipe launch --k8s`; apply with `kubectl apply -f FILE`\n")
    if manifest != "rayjob":  # KubeRay mounts a /dev/shm of its own in every Ray pod
        header += (f"# each node requests {', '.join(node_requests(plan)[1])}\n"
                   "# /dev/shm: a memory-backed emptyDir for NCCL and DataLoader workers (its pages count "
                   "against the memory limit)\n")
    return header + yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                              width=1 << 16), notes


def image_path(recipe: str, cwd: Path, notes: list[str]) -> str:
    """The recipe's path inside the image: relative to the working directory, as the image
    holds the repository; a recipe outside it keeps its absolute path (a mounted volume)."""
    path = Path(recipe)
    absolute = path if path.is_absolute() else cwd / path
    try:
        return Path(os.path.relpath(absolute, cwd)).as_posix() if absolute.resolve().is_relative_to(
            cwd.resolve()) else _outside(absolute, notes)
    except ValueError:
        return _outside(absolute, notes)


def _outside(path: Path, notes: list[str]) -> str:
    notes.append(f"distrecipe: {path} is outside this directory: the image must hold it at that path")
    return str(path)


def resources(plan: Plan, *, gpu: bool = True) -> dict[str, Any]:
    """A Ray pod's `limits` (requests default to them): its GPUs, and CPU and memory where stated."""
    settings = plan.recipe.launch.k8s
    limits: dict[str, Any] = {}
    if gpu and plan.recipe.cluster.device == "gpu":
        limits[GPU] = plan.dims.gpus_per_node
    limits.update({key: value for key, value in (("cpu", settings.cpu), ("memory", settings.memory))
                   if value is not None})
    return {"limits": limits} if limits else {}


def node_requests(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The CPU and memory each node's pod requests (what the scheduler places it by), and
    where each came from, for the manifest's comment. CPU: `launch.k8s.cpu`, else one per
    rank (distrecipe's default: each rank is a process; DataLoader workers want more).
    Memory: `launch.k8s.memory`, else `cluster.cpu_memory` (the host memory the recipe says
    each node has), else none: said to be unset, never guessed."""
    settings, cluster = plan.recipe.launch.k8s, plan.recipe.cluster
    requests: dict[str, Any] = {}
    if settings.cpu is not None:
        requests["cpu"], said = settings.cpu, [f"cpu {settings.cpu} (launch.k8s.cpu)"]
    else:
        requests["cpu"] = plan.dims.gpus_per_node
        said = [f"cpu {plan.dims.gpus_per_node} (distrecipe's default: one per rank; set launch.k8s.cpu)"]
    if settings.memory is not None:
        requests["memory"] = settings.memory
        said.append(f"memory {settings.memory} (launch.k8s.memory)")
    elif cluster.cpu_memory is not None:
        requests["memory"] = quantity(cluster.cpu_memory)
        said.append(f"memory {requests['memory']} (cluster.cpu_memory)")
    else:
        said.append("memory not stated (set launch.k8s.memory or cluster.cpu_memory; the namespace's "
                    "default request applies)")
    return requests, said


def node_resources(plan: Plan) -> dict[str, Any]:
    """A rank-running pod's resources: `limits` (its GPUs, and CPU and memory where
    `launch.k8s` states them) and `requests` (`node_requests`)."""
    return {**resources(plan), "requests": node_requests(plan)[0]}


def quantity(size: int) -> int | str:
    """Bytes as the shortest exact Kubernetes quantity (`512Gi`, `500G`, or the number)."""
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("T", 10**12), ("G", 10**9),
                           ("M", 10**6), ("Ki", 2**10), ("k", 10**3)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{suffix}"
    return size


def _command_and_args(command: list[str]) -> dict[str, list[str]]:
    """`command`, or `command` and `args` when it has more words than one list may hold."""
    if len(command) <= COMMAND_ITEMS:
        return {"command": command}
    if len(command) > 2 * COMMAND_ITEMS:
        raise LaunchError(f"the node command has {len(command)} words; a TrainJob holds at most "
                          f"{2 * COMMAND_ITEMS} (command and args, {COMMAND_ITEMS} each)")
    return {"command": command[:COMMAND_ITEMS], "args": command[COMMAND_ITEMS:]}


def trainjob_spec(plan: Plan, command: list[str]) -> dict[str, Any]:
    """`numNodes` nodes of `numProcPerNode` ranks, the node's resources, and a runtime patch
    that gives the runtime's node pod its `/dev/shm` (Trainer v2.3's `runtimePatches`: the
    trainer's own fields hold no volume)."""
    settings = plan.recipe.launch.k8s
    trainer: dict[str, Any] = {"image": settings.image or PLACEHOLDER_IMAGE, **_command_and_args(command),
                               "numNodes": plan.dims.nodes, "numProcPerNode": plan.dims.gpus_per_node,
                               "resourcesPerNode": node_resources(plan)}
    pod = {"volumes": [SHARED_MEMORY],
           "containers": [{"name": TRAINER_CONTAINER, "volumeMounts": [SHM_MOUNT]}]}
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": TRAINER_JOB, "template": {"spec": {"template": {"spec": pod}}}}]}}}}
    return {"runtimeRef": {"name": settings.runtime}, "runtimePatches": [patch], "trainer": trainer}


def _container(plan: Plan, name: str, command: list[str] | None, *, gpu: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": plan.recipe.launch.k8s.image or PLACEHOLDER_IMAGE}
    if command is not None:
        container["command"] = command
    if found := resources(plan, gpu=gpu):
        container["resources"] = found
    return container


def pytorchjob_spec(plan: Plan, command: list[str]) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {**_container(plan, PYTORCH_CONTAINER, command, gpu=True),
                     "resources": node_resources(plan), "volumeMounts": [SHM_MOUNT]}
        return {"replicas": count,
                "template": {"spec": {"containers": [container], "volumes": [SHARED_MEMORY]}}}

    replicas = {"Master": replica(1)}
    if plan.dims.nodes > 1:
        replicas["Worker"] = replica(plan.dims.nodes - 1)
    return {"nprocPerNode": str(plan.dims.gpus_per_node), "pytorchReplicaSpecs": replicas}


def rayjob_spec(plan: Plan, entrypoint: str) -> dict[str, Any]:
    nodes = plan.dims.nodes
    head = {"rayStartParams": {}, "template": {"spec": {"containers": [
        _container(plan, "ray-head", None, gpu=False)]}}}
    worker = {"groupName": WORKER_GROUP, "replicas": nodes, "minReplicas": nodes, "maxReplicas": nodes,
              "rayStartParams": {}, "template": {"spec": {"containers": [
                  _container(plan, "ray-worker", None, gpu=True)]}}}
    return {"entrypoint": entrypoint, "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {"headGroupSpec": head, "workerGroupSpecs": [worker]}}


_REREAD = re.compile(r"[$`'\"\\;&|<>()*?\n]|^[~#]")
"""What `sh` would read differently in a word a `list2cmdline` join left bare (brackets and
braces are globs that match no file name a job directory holds)."""


def ray_entrypoint(argv: Sequence[str], notes: list[str] | None = None, trainer: str = "verl") -> str:
    """A RayJob `entrypoint` that gives the trainer (verl, OpenRLHF) exactly `argv`.

    KubeRay's submitter pastes the entrypoint into a `bash -c` line (`ray job submit …
    -- ENTRYPOINT`: `common/job.go:211`, `utils/util.go:1006`), so each word is quoted
    for bash. `ray job submit` joins the words bash gives it with `shlex.join` and the
    job supervisor runs that with `sh` (Ray 2.60, installed here: ray-project/ray#63797).
    Releases before that change joined with `list2cmdline`, which leaves a word without
    spaces bare for `sh` to read again: such a word is named in `notes`.
    """
    reread = [shlex.quote(word) for word in argv if _reread(word)]
    if notes is not None and reread:
        notes.append(f"distrecipe: {trainer} gets {', '.join(reread)} as written from Ray 2.60's "
                     "`ray job submit`; an older Ray image's (list2cmdline) lets sh read them again")
    return shlex.join(argv)


def _reread(word: str) -> bool:
    """Whether `sh` reads `list2cmdline([word])` as something else than `word`."""
    if " " in word or "\t" in word:  # list2cmdline wraps it in double quotes
        return bool(set(word) & set('$`"\\\n'))
    return bool(_REREAD.search(word))
