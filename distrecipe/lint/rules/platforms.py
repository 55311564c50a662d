"""Platforms' job files: the operators' own rules, and the world a job gives its configs.

Kubeflow Trainer, KubeRay and the training-operator check some things only in an
admission webhook or in their controller, after `kubectl apply` has taken the
manifest (KubeRay's only when it reconciles, as an event on the RayJob): those are
`engines.k8s.breaches`, one code each here with its source. DR397 holds a job's
nodes and processes to what its command starts and to the configs it names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distrecipe.engines.argv import Launch, launch_of
from distrecipe.engines.k8s import API_VERSIONS, breaches, gpus, kind_of, rayjob_gpus
from distrecipe.engines.platforms import World, job_commands, job_world, named_recipe, verl_overrides
from distrecipe.engines.shell import Word
from distrecipe.engines.skypilot import label as skypilot_label
from distrecipe.engines.skypilot import refusals as skypilot_refusals
from distrecipe.keys import dotted, get, integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath, SourceError


def _breaches(src: Source, code: str) -> Iterator[Problem]:
    kind = kind_of(src.data)
    if kind is not None:
        for breach in breaches(kind, src.data):
            if breach.code == code:
                yield Problem(breach.path, breach.message)


def name(src: Source) -> Iterator[Problem]:
    """A job name the operator refuses: not a DNS-1035 label, or too long.

    TrainJob's CRD (a CEL rule) and PyTorchJob's webhook want a DNS-1035 label of at
    most 63 characters (lower-case letters, digits and `-`, starting with a letter);
    KubeRay, when it reconciles, refuses a RayJob name over 47 characters, since the
    RayCluster it creates appends 6 to a limit of 53 (`utils/validation.go:533`,
    `constant.go:381`). The message proposes a name that passes.

    Fails: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: SFT_run}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer: {numNodes: 2, numProcPerNode: 8, command: [torchrun, train.py]}
    ```

    Passes: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft-run}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer: {numNodes: 2, numProcPerNode: 8, command: [torchrun, train.py]}
    ```

    Fix: the name the message proposes (`launch --k8s` writes one from the recipe's).
    """
    yield from _breaches(src, "DR390")


def reserved_env(src: Source) -> Iterator[Problem]:
    """A TrainJob that sets a variable the torch runtime injects itself.

    Kubeflow Trainer's torch plugin sets `PET_NNODES`, `PET_NPROC_PER_NODE`,
    `PET_NODE_RANK`, `PET_MASTER_ADDR` and `PET_MASTER_PORT` in the `node` container
    (torchrun reads every option's default from `PET_<OPTION>`), and its webhook refuses
    a TrainJob whose `trainer.env` names one: "must not have reserved envs"
    (`pkg/runtime/framework/plugins/torch/torch.go:56-87`). Say the count in
    `numNodes` / `numProcPerNode` instead.

    Fails: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer:
        numNodes: 2
        numProcPerNode: 8
        command: [torchrun, train.py]
        env: [{name: PET_NPROC_PER_NODE, value: "8"}]
    ```

    Passes: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer:
        numNodes: 2
        numProcPerNode: 8
        command: [torchrun, train.py]
        env: [{name: NCCL_DEBUG, value: WARN}]
    ```

    Fix: drop the variable; state `numNodes` and `numProcPerNode` instead.
    """
    yield from _breaches(src, "DR391")


def processes_per_node(src: Source) -> Iterator[Problem]:
    """A TrainJob whose processes per node are not what its nodes hold.

    Without `numProcPerNode`, Trainer's torch plugin gives torchrun `auto` (one process
    per GPU it sees) only when `resourcesPerNode` names a GPU; otherwise the CPU request
    (else limit), at least 1 (`torch.go:117-176`, `getNumCPUPerNode` at :228). So a
    TrainJob that overrides only memory runs one process per node, whatever its GPUs. A
    CPU count the file states is taken as the processes it asks for (a CPU job, as
    Trainer's own examples run one), and not reported.
    A string (`auto`, `gpu`) was allowed up to Trainer v2.1 and is refused since v2.2,
    where `numProcPerNode` became an integer.

    Fails: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer:
        numNodes: 2
        command: [torchrun, train.py]
        resourcesPerNode: {limits: {memory: 512Gi}}
    ```

    Passes: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer:
        numNodes: 2
        numProcPerNode: 8
        command: [torchrun, train.py]
        resourcesPerNode: {limits: {memory: 512Gi, nvidia.com/gpu: 8}}
    ```

    Fix: state `numProcPerNode` (the GPUs of each node), as `launch --k8s` does.
    """
    yield from _breaches(src, "DR392")


def pytorchjob_replicas(src: Source) -> Iterator[Problem]:
    """A PyTorchJob the training-operator's webhook refuses.

    Replica types are `Master` and `Worker` only; each needs a container named
    `pytorch` (where the operator puts the rendezvous variables and port) with an image;
    a `Master` must have exactly 1 replica, `Worker` at least 1
    (`pkg/webhooks/pytorch/pytorchjob_webhook.go:115-160`, training-operator v1.9.0).

    Fails: pytorchjob
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: sft}
    spec:
      nprocPerNode: "8"
      pytorchReplicaSpecs:
        Master:
          replicas: 2
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1}]}}
    ```

    Passes: pytorchjob
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: sft}
    spec:
      nprocPerNode: "8"
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1}]}}
        Worker:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1}]}}
    ```

    Fix: one `Master`, the other nodes as `Worker` replicas, each with a `pytorch` container.
    """
    yield from _breaches(src, "DR393")


def pytorchjob_without_gpus(src: Source) -> Iterator[Problem]:
    """A PyTorchJob replica whose pod asks for no GPU, while its ranks need them.

    Kubernetes gives a container GPUs only for what its `resources` request
    (`nvidia.com/gpu`, requests or limits); the API server, the training-operator and the
    pod schema all take a pod that asks for none, and the scheduler may place it on any
    node. When torchrun starts N ranks per node (`--nproc_per_node`, or the job's
    `nprocPerNode`) and the job is a GPU job (another replica asks for GPUs, the request
    is written as 0 or left empty, or the command runs DeepSpeed), each such pod gets no
    GPU, and every rank fails at its first CUDA call.

    Fails: pytorchjob
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: sft}
    spec:
      nprocPerNode: "8"
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1,
                                          resources: {limits: {memory: 512Gi}}}]}}
        Worker:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
    ```

    Passes: pytorchjob
    ```yaml
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: sft}
    spec:
      nprocPerNode: "8"
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
        Worker:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: ghcr.io/org/train:1,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
    ```

    Fix: request `nvidia.com/gpu` (in `limits`) equal to the ranks each node starts.
    """
    ranks, how = _ranks_per_node(src)
    if ranks is None or ranks < 1:
        return
    replicas = src.section("spec", "pytorchReplicaSpecs")
    containers: list[tuple[str, KeyPath, Any]] = []
    for role, replica in replicas.items():
        listed = get(replica, "template", "spec", "containers")
        for index, container in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(container, dict) and container.get("name") == "pytorch":
                path: KeyPath = ("spec", "pytorchReplicaSpecs", role, "template", "spec", "containers", index)
                containers.append((str(role), path, container.get("resources")))
    asked = {role: gpus(resources) for role, _, resources in containers}
    deepspeed = any(launch.launcher == "deepspeed" or {"deepspeed", "deepspeed_config"} & set(launch.flags)
                    for words in job_commands("pytorchjob", src.doc) if (launch := launch_of(words)))
    for role, path, resources in containers:
        if asked[role]:
            continue
        written = _gpu_key(resources)
        if written is None and not deepspeed and not any(asked.values()):
            continue  # a CPU job (gloo) asks for none
        if written is not None:
            part, key = written
            at: KeyPath = (*path, "resources", part, key)
            said = f"resources.{part}.{key} is {_shown(get(resources, part, key))}"
        else:
            at = (*path, "resources") if isinstance(resources, dict) else path
            said = "none in resources"
        yield Problem(at, f"the {role}'s pytorch container requests no nvidia.com/gpu ({said}), yet torchrun "
                          f"starts {ranks} rank(s) on its node ({how}): Kubernetes gives the pod no GPU, so "
                          f"every rank fails at its first CUDA call; request nvidia.com/gpu: {ranks}",
                      key=True)


def _ranks_per_node(src: Source) -> tuple[int | None, str]:
    """The ranks torchrun starts on each node of a PyTorchJob: its command's
    `--nproc_per_node` (DeepSpeed's `--num_gpus`), else the job's `nprocPerNode`."""
    for words in job_commands("pytorchjob", src.doc):
        launch = launch_of(words)
        word = launch.option("nproc_per_node", "num_gpus") if launch is not None else None
        if word is not None and word.value is not None and word.value.isdigit():
            name = "nproc_per_node" if launch is not None and launch.launcher != "deepspeed" else "num_gpus"
            return int(word.value), f"--{name} {word.value}"
    written = src.get("spec", "nprocPerNode")
    if isinstance(written, str) and written.isdigit():
        return int(written), f"nprocPerNode {written}"
    return None, ""


def _gpu_key(resources: Any) -> tuple[str, str] | None:
    """Where a container's resources name a GPU (`limits`, `nvidia.com/gpu`), if they do."""
    for part in ("limits", "requests"):
        section_ = resources.get(part) if isinstance(resources, dict) else None
        for name in section_ if isinstance(section_, dict) else ():
            if "gpu" in str(name).lower():
                return part, str(name)
    return None


def _shown(value: Any) -> str:
    return "empty" if value is None or value == "" else str(value)


def rayjob_worker_replicas(src: Source) -> Iterator[Problem]:
    """A RayJob worker group KubeRay refuses, or starts with another size than written.

    Without autoscaling, each worker group must set both `minReplicas` and `maxReplicas`,
    neither negative, min ≤ max (`ValidateRayClusterSpec`, `utils/validation.go:103-140`,
    checked when the controller reconciles, not when the manifest is applied); KubeRay
    clamps `replicas` into [min, max]. verl needs a fixed cluster:
    `replicas = minReplicas = maxReplicas = trainer.nnodes`.

    Fails: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=8
      shutdownAfterJobFinishes: true
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: verlai/verl:app}]}}
        workerGroupSpecs:
        - groupName: gpu
          replicas: 2
          template: {spec: {containers: [{name: ray-worker, image: verlai/verl:app,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
    ```

    Passes: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=8
      shutdownAfterJobFinishes: true
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: verlai/verl:app}]}}
        workerGroupSpecs:
        - groupName: gpu
          replicas: 2
          minReplicas: 2
          maxReplicas: 2
          template: {spec: {containers: [{name: ray-worker, image: verlai/verl:app,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
    ```

    Fix: `minReplicas` and `maxReplicas` equal to `replicas` (verl: `trainer.nnodes`).
    """
    yield from _breaches(src, "DR394")


def rayjob_refused(src: Source) -> Iterator[Problem]:
    """A RayJob that KubeRay refuses for its suspend or TTL settings.

    `suspend` and `ttlSecondsAfterFinished` only go with `shutdownAfterJobFinishes:
    true` (`ValidateRayJobSpec`, `utils/validation.go:543-553`, and
    `validateDeletionConfiguration` at :753); the refusal is an event on the RayJob at
    reconcile time, not an error from `kubectl apply`.

    Fails: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 train.py
      ttlSecondsAfterFinished: 600
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.60.0}]}}
    ```

    Passes: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 train.py
      shutdownAfterJobFinishes: true
      ttlSecondsAfterFinished: 600
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.60.0}]}}
    ```

    Fix: `shutdownAfterJobFinishes: true`, or drop `suspend` / `ttlSecondsAfterFinished`.
    """
    yield from _breaches(src, "DR395")


def rayjob_cluster_kept(src: Source) -> Iterator[Problem]:
    """A RayJob whose Ray cluster outlives the job.

    Without `shutdownAfterJobFinishes: true`, KubeRay leaves the RayCluster it created
    (and every GPU its workers hold) running after the entrypoint ends; KubeRay's docs
    advise setting it for batch jobs such as a verl training.

    Fails: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 train.py
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.60.0}]}}
    ```

    Passes: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 train.py
      shutdownAfterJobFinishes: true
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.60.0}]}}
    ```

    Fix: `shutdownAfterJobFinishes: true`.
    """
    yield from _breaches(src, "DR396")


def skypilot_task_refused(src: Source) -> Iterator[Problem]:
    """A SkyPilot task `sky launch` refuses before it asks any cloud.

    `sky launch` reads each task with `Task.from_yaml_config`: SkyPilot's task schema (no
    unknown field, with a did-you-mean; `num_nodes` an integer, `setup` and `run` text,
    env names `[A-Za-z_][A-Za-z0-9_]*`), then an `envs` value left null is refused (it
    must come from `--env` at launch: "Environment variable 'HF_TOKEN' is None"), then
    `resources` against its own schema (`accelerators`, `use_spot` a boolean, each
    `any_of`/`ordered` choice; `gpus` is another name for `accelerators`). The schemas
    are SkyPilot's own, copied from the installed release into a table
    (`scripts/skypilot_tables.py`), as the operators' CRDs judge a TrainJob; every
    refusal is reported where SkyPilot stops at the first, all before a node is booked.

    Fails: skypilot
    ```yaml
    num_nodes: 2
    resources: {accelerators: H100:8}
    envs:
      WANDB_PROJECT: sft
      HF_TOKEN:
    run: |
      torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
    ```

    Fails: skypilot
    ```yaml
    num_nodes: "2"
    resources: {accelerator: H100:8}
    run: |
      torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
    ```

    Passes: skypilot
    ```yaml
    num_nodes: 2
    resources: {accelerators: H100:8}
    envs:
      WANDB_PROJECT: sft
      HF_TOKEN: ""
      MAX_JOBS: 4
    run: |
      torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
    ```

    Fix: what the message says; an env the launch must supply is passed as
    `sky launch --env HF_TOKEN` (or `--secret`) and written as `HF_TOKEN: ""` only if empty is meant.
    """
    for refusal in skypilot_refusals(src.data):
        yield Problem(refusal.path, f"{dotted(refusal.path)}: sky launch refuses the task "
                      f"({skypilot_label()}): {refusal.message}", key=refusal.key)


def job_world_mismatch(src: Source) -> Iterator[Problem]:
    """A job whose nodes and processes are not what its command or configs say.

    A TrainJob gives `numNodes` × `numProcPerNode` (or × its GPUs, when torchrun's
    `auto` decides), a PyTorchJob its replicas × `nprocPerNode`, a SkyPilot task
    `num_nodes` × the count of `resources.accelerators`; the command that runs on each
    node must start that world: a launcher that states `--nnodes`/`--nproc_per_node`
    (or DeepSpeed's `--num_nodes`/`--num_gpus`) otherwise, an Accelerate config
    (`--config_file`) with another `num_processes` or `num_machines`, or a recipe
    (`distrecipe launch RECIPE`) with other `cluster.nodes` × `gpus_per_node` trains
    another job than the one booked. verl in a RayJob must fit its
    `trainer.nnodes × trainer.n_gpus_per_node` into the cluster's GPUs, or it stops in
    `_check_resource_available` ("Total available GPUs … is less than total desired
    GPUs …", `verl/single_controller/ray/base.py`). A ds_config the command names is
    checked at the job's world by the batch rules (DR101).

    Fails: trainjob
    ```yaml
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name: sft}
    spec:
      runtimeRef: {name: torch-distributed}
      trainer:
        numNodes: 2
        numProcPerNode: 8
        command: [accelerate, launch, --config_file, accelerate.yaml, train.py]
    ```
    ```yaml accelerate.yaml
    distributed_type: MULTI_GPU
    num_machines: 1
    num_processes: 8
    ```

    Fails: rayjob
    ```yaml
    apiVersion: ray.io/v1
    kind: RayJob
    metadata: {name: ppo}
    spec:
      entrypoint: python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=8
      shutdownAfterJobFinishes: true
      rayClusterSpec:
        headGroupSpec:
          template: {spec: {containers: [{name: ray-head, image: verlai/verl:app}]}}
        workerGroupSpecs:
        - groupName: gpu
          replicas: 1
          minReplicas: 1
          maxReplicas: 1
          template: {spec: {containers: [{name: ray-worker, image: verlai/verl:app,
                                          resources: {limits: {nvidia.com/gpu: 8}}}]}}
    ```

    Passes: skypilot
    ```yaml
    num_nodes: 2
    resources: {accelerators: H100:8}
    run: |
      torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py --deepspeed ds.json
    ```
    ```json ds.json
    {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}
    ```

    Fix: one world on both sides: the job's counts, or the command's and the config's.
    """
    kind = src.kind
    if kind not in ("trainjob", "rayjob", "pytorchjob", "skypilot"):
        return
    world = job_world(kind, src.data)
    written = API_VERSIONS[kind][1] if kind != "skypilot" else "SkyPilot task"
    for words in job_commands(kind, src.doc):
        launch = launch_of(words)  # `python3 -m distrecipe launch` is a python launch too: recipe first
        if (recipe := named_recipe(words)) is not None:
            yield from _recipe(src, recipe, world, written)
        elif launch is not None:
            yield from _launch(src, launch, world, written)
        elif (overrides := verl_overrides(words)) is not None:
            yield from _verl(src, overrides, world, written, words[0])


def _said(world: World, written: str) -> str:
    return f"the {written} runs {world.nodes} node(s) × {world.per_node} ({world.said})"


def _launch(src: Source, launch: Launch, world: World, written: str) -> Iterator[Problem]:
    ranks, how = launch.world()
    if ranks is not None and world.ranks is not None and ranks != world.ranks:
        yield Problem((), f"{launch.launcher} starts {ranks} rank(s) ({how}); {_said(world, written)}",
                      where=launch.start.where)
    if launch.launcher != "accelerate" or (file := launch.option("config_file")) is None or not file.value:
        return
    data = _read(src, file.value)
    said = [f"{key} {have}" for key, want in (("num_processes", world.ranks), ("num_machines", world.nodes))
            if (have := integer(get(data, key))) is not None and want is not None and have != want]
    if said:
        yield Problem((), f"{file.value} says {' and '.join(said)}; {_said(world, written)}",
                      where=file.where)


def _recipe(src: Source, recipe: Word, world: World, written: str) -> Iterator[Problem]:
    data = _read(src, recipe.value or "")
    cluster = get(data, "cluster")
    if not isinstance(cluster, dict):
        return
    nodes, per_node = integer(cluster.get("nodes", 1)), integer(cluster.get("gpus_per_node"))
    if (nodes is not None and world.nodes is not None and nodes != world.nodes) or (
            per_node is not None and world.per_node is not None and per_node != world.per_node):
        yield Problem((), f"{recipe.value} asks for cluster.nodes {nodes} × gpus_per_node "
                      f"{cluster.get('gpus_per_node', 'auto')}; {_said(world, written)}", where=recipe.where)


def _verl(src: Source, overrides: dict[str, Word], world: World, written: str,
          start: Word) -> Iterator[Problem]:
    nnodes, gpus = (overrides.get(f"trainer.{key}") for key in ("nnodes", "n_gpus_per_node"))
    counts = [int(w.value) if w is not None and w.value is not None and w.value.isdigit() else None
              for w in (nnodes, gpus)]
    if counts[1] is None:
        return
    desired = (counts[0] or 1) * counts[1]
    if src.kind == "rayjob":
        available, how = rayjob_gpus(src.data)
    else:
        available, how = world.ranks or 0, world.said
    if world.ranks is None and src.kind != "rayjob":
        return
    if desired > available:
        yield Problem((), f"verl asks for trainer.nnodes {counts[0] or 1} × trainer.n_gpus_per_node "
                      f"{counts[1]} = {desired} GPUs; the {written} has {available} ({how}): verl stops "
                      f"with \"Total available GPUs {available} is less than total desired GPUs {desired}\"",
                      where=(gpus or start).where)


def _read(src: Source, ref: str) -> Any:
    path = src.workspace.references.resolve(src.path, ref)
    if path is None:
        return None
    try:
        return src.workspace.document(Path(path)).data
    except (SourceError, OSError):
        return None
