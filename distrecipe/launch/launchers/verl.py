"""`python -m verl.trainer.main_ppo <overrides>`: verl's own entry point and Ray cluster.

The program's arguments are the emitted `verl_overrides.txt` (one Hydra `key=value`
per line, `trainer.nnodes` and `trainer.n_gpus_per_node` included) followed by the
user's, checked against them by `launch.handoff`. verl starts a
local Ray cluster on one node; on several it joins the cluster named by
`RAY_ADDRESS` (`ray start --head` on node 0, `ray start --address` on the others),
and only node 0 launches.
"""

from __future__ import annotations

import sys

from distrecipe.errors import LaunchError
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, job_env

ENTRY = "verl.trainer.main_ppo"


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    if plan.dims.nodes > 1 and "RAY_ADDRESS" not in request.environ:
        raise LaunchError(f"verl on {plan.dims.nodes} nodes needs a Ray cluster: run `ray start --head` "
                          "on node 0 and `ray start --address=HEAD:6379` on the others, then "
                          "launch on node 0 with RAY_ADDRESS set")
    if plan.dims.nodes > 1 and request.node_rank != 0:
        raise LaunchError("verl launches from node 0 only; the other nodes just join the Ray cluster")
    program = request.program
    entry = ["-m", program.target] if program.module else [program.target]
    argv = [sys.executable, *entry, *program.args]
    return LaunchSpec(argv=tuple(argv), env=job_env(request))
