"""`deepspeed` (DeepSpeed's runner): hostfile with slots, node and GPU counts, master.

On one node the runner starts the ranks itself. On several, when distrecipe runs once
per node (a platform gives every node its rank: srun, SkyPilot, dstack, Kubeflow; or
`--node-rank`), each node starts its own ranks (`--no_ssh --node_rank`) and the
hostfile distrecipe writes only tells the runner the world (its names are labels: no
ssh reaches them); otherwise the runner fans out over ssh (pdsh) from node 0 with the
recipe's `launch.hostfile` or SLURM's hosts. On CPU the same
command starts gloo ranks. The program's arguments (a raw DeepSpeed script's
`--deepspeed_config`, a Trainer's `--deepspeed`) come from `launch.handoff`.
"""

from __future__ import annotations

from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.errors import LaunchError
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, executable, job_env, program_argv

DS_CONFIG = CONFIG_FILE
"""The ds_config in the run directory, under the name the emitter gives it."""
HOSTFILE = "hostfile"


def hostfile_text(hosts: tuple[str, ...], slots: int) -> str:
    """MPI-style resource pool, the format `deepspeed --hostfile` reads."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def one_node_gpus(request: LaunchRequest) -> list[str]:
    """`--include localhost:IDS` when CUDA_VISIBLE_DEVICES narrows one node's GPUs.

    Given `--num_gpus`, DeepSpeed's runner drops CUDA_VISIBLE_DEVICES and gives the
    ranks GPUs 0..N-1: on a node where a scheduler handed this job GPUs 2,3 the job
    would land on someone else's. Naming the visible ids keeps it on its own.
    """
    plan, visible = request.plan, request.environ.get("CUDA_VISIBLE_DEVICES")
    if plan.dims.nodes > 1 or plan.recipe.cluster.device != "gpu" or visible is None:
        return []
    ids = [entry.strip() for entry in visible.split(",")]
    ids = ids[: next((i for i, entry in enumerate(ids) if not entry.isdigit()), len(ids))]
    if len(ids) < plan.dims.gpus_per_node:
        raise LaunchError(f"CUDA_VISIBLE_DEVICES={visible} shows {len(ids)} GPU(s) by index, the recipe "
                          f"asks for {plan.dims.gpus_per_node} (DeepSpeed's --include needs indices, "
                          "not UUIDs)")
    return ["--include", f"localhost:{','.join(ids[: plan.dims.gpus_per_node])}"]


def node_hosts(request: LaunchRequest) -> tuple[str, ...]:
    """The hostfile's names for a per-node launch: the platform's hosts in rank order, or
    `node0..` where it lists none (or lists one twice, as two "nodes" on one machine do):
    DeepSpeed's runner refuses a repeated name, and with `--no_ssh` reads names only as
    the world's keys, ranked by their order."""
    nodes = request.plan.dims.nodes
    hosts = request.hosts[:nodes]
    if len(hosts) == nodes and len(set(hosts)) == nodes:
        return hosts
    return tuple(f"node{i}" for i in range(nodes))


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    argv = [executable("deepspeed")]
    files: dict[str, str] = {}
    if plan.dims.nodes > 1:
        if plan.recipe.launch.hostfile is not None:
            hostfile = plan.recipe.launch.hostfile
        elif request.per_node or request.hosts:
            hosts = node_hosts(request) if request.per_node else request.hosts[: plan.dims.nodes]
            files[HOSTFILE] = hostfile_text(hosts, plan.dims.gpus_per_node)
            hostfile = str(request.run_dir / HOSTFILE)
        else:
            raise LaunchError(f"deepspeed needs a hostfile for {plan.dims.nodes} nodes: set "
                              "launch.hostfile, or run distrecipe on every node with its rank "
                              "(--node-rank, or a platform: SLURM, SkyPilot, dstack, Kubeflow)")
        argv += ["--hostfile", hostfile]
        if request.per_node:
            argv += ["--no_ssh", "--node_rank", str(request.node_rank)]
    argv += one_node_gpus(request) or ["--num_nodes", str(plan.dims.nodes),
                                       "--num_gpus", str(plan.dims.gpus_per_node)]
    argv += ["--master_addr", request.master(), "--master_port", str(request.master_port)]
    argv += program_argv(request.program, "--module")
    return LaunchSpec(argv=tuple(argv), env=job_env(request), files=files)
