"""`distrecipe diff --exit-code`: as `git diff --exit-code`, 1 when the two sides differ, 0 when
they describe the same job; 2 stays unusable input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import RECIPES, Result

ZERO2, ZERO3 = RECIPES / "seed-8b-32gpu-zero2.yaml", RECIPES / "seed-8b-32gpu-zero3.yaml"
Cli = Callable[..., Result]


@pytest.mark.parametrize("output_format", ["text", "json", "markdown"])
def test_exit_code_is_1_when_the_sides_differ(cli: Cli, output_format: str) -> None:
    differ = cli("diff", ZERO2, ZERO3, "--exit-code", "--format", output_format)
    assert differ.code == 1, differ.err
    assert differ.err == ""
    assert "stage" in differ.out
    same = cli("diff", ZERO2, ZERO2, "--exit-code", "--format", output_format)
    assert same.code == 0, same.err
    assert cli("diff", ZERO2, ZERO3, "--format", output_format).code == 0, "without it a difference is no failure"


def test_exit_code_for_native_files(cli: Cli, write: Callable[[str, str], Path]) -> None:
    old = write("a.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    new = write("b.json", '{"train_batch_size": 16, "zero_optimization": {"stage": 2}}')
    differ = cli("diff", old, new, "--exit-code")
    assert differ.code == 1 and differ.out.startswith("train_batch_size: 8 → 16\n")
    same = cli("diff", old, write("c.json", '{"zero_optimization": {"stage": 2}, "train_batch_size": 8.0}'),
               "--exit-code")
    assert same.code == 0 and same.out.endswith("describe the same job\n")
    missing = cli("diff", old, "nowhere.json", "--exit-code")
    assert missing.code == 2 and missing.out == ""


def test_a_value_left_uncompared_is_not_the_same_job(cli: Cli, write: Callable[[str, str], Path]) -> None:
    """Nothing compared differs, but the import could not carry a stated value: not shown equal."""
    base = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    recipe = write("recipe.yaml", cli("import", write("a.json", json.dumps(base)), "--world", "8").out)
    odd = write("b.json", json.dumps({**base, "bf16": {"enabled": "sometimes"}}))
    result = cli("diff", recipe, odd, "--world", "8", "--exit-code")
    assert result.code == 1
    assert result.out.startswith(f"{recipe} and {odd} differ in nothing compared, but a stated value was not "
                                 "compared")


def test_eager_attention_under_full_recompute_costs_memory_and_time(cli: Cli, write: Callable[[str, str], Path]) -> None:
    """Issue 27: flash → eager with every block recomputed. The recomputed layer's scores
    (6·a·s²·b) and their gradients in backward outgrow the loss's buffers, and the eager
    kernel's score traffic lengthens the step (`steptime.attention_kernel_seconds`)."""
    recipe = ZERO3.read_text(encoding="utf-8").replace("device: gpu}", "device: gpu, gpu: h100}")
    assert "activation_checkpointing: full" in recipe and "gpu: h100" in recipe
    flash = write("flash.yaml", recipe)
    eager = write("eager.yaml", recipe.replace("attention: flash", "attention: eager"))
    result = cli("diff", flash, eager, "--exit-code")
    assert result.code == 1, result.err
    assert result.out.startswith("model.attention: flash → eager\n")
    peak = next(line for line in result.out.splitlines() if "peak per GPU" in line)
    step = next(line for line in result.out.splitlines() if "step time" in line)
    assert "(+" in peak and "±" not in peak
    assert step.endswith("%)") and "(+0%)" not in step and "(+" in step
