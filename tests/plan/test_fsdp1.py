"""FSDP1 where the recipe's `fsdp_version` says so, or the engines' own `native` keys it is
read from (`distrecipe/plan/fsdp1.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.job import Plan
from distrecipe.model_shapes import inventory
from distrecipe.plan.allocator import buffers
from distrecipe.plan.fsdp1 import fsdp1
from distrecipe.plan.report import estimate


def _plan(tmp_path: Path, *, gpus: int = 8, native: dict[str, Any] | None = None, backend: str = "accelerate",
          pure: bool = False, precision: str = "bf16", version: int | None = None) -> Plan:
    doc: dict[str, Any] = {
        "recipe": 1, "name": "fsdp1",
        "model": {"hidden_size": 4096, "layers": 32, "heads": 32, "kv_heads": 32, "intermediate_size": 11008,
                  "vocab": 32001},
        "cluster": {"nodes": 1, "gpus_per_node": gpus, "gpu_memory": "40GB", "device": "gpu"},
        "strategy": "fsdp", "stage": 3, "precision": precision,
        "batch": {"micro": 4, "accumulation": 1, "global": 4 * gpus, "seq_len": 512},
        "launch": {"backend": backend},
    }
    if pure:
        doc["optimizer"] = {"name": "adamw", "master_weights": "bf16", "state_dtype": "bf16"}
    if native is not None:
        doc["native"] = native
    if version is not None:
        doc["fsdp_version"] = version
    path = tmp_path / "fsdp1.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_plan(path)


TRAINER_FSDP1 = {"hf": {"fsdp_config": {"version": 1}}}
TRAINER_UNLIMITED = {"hf": {"fsdp_config": {"version": 1, "limit_all_gathers": False}}}


@pytest.mark.parametrize(("native", "backend", "asked"), [
    (None, "accelerate", None),
    ({"hf": {"fsdp_config": {"version": 2}}}, "accelerate", None),
    (TRAINER_FSDP1, "torchrun", "native.hf.fsdp_config.version: 1"),
    (TRAINER_FSDP1, "accelerate", "native.hf.fsdp_config.version: 1"),
    ({"accelerate": {"fsdp_config": {"fsdp_version": 1}}}, "accelerate",
     "native.accelerate.fsdp_config.fsdp_version: 1"),
    # The native key states the recipe's fsdp_version, which every target then writes.
    ({"accelerate": {"fsdp_config": {"fsdp_version": 1}}}, "torchrun",
     "native.accelerate.fsdp_config.fsdp_version: 1"),
    ({"verl": ["actor_rollout_ref.actor.strategy=fsdp"]}, "torchrun",
     "native.verl: actor_rollout_ref.actor.strategy=fsdp"),
])
def test_fsdp1_is_what_the_engines_keys_ask_for(tmp_path: Path, native: dict[str, Any] | None, backend: str,
                                                asked: str | None) -> None:
    settings = fsdp1(_plan(tmp_path, native=native, backend=backend))
    assert (settings.source if settings else None) == asked
    if settings is not None:
        assert settings.limit_all_gathers is True  # torch's and Accelerate's default today


def test_all_gathers_without_the_limiter_cost_no_bytes(tmp_path: Path) -> None:
    """`limit_all_gathers: false` lets the CPU run ahead, which costs malloc retries, not bytes
    (plan/fsdp1.py): the same memory as FSDP2's two gathered blocks, said in the label."""
    limited = estimate(_plan(tmp_path, native=TRAINER_FSDP1))
    unlimited = estimate(_plan(tmp_path, native=TRAINER_UNLIMITED))
    found = inventory(_plan(tmp_path).recipe.model)
    assert found is not None
    assert unlimited.memory == limited.memory == estimate(_plan(tmp_path)).memory
    assert unlimited.memory.backward["gathered blocks"] == 2 * 2 * found.block_params
    assert "all-gathers unlimited" in unlimited.label and "unlimited" not in limited.label
    assert unlimited.engine.engine.startswith("torch FSDP1")


@pytest.mark.parametrize(("pure", "held"), [(True, False), (False, True)])
def test_one_rank_runs_no_shard(tmp_path: Path, pure: bool, held: bool) -> None:
    """torch clamps FSDP1 to NO_SHARD on one rank: a model cast to bf16 gathers nothing and
    reduces in place; under parameter mixed precision each unit's 16-bit copy stays."""
    plan = _plan(tmp_path, gpus=1, native=TRAINER_UNLIMITED, pure=pure)
    settings = fsdp1(plan)
    assert settings is not None and settings.no_shard and settings.mixed_precision is not pure
    assert bool(buffers(plan)) is held
    assert "NO_SHARD" in estimate(plan).label
    # the rate limiter does not apply to NO_SHARD: nothing is all-gathered
    if held:
        assert buffers(plan) == buffers(_plan(tmp_path, gpus=1, native=TRAINER_FSDP1, pure=pure))


@pytest.mark.parametrize(("version", "asked"), [(1, "fsdp_version: 1"), (2, None), (None, None)])
def test_the_field_says_fsdp1(tmp_path: Path, version: int | None, asked: str | None) -> None:
    """A script of the user's own that builds FSDP1 says so with the field, whatever launches it."""
    settings = fsdp1(_plan(tmp_path, gpus=1, backend="torchrun", version=version, pure=True))
    assert (settings.source if settings else None) == asked
    if settings is not None:
        assert settings.no_shard and not settings.mixed_precision
        assert estimate(_plan(tmp_path, gpus=1, backend="torchrun", version=1, pure=True)).label.startswith(
            "FSDP1 (NO_SHARD: one rank; fsdp_version: 1)")
