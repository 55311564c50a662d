"""The ds_config's `activation_checkpointing` section: what `deepspeed.checkpointing` reads.

The section configures DeepSpeed's checkpointing for a script that calls it
(`deepspeed.checkpointing.configure` reads `partition_activations`, `cpu_checkpointing`,
`contiguous_memory_optimization`, `number_checkpoints`, `synchronize_checkpoint_boundary`,
`profile`); it turns no recompute on. So it is written only with something true in it,
and recompute itself is named as the script's (DR222), never an all-false section."""

from __future__ import annotations

import json

import pytest

from distrecipe.api import load_plan
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.conftest import RECIPES

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"


def emitted(*sets: str) -> tuple[dict[str, object], list[str]]:
    output = TARGETS["deepspeed"](load_plan(str(SEED), sets), EmitOptions())
    return json.loads(output.files["ds_config.json"]), [f.message for f in output.findings if f.code == "DR222"]


@pytest.mark.parametrize(("sets", "section"), [
    (("activation_checkpointing=full",), None),
    (("activation_checkpointing=none",), None),
    (("activation_checkpointing=full", "parallel.tensor=2"), {"partition_activations": True}),
    (("activation_checkpointing=full", "offload.activations=cpu"), {"cpu_checkpointing": True}),
])
def test_the_section_holds_only_what_is_true(sets: tuple[str, ...], section: dict[str, bool] | None) -> None:
    config, _ = emitted(*sets)
    assert config.get("activation_checkpointing") == section


def test_recompute_is_named_as_the_script_s() -> None:
    _, full = emitted("activation_checkpointing=full")
    assert any("activation_checkpointing full" in m for m in full)
    _, none = emitted("activation_checkpointing=none")
    assert not any("activation_checkpointing" in m for m in none)
