"""The ds_config's `activation_checkpointing` section: what `deepspeed.checkpointing` reads.

The section configures DeepSpeed's checkpointing for a script that calls it
(`deepspeed.checkpointing.configure` reads `partition_activations`, `cpu_checkpointing`,
`contiguous_memory_optimization`, `number_checkpoints`, `synchronize_checkpoint_boundary`,
`profile`); it turns no recompute on. So it is written only with something true in it,
and recompute itself is named as the script's (DR222), never an all-false section."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.conftest import RECIPES, Result

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


PURE = ("optimizer.master_weights=bf16", "optimizer.state_dtype=bf16")


def test_pure_bf16_is_deepspeeds_bf16_master_weights_and_grads() -> None:
    """`optimizer.master_weights: bf16` is written as the keys DeepSpeed reads
    (`runtime/precision_config.py`), and no finding says it is not carried."""
    output = TARGETS["deepspeed"](load_plan(str(SEED), PURE), EmitOptions())
    config = json.loads(output.files["ds_config.json"])
    assert config["bf16"] == {"enabled": True, "bf16_master_weights_and_grads": True,
                              "bf16_optimizer_states": True}
    assert not {f.code for f in output.findings} & {"DR230", "DR239"}


def test_pure_bf16_ds_config_imports_back(cli: Callable[..., Result], tmp_path: Path) -> None:
    assert cli("compile", SEED, "-o", tmp_path / "a", *(f"--set={s}" for s in PURE)).code == 0
    result = cli("import", tmp_path / "a" / "ds_config.json", "--world", "32", "--nodes", "4")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["optimizer"]["master_weights"] == "bf16"
    assert recipe["optimizer"]["state_dtype"] == "bf16"
    assert "native" not in recipe  # the keys are mapped, not carried as residue
    (tmp_path / "back.yaml").write_text(result.out)
    assert cli("compile", tmp_path / "back.yaml", "-o", tmp_path / "b").code == 0
    assert (tmp_path / "a" / "ds_config.json").read_text() == (tmp_path / "b" / "ds_config.json").read_text()


@pytest.mark.parametrize(("sets", "said"), [
    (("precision=fp16", "optimizer.master_weights=bf16"), "needs precision: bf16"),
    (("strategy=megatron", "stage=1", "optimizer.master_weights=bf16"), "Megatron-Core keeps fp32 main"),
    (("strategy=ddp", "stage=0", "launch.backend=deepspeed", *PURE), "needs ZeRO stage 1, 2 or 3"),
    (("optimizer.master_weights=bf16",), "needs offload.optimizer"),
    (("strategy=fsdp", "stage=3", "launch.backend=accelerate", "optimizer.master_weights=bf16",
      "optimizer.state_dtype=fp32"), "torch's optimizers keep Adam's moments"),
])
def test_pure_bf16_the_engine_cannot_run_is_refused(cli: Callable[..., Result], tmp_path: Path, sets: tuple[str, ...],
                                                     said: str) -> None:
    result = cli("compile", SEED, "--target", "deepspeed", "-o", tmp_path, *(f"--set={s}" for s in sets))
    assert result.code == 2, result.out
    assert said in result.err
    assert result.err.startswith("--set ") and ": error: " in result.err  # at the value that asked for it
    assert result.err.count("\n") == 1
