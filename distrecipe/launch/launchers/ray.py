"""`python -m ENTRY <options>` on a Ray cluster: verl's and OpenRLHF's own entry points.

Both trainers are Ray drivers: on one node their entry point starts a local Ray cluster
(`ray.init()` with no address: verl's `main_ppo`, OpenRLHF's `train_ppo_ray.train`); on
several it joins the cluster named by `RAY_ADDRESS` (`ray start --head` on node 0, `ray
start --address` on the others: `launch.slurm` and `launch.k8s` build that cluster), and
only node 0 launches. The program's arguments come from `launch.handoff`: verl's emitted
Hydra overrides, OpenRLHF's emitted options, each followed by the user's.
"""

from __future__ import annotations

import sys

from distrecipe.engines.runner import RAY_TRAINERS
from distrecipe.errors import LaunchError
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, job_env


def build(request: LaunchRequest) -> LaunchSpec:
    plan = request.plan
    name, _entry = RAY_TRAINERS[plan.backend]
    if plan.dims.nodes > 1 and "RAY_ADDRESS" not in request.environ:
        raise LaunchError(f"{name} on {plan.dims.nodes} nodes needs a Ray cluster: run `ray start --head` "
                          "on node 0 and `ray start --address=HEAD:6379` on the others, then "
                          "launch on node 0 with RAY_ADDRESS set")
    if plan.dims.nodes > 1 and request.node_rank != 0:
        raise LaunchError(f"{name} launches from node 0 only; the other nodes just join the Ray cluster")
    program = request.program
    entry = ["-m", program.target] if program.module else [program.target]
    argv = [sys.executable, *entry, *program.args]
    return LaunchSpec(argv=tuple(argv), env=job_env(request))
