"""`python -m verl.trainer.main_ppo <overrides>`: verl's own entry point and Ray cluster.

The overrides are the emitted `verl_overrides.txt`, one Hydra `key=value` per line
(they already carry `trainer.nnodes` and `trainer.n_gpus_per_node`); the program's
arguments follow as further overrides, so a user's `key=value` wins. verl starts a
local Ray cluster on one node; on several it joins the cluster named by
`RAY_ADDRESS` (`ray start --head` on node 0, `ray start --address` on the others),
and only node 0 launches.
"""

from __future__ import annotations

import sys

from distrecipe.engines.verl import OVERRIDES_FILE
from distrecipe.errors import LaunchError
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, job_env

ENTRY = "verl.trainer.main_ppo"


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    if OVERRIDES_FILE not in request.configs:
        raise LaunchError(f"verl needs the emitted {OVERRIDES_FILE}; the verl emitter gave none")
    if plan.nodes > 1 and "RAY_ADDRESS" not in request.environ:
        raise LaunchError(f"verl on {plan.nodes} nodes needs a Ray cluster: run `ray start --head` "
                          "on node 0 and `ray start --address=HEAD:6379` on the others, then "
                          "launch on node 0 with RAY_ADDRESS set")
    if plan.nodes > 1 and request.node_rank != 0:
        raise LaunchError("verl launches from node 0 only; the other nodes just join the Ray cluster")
    overrides = request.configs[OVERRIDES_FILE].splitlines()
    program = request.program
    entry = ["-m", program.target] if program.module else [program.target]
    argv = [sys.executable, *entry, *overrides, *program.args]
    return LaunchSpec(argv=tuple(argv), env=job_env(request))
