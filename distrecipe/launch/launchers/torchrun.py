"""`torchrun`: nodes and processes per node, and c10d rendezvous for several nodes.

One node uses `--standalone` (torchrun picks a free port, so concurrent jobs on one
machine never collide). Several nodes rendezvous at `master_addr:master_port` through
the c10d backend: every agent runs the same command, the agent on the endpoint's host
serves the store, and ranks are assigned by the rendezvous (node ranks given to c10d
are ignored by torchrun, so none is passed).
"""

from __future__ import annotations

from distrecipe.launch.spec import LaunchRequest, LaunchSpec, executable, job_env, program_argv


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    argv = [executable("torchrun"), "--nnodes", str(plan.dims.nodes),
            "--nproc-per-node", str(plan.dims.gpus_per_node)]
    if plan.dims.nodes == 1:
        argv.append("--standalone")
    else:
        argv += ["--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"{request.master()}:{request.master_port}",
                 "--rdzv-id", plan.recipe.name]
    argv += program_argv(request.program, "--module")
    return LaunchSpec(argv=tuple(argv), env=job_env(request))
