"""`deepspeed` (DeepSpeed's runner): hostfile with slots, node and GPU counts, master.

On one node the runner starts the ranks itself; on several it fans out over ssh
(pdsh) from node 0 using the hostfile, or, when distrecipe already runs once per node
under srun, each node starts its own ranks (`--no_ssh --node_rank`). On CPU the same
command starts gloo ranks. The program gets `--deepspeed_config` (DeepSpeed's
convention) pointing at the emitted ds_config in the run directory.
"""

from __future__ import annotations

from distrecipe.errors import LaunchError
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, executable, job_env, program_argv

DS_CONFIG = "ds_config.json"
HOSTFILE = "hostfile"


def hostfile_text(hosts: tuple[str, ...], slots: int) -> str:
    """MPI-style resource pool, the format `deepspeed --hostfile` reads."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    argv = [executable("deepspeed")]
    files: dict[str, str] = {}
    if plan.nodes > 1:
        if plan.launch.hostfile is not None:
            hostfile = plan.launch.hostfile
        elif request.hosts:
            files[HOSTFILE] = hostfile_text(request.hosts[: plan.nodes], plan.gpus_per_node)
            hostfile = str(request.run_dir / HOSTFILE)
        else:
            raise LaunchError(f"deepspeed needs a hostfile for {plan.nodes} nodes: set "
                              "launch.hostfile, or launch inside a SLURM allocation")
        argv += ["--hostfile", hostfile]
        if request.per_node:
            argv += ["--no_ssh", "--node_rank", str(request.node_rank)]
    argv += [
        "--num_nodes", str(plan.nodes),
        "--num_gpus", str(plan.gpus_per_node),
        "--master_addr", request.master(),
        "--master_port", str(request.master_port),
    ]
    argv += program_argv(request.program, "--module")
    argv += ["--deepspeed_config", str(request.run_dir / DS_CONFIG)]
    return LaunchSpec(argv=tuple(argv), env=job_env(request), files=files)
