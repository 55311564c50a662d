"""DeepSpeed as a judge, without processes: its config parser at any world size.

`DeepSpeedConfig` reads the data-parallel world from `deepspeed.comm`; patching the
two functions lets a test ask "would DeepSpeed accept this, and what would it derive"
for 32 ranks on a laptop. Shared by the emitter and lint oracle tests.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest

deepspeed_comm = pytest.importorskip("deepspeed.comm")
ds_config = pytest.importorskip("deepspeed.runtime.config")


@contextmanager
def world_of(size: int) -> Iterator[None]:
    with mock.patch.object(deepspeed_comm, "get_world_size", return_value=size), \
            mock.patch.object(deepspeed_comm, "get_rank", return_value=0):
        yield


def parse(config: dict[str, Any], world: int) -> Any:
    """DeepSpeed's own parsed config (raises what DeepSpeed raises)."""
    with world_of(world):
        return ds_config.DeepSpeedConfig(copy.deepcopy(config))


def accepts(config: dict[str, Any], world: int) -> bool:
    try:
        parse(config, world)
    except (AssertionError, ValueError, ds_config.DeepSpeedConfigError):
        return False
    return True
