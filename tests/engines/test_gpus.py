"""The GPU table: `cluster.gpu` implies its memory and peak; a contradicting size is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.engines.gpus import GPUS, MEMORY_SLACK
from distrecipe.errors import RecipeError
from distrecipe.plan.hardware import GPUS as HARDWARE
from distrecipe.recipe import Gpu
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from tests.conftest import RECIPES, ROOT, Result

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
NO_MEMORY = SEED.read_text().replace(", gpu_memory: 80GB", "")


def plan_with(gpu: str, memory: str | None = None, precision: str = "bf16") -> object:
    text = NO_MEMORY.replace("device: gpu}", f"device: gpu, gpu: {gpu}" + (
        f", gpu_memory: {memory}}}" if memory else "}")).replace("precision: bf16", f"precision: {precision}")
    return resolve(recipe_from_text(text, "r.yaml"))


def test_every_gpu_the_issue_names_has_a_row_with_a_source() -> None:
    assert set(GPUS) == set(Gpu.__args__) == set(HARDWARE)  # type: ignore[attr-defined]
    assert {"v100-16gb", "v100-32gb", "a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100", "h100-pcie",
            "h200", "b200", "mi250x", "mi300x", "rtx3090", "rtx4090"} <= set(GPUS)
    for gpu, spec in GPUS.items():
        assert spec.memory and spec.peak_tflops > 0 and spec.intra > 0 and spec.inter > 0, gpu
        assert "confidence" in spec.source.lower(), gpu
        assert HARDWARE[gpu].peak_tflops == spec.peak_tflops and HARDWARE[gpu].intra == spec.intra * 1e9


def test_docs_cite_every_gpu() -> None:
    docs = (ROOT / "docs" / "plan.md").read_text()
    for gpu in GPUS:
        assert f"| `{gpu}` |" in docs, gpu


@pytest.mark.parametrize(("gpu", "gb"), [("a100-80gb", 80), ("a100-40gb", 40), ("h200", 141), ("v100-16gb", 16),
                                         ("mi300x", 192), ("mi250x", 64), ("rtx4090", 24), ("b200", 180)])
def test_the_gpu_implies_its_memory_and_says_so(gpu: str, gb: int) -> None:
    plan = plan_with(gpu, precision="fp16")
    assert plan.gpu_memory == gb * 10**9  # type: ignore[attr-defined]
    assert plan.provenance["cluster.gpu_memory"] == (  # type: ignore[attr-defined]
        f"{gb} GB, as cluster.gpu {gpu} implies (engines/gpus.py)")


@pytest.mark.parametrize("memory", ["80GB", "80GiB", "79.15GiB", f"{80 * (1 - MEMORY_SLACK)}GB"])
def test_a_stated_size_of_the_card_agrees(memory: str) -> None:
    assert plan_with("a100-80gb", memory).gpu_memory is not None  # type: ignore[attr-defined]


def test_a_card_sold_in_several_sizes_takes_each() -> None:
    for memory in ("80GB", "94GB", "95GiB"):  # H100 SXM, H100 NVL, Grand Teton's 96 GB part
        plan_with("h100", memory)


@pytest.mark.parametrize(("gpu", "memory", "shown"), [("a100-80gb", "40GB", "40 GB"), ("a100-80gb", "86GiB", "92.34 GB"),
                                                      ("h100", "141GB", "141 GB"), ("a100-40gb", "39GB", "39 GB")])
def test_a_contradicting_size_is_refused_naming_both(gpu: str, memory: str, shown: str) -> None:
    with pytest.raises(RecipeError) as caught:
        plan_with(gpu, memory)
    assert f"cluster.gpu_memory {shown} contradicts cluster.gpu {gpu} ({GPUS[gpu].name}, {GPUS[gpu].sizes()})" \
        in caught.value.message  # type: ignore[index]


def test_cli_contradiction_is_one_positioned_line(cli: Callable[..., Result]) -> None:
    result = cli("plan", SEED, "--set", "cluster.gpu=a100-40gb")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "--set" not in result.err.split(":")[0]
    assert "cluster.gpu_memory 80 GB contradicts cluster.gpu a100-40gb (A100 40GB, 40GB)" in result.err


def test_volta_has_no_bf16() -> None:
    with pytest.raises(RecipeError, match=r"cluster.gpu v100-32gb \(V100 SXM2 32GB\) has no bf16 tensor cores, "
                                          r"and precision is bf16: write precision: fp16"):
        plan_with("v100-32gb")
    assert plan_with("v100-32gb", precision="fp16").gpu_memory == 32 * 10**9  # type: ignore[attr-defined]


def test_the_implied_memory_judges_the_fit(cli: Callable[..., Result], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(NO_MEMORY)
    unknown = cli("plan", recipe)
    assert unknown.code == 0 and "fits? unknown (no cluster.gpu_memory)" in unknown.out
    assert cli("plan", recipe, "--set", "cluster.gpu=rtx4090").code == 1  # 24 GB: does not fit
    assert cli("plan", recipe, "--set", "cluster.gpu=h200").code == 0
