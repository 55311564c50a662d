"""Efficiency per (kernel family, GPU generation): each figure is the fit of its cell's
published rows, and each source is predicted by a fit made without it.

The rows are `tests/corpus/gpu/published.csv`'s that `plan` can state (`tests.calibration`;
`python -m tests.calibration --loso` prints the table `docs/plan.md` quotes). DeepSpeed's
rows are judged by torch's figure, never fitted (`efficiency.kernel_family`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.plan import efficiency as eff
from distrecipe.plan.efficiency import Efficiency, lookup, matmul_factor
from distrecipe.recipe import Gpu
from distrecipe.translator.resolve import variant
from tests import calibration
from tests.published import CSV

pytestmark = pytest.mark.skipif(not CSV.exists(), reason="tests/corpus/gpu/published.csv not present")

TIMED = calibration.timed() if CSV.exists() else []


def test_each_figure_is_the_fit_of_its_cell() -> None:
    fitted = calibration.fit(TIMED)
    assert set(fitted) == set(eff.FITTED)
    for cell, figure in fitted.items():
        assert eff.FITTED[cell] == figure, (cell, figure)


def test_each_source_predicted_without_it() -> None:
    """The leave-one-source-out errors. A cell fitted on two or more sources predicts each
    of them within 25 % at the median; a cell with one source (Megatron-Core on Hopper)
    can only borrow, and the table shows how far that is (printed, not bounded)."""
    results = calibration.leave_one_source_out(TIMED)
    print("\n" + calibration.loso_report(TIMED))
    assert set(results) == {item.source for item in TIMED}
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    for item in TIMED:
        if item.fitted:
            sources[item.cell].add(item.source)
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for found in results.values():
        for item, error, used in found:
            if item.fitted:
                errors[item.cell].append(error)
                assert used.borrowed == (len(sources[item.cell]) == 1), item.row.name
    for cell, values in errors.items():
        if len(sources[cell]) > 1:
            assert statistics.median(abs(e) for e in values) < 0.25, cell


def test_a_cell_without_rows_borrows_and_says_so() -> None:
    table = {("torch", "ampere"): Efficiency(0.7, "", False), ("torch", "hopper"): Efficiency(0.5, "", False),
             ("megatron", "ampere"): Efficiency(0.6, "", False)}
    borrowed = lookup("megatron", "hopper", table)
    assert borrowed.borrowed and borrowed.value == round(0.6 * 0.5 / 0.7, 2)
    assert "Megatron on Ampere × FSDP2/DDP on Hopper / FSDP2/DDP on Ampere" in borrowed.basis
    assert lookup("torch", "blackwell", table).borrowed
    assert lookup("torch", None, table).basis.endswith("the GPU's generation is unknown")


@pytest.mark.parametrize("gpu", Gpu.__args__)  # type: ignore[attr-defined]
def test_every_gpu_name_has_a_generation(gpu: str) -> None:
    assert next((g for prefix, g in eff.GENERATIONS if gpu.startswith(prefix)), None) in eff.HBM


def test_small_matmuls_are_slower() -> None:
    """The roofline factor falls with the micro-batch's tokens and with tensor parallelism."""
    plan = next(item.plan for item in TIMED if item.source == "torchtitan_perf_a100_2024")
    peak = 312e12
    big = matmul_factor(plan, peak)
    small = matmul_factor(variant(plan, batch={"seq_len": 512}), peak)
    assert 0 < small < big < 1


MOE_FAMILIES = {"Mixtral": "mixtral", "Qwen3-235B-A22B": "qwen3_moe"}
"""The corpus's mixture-of-experts rows by the model name they start with → `model.family`."""


def test_each_moe_ceiling_is_its_family_s_best_published_run() -> None:
    """TFLOPS per GPU over the GPU's dense 16-bit peak (every MoE row is an H100's, 989), the
    maximum per family, to the table's three places."""
    from distrecipe.engines.gpus import GPUS
    from tests.published import rows

    best: dict[str, float] = defaultdict(float)
    for row in rows():
        family = next((f for name, f in MOE_FAMILIES.items() if row.data["model"].startswith(name)), None)
        if family is None or not row.data["tflops_per_gpu"]:
            continue
        assert row.gpu_model == "h100"
        best[family] = max(best[family], float(row.data["tflops_per_gpu"]) / GPUS["h100"].peak_tflops)
    assert {f: round(v, 3) for f, v in best.items()} == {f: c.mfu for f, c in eff.MOE_CEILINGS.items()}


def test_each_local_expert_is_a_matmul_of_the_tokens_routed_to_it(
        write: Callable[[str, str], Path]) -> None:
    """Mixtral (8 experts, top-2, width 14336) at micro 2 × 4096 tokens, TP 2, EP 4: each of a
    rank's 2 experts takes 8192 · 2 · 4 / 8 = 8192 rows (its group's 4 ranks send it theirs)
    through its own weights; with EP 1 its 8 experts take 2048 rows each and read 4 times the
    weights for them, so the matmul size factor is lower. DeepSeek-V3 adds its shared expert,
    which takes every token."""
    from distrecipe.api import load_plan
    from tests.conftest import ROOT

    configs = ROOT / "tests" / "corpus" / "hf_configs"
    mixtral = configs / "reconstructed" / "mixtral-8x7b.classdefaults.json"
    text = (f"recipe: 1\nname: m\nmodel: {{hf_config: {mixtral}}}\n"
            "cluster: {nodes: 8, gpus_per_node: 8, gpu: h100}\nstrategy: megatron\nstage: 1\n"
            "parallel: {tensor: 2, expert: 4}\nbatch: {micro: 2, global: 256, seq_len: 4096}\nprecision: bf16\n")
    plan = load_plan(write("m.yaml", text))
    assert eff.gemms(plan)[3:] == [(8192, 4096, 14336), (8192, 7168, 4096)] * 2
    alone = load_plan(write("a.yaml", text.replace("expert: 4", "expert: 1")))
    assert eff.gemms(alone)[3:] == [(2048, 4096, 14336), (2048, 7168, 4096)] * 8
    assert eff.matmul_factor(alone, 989e12) < eff.matmul_factor(plan, 989e12)
    deepseek = load_plan(write("d.yaml", text.replace(
        str(configs / "reconstructed" / "mixtral-8x7b.classdefaults.json"), str(configs / "real" / "deepseek-v3.json"))))
    m = deepseek.recipe.model
    assert (m.experts, m.experts_per_token, m.shared_experts, m.expert_intermediate_size) == (256, 8, 1, 2048)
    assert eff.gemms(deepseek)[-2:] == [(8192, 7168, 2048), (8192, 1024, 7168)]  # every token, width / TP 2
