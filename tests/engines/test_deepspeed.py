"""`engines.deepspeed`: DeepSpeed's defaults and key aliases have one home, its key table.

Each test moves every default of the table (and renames every alias) and checks that
the import's defaults and the planner's ZeRO knobs move with it: a value written by hand
beside the table, even an equal one, stays where it was and fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.engines import deepspeed
from distrecipe.plan.engine import DeepSpeedZero
from distrecipe.translator.deepspeed import emit
from distrecipe.translator.native import leaves
from tests.conftest import RECIPES

DERIVED = {("zero_optimization", "overlap_comm"), ("optimizer", "params", "adam_w_mode")}
"""What DeepSpeed decides outside the table (`OVERLAP_COMM_STAGE`, `ADAM_W_MODE`)."""
EVERY_BLOCK = ("checkpoint.weights=full", "offload.params=cpu", "offload.optimizer=cpu", "precision=fp16",
               "optimizer.name=adam", "parallel.shard_group=8", "offload.activations=cpu",
               "parallel.tensor=2", "batch.global=128")
"""Overrides of the seed's ZeRO-3 recipe under which the emitter writes every block it has
(fp16 loss scaling, both offloads, hpZ, AutoTP, activation checkpointing, Adam's mode)."""


def _moved_value(value: Any) -> Any:
    """Another value of the same JSON type: one a hand-written copy of `value` would miss."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    return f"{value}-moved" if isinstance(value, str) else value


def _moved(real: Callable[..., Any]) -> Callable[..., Any]:
    """`section` with every default moved and every `stage3_` alias renamed `moved_`."""

    def section(engine: str, path: tuple[str, ...]) -> Any:
        found = real(engine, path)
        if found is None:
            return None
        keys = {name.replace("stage3_", "moved_") if "alias_of" in entry else name:
                {**entry, "default": _moved_value(entry["default"])} if "default" in entry else entry
                for name, entry in found.keys.items()}
        return dataclasses.replace(found, keys=keys)

    return section


@pytest.fixture
def moved_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deepspeed, "section", _moved(deepspeed.section))


def test_every_default_the_import_weighs_is_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = load_plan(RECIPES / "seed-8b-32gpu-zero3.yaml", EVERY_BLOCK)
    paths = [path for path, _ in leaves(emit(plan)) if path not in DERIVED]
    real = {path: deepspeed.config_default(path, plan.stage) for path in paths}
    monkeypatch.setattr(deepspeed, "section", _moved(deepspeed.section))
    tabled = {".".join(map(str, p)) for p, value in real.items() if value is not deepspeed.NO_DEFAULT}
    assert {"gradient_clipping", "fp16.initial_scale_power", "zero_optimization.reduce_bucket_size",
            "zero_optimization.stage3_param_persistence_threshold",
            "zero_optimization.offload_param.pin_memory", "activation_checkpointing.cpu_checkpointing",
            } <= tabled, "the plan no longer writes the keys this test is about"
    stuck = {".".join(map(str, p)): value for p, value in real.items() if value is not deepspeed.NO_DEFAULT
             and deepspeed.config_default(p, plan.stage) == value}
    assert not stuck, f"defaults written beside the key table: {stuck}"


def test_every_zero_knob_the_planner_reads_is_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dataclasses.asdict(DeepSpeedZero.at_defaults(3))
    monkeypatch.setattr(deepspeed, "section", _moved(deepspeed.section))
    moved = dataclasses.asdict(DeepSpeedZero.at_defaults(3))
    stuck = {name: value for name, value in real.items() if moved[name] == value}
    assert stuck == {"stage": 3, "overlap_comm": True}, f"ZeRO knobs defaulted beside the key table: {stuck}"


@pytest.mark.usefixtures("moved_table")
@pytest.mark.parametrize(("knob", "key"), [("max_live_parameters", "max_live_parameters"),
                                           ("persistence_threshold", "param_persistence_threshold")])
def test_the_planner_reads_the_aliases_the_table_names(knob: str, key: str) -> None:
    default = getattr(DeepSpeedZero.at_defaults(3), knob)
    assert getattr(DeepSpeedZero.from_config({"stage": 3, f"moved_{key}": 5}), knob) == 5
    assert getattr(DeepSpeedZero.from_config({"stage": 3, f"stage3_{key}": 5}), knob) == default, \
        "`stage3_` is no alias in this table"


def test_overlap_comm_follows_the_stage_from_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    on = {stage: DeepSpeedZero.at_defaults(stage).overlap_comm for stage in range(4)}
    assert on == {0: False, 1: False, 2: False, 3: True}
    monkeypatch.setattr(deepspeed, "OVERLAP_COMM_STAGE", 2)
    assert [DeepSpeedZero.at_defaults(stage).overlap_comm for stage in range(4)] == [False, False, True, False]
    assert deepspeed.config_default(("zero_optimization", "overlap_comm"), 2) is True
    stated = DeepSpeedZero.from_config({"stage": 3, "overlap_comm": False})
    assert stated.overlap_comm is False
