"""`torchrun`: nodes and processes per node; a static rank where one is given.

One node uses `--standalone` (torchrun picks a free port, so concurrent jobs on one
machine never collide). Several nodes whose rank is known (a platform starts distrecipe
on every node, or `--node-rank`) use torchrun's static rendezvous: `--node-rank` with
`--master-addr/--master-port`, so global ranks follow node ranks and node 0 holds rank
0 (and `metrics.jsonl`). c10d's elastic rendezvous ranks agents by host name and pid
instead (`dynamic_rendezvous.py`: `sorted(state.participants)`), which put rank 0 on
whichever node sorted first; it is kept only where nobody gave a rank, every agent
running the same command.

Each rank's output is kept in the run directory by torchrun itself (`--log-dir` with
`--redirects 3 --tee 3`: both streams to a file per local rank, and still to the
terminal, each line prefixed with `[default<local rank>]:`); `rundir` names the layout.
"""

from __future__ import annotations

from distrecipe.launch.rundir import RANK_LOGS
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, executable, job_env, program_argv


def rank_logs(request: LaunchRequest) -> list[str]:
    """torchrun's per-rank files under the run directory, teed so the terminal sees them too."""
    return ["--log-dir", str(request.run_dir / RANK_LOGS), "--redirects", "3", "--tee", "3"]


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    argv = [executable("torchrun"), "--nnodes", str(plan.dims.nodes),
            "--nproc-per-node", str(plan.dims.gpus_per_node)]
    if plan.dims.nodes == 1:
        argv.append("--standalone")
    elif request.per_node:
        # Spelled out: torchrun takes each flag's default from PET_* (a PyTorchJob's
        # PET_RDZV_BACKEND=c10d would otherwise turn the static rank elastic again).
        argv += ["--rdzv-backend", "static", "--node-rank", str(request.node_rank),
                 "--master-addr", request.master(), "--master-port", str(request.master_port)]
    else:
        argv += ["--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"{request.master()}:{request.master_port}",
                 "--rdzv-id", plan.recipe.name]
    argv += rank_logs(request)
    argv += program_argv(request.program, "--module")
    return LaunchSpec(argv=tuple(argv), env=job_env(request))
