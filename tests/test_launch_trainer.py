"""The reference trainer's contract, without processes: plan → settings, the sample order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distrecipe.launch.rundir import plan_json
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve

tiny_train = pytest.importorskip("distrecipe.launch.tiny_train")  # imports torch
pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny-cpu.yaml"


def settings(*overrides: str, deepspeed: bool = False, steps: int = 10) -> Any:
    plan = json.loads(plan_json(resolve(load_recipe(TINY, overrides))))
    return tiny_train.TrainSettings.from_plan(plan, steps=steps, deepspeed=deepspeed)


def test_the_plan_picks_the_engine() -> None:
    assert settings().engine == "deepspeed"
    assert settings("strategy=ddp", "stage=0").engine == "ddp"
    assert settings("strategy=ddp", "stage=0", deepspeed=True).engine == "deepspeed"
    fsdp2, fsdp3 = settings("strategy=fsdp", "stage=2"), settings("strategy=fsdp", "stage=3")
    assert (fsdp2.engine, fsdp2.reshard_after_forward) == ("fsdp2", False)
    assert (fsdp3.engine, fsdp3.reshard_after_forward) == ("fsdp2", True)


def test_megatron_is_refused_by_name() -> None:
    with pytest.raises(SystemExit, match="megatron"):
        settings("strategy=megatron", "stage=1")


@pytest.mark.parametrize(("micro", "accumulation"), [(2, 2), (1, 4), (4, 1)])
def test_every_step_consumes_its_own_window_exactly_once(micro: int, accumulation: int) -> None:
    chosen = settings(f"batch.micro={micro}", f"batch.accumulation={accumulation}")
    dp = 8 // (micro * accumulation)
    for step in (0, 1, 511, 512):  # 512 × 8 wraps around the 4096-sample data set
        taken = sorted(int(i) for a in range(accumulation) for r in range(dp)
                       for i in tiny_train.sample_indices(chosen, step=step, micro_step=a, rank=r))
        assert taken == sorted(i % tiny_train.DATASET_SIZE for i in range(step * 8, step * 8 + 8))


def test_the_model_is_about_100k_parameters_and_deterministic() -> None:
    model = tiny_train.build_model(0)
    assert sum(p.numel() for p in model.parameters()) == 86_544
    again = tiny_train.build_model(0)
    assert all((a == b).all() for a, b in zip(model.parameters(), again.parameters(), strict=True))
