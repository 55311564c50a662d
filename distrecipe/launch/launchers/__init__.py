"""One argv/env builder per launcher, listed in an explicit registry.

Each builder is a pure `LaunchRequest → LaunchSpec` function that speaks its
launcher's own vocabulary (hostfile, rendezvous, machine rank, Hydra overrides), so
multi-node always goes through the engine's mechanism, never a home-made one.
"""

from __future__ import annotations

from collections.abc import Callable

from distrecipe.launch.launchers import accelerate, deepspeed, ray, torchrun
from distrecipe.launch.spec import LaunchRequest, LaunchSpec

Builder = Callable[[LaunchRequest], LaunchSpec]

LAUNCHERS: dict[str, Builder] = {
    "deepspeed": deepspeed.build,
    "accelerate": accelerate.build,
    "accelerate-deepspeed": accelerate.build,
    "torchrun": torchrun.build,
    "verl": ray.build,
    "openrlhf": ray.build,
}

GIVEN_PORT = frozenset({"deepspeed", "accelerate", "accelerate-deepspeed"})
"""Launchers whose one-node rank 0 listens on the master port they are given, so a launch
holds that port for them (`detect.hold_port`). torchrun's `--standalone` rendezvous and
store bind port 0 and keep what the kernel gave them; verl's and OpenRLHF's Ray picks its own."""
