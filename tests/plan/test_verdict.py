"""`fits?` with its error band (distrecipe/plan/verdict.py): the three verdicts at their edges,
the band read from bands.json, the wide band for what has none, headroom, and `plan`'s exit
code and outputs reading the one verdict."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.report import estimate
from distrecipe.plan.verdict import BANDS, Band, band, band_of, verdict, word
from tests.conftest import RECIPES, Result

SEED = str(RECIPES / "seed-8b-32gpu-{}.yaml")
TABLE = json.loads(BANDS.read_text(encoding="utf-8"))
BAND = Band("torch", "eager-hf", low=-0.25, high=0.25, rows=4, sources=("s",), wide=False)
"""Exact in binary: 80 × 1.25 = 100, 80 × 0.75 = 60."""


@pytest.mark.parametrize(("usable", "said"), [
    (100.0, "fits"),  # the pessimistic end exactly at the GPU's memory still fits
    (100.0 - 1e-9, "tight"),
    (60.0, "tight"),  # the optimistic end exactly at it: may fit
    (60.0 - 1e-9, "does not fit"),
])
def test_the_three_verdicts_at_their_edges(usable: float, said: str) -> None:
    assert word(80.0, usable, BAND) == said


def test_a_band_of_its_own_is_the_data_s() -> None:
    found = band_of("deepspeed", "eager-hf")
    data = TABLE["bands"]["deepspeed"]["eager-hf"]
    assert (found.low, found.high, found.rows, list(found.sources)) == (
        data["low"], data["high"], data["rows"], data["sources"])
    assert not found.wide and not found.pooled and found.cell == "deepspeed × eager-hf"
    assert found.low < 0 < found.high


@pytest.mark.parametrize(("family", "kernels"), [("megatron", "eager-hf"), ("deepspeed", "liger")])
def test_kernels_without_rows_get_their_family_s_band_holding_zero(family: str, kernels: str) -> None:
    found = band_of(family, kernels)
    data = TABLE["families"][family]
    assert found.pooled and not found.wide and (found.low, found.high) == (data["low"], data["high"])
    assert found.low <= 0 <= found.high
    assert found.cell == f"{family}, any kernels (no band of its own for {kernels})"
    own = list(TABLE["bands"].get(family, {}).values())
    assert data["rows"] == sum(c["rows"] for c in own) + sum(
        e["rows"] for e in TABLE["too_few_rows"] if e["family"] == family)


@pytest.mark.parametrize(("family", "kernels"), [("nobody", "flash"), ("torch", "unknown")])
def test_a_family_without_rows_or_unknown_kernels_gets_the_wide_band(family: str, kernels: str) -> None:
    found = band_of(family, kernels)
    assert found.wide and (found.low, found.high) == (TABLE["unknown"]["low"], TABLE["unknown"]["high"])
    assert found.cell == f"wide (no band of its own for {family} × {kernels})"
    for own in (c for cells in TABLE["bands"].values() for c in cells.values()):
        assert found.low <= own["low"] and own["high"] <= found.high  # it holds every band


@pytest.mark.parametrize("kernels", ["eager-hf", "compile", "liger"])
def test_a_family_whose_rows_are_one_source_s_gets_the_wide_band(kernels: str) -> None:
    """torchtitan's rows are the torch family's only ones: leaving that source out leaves no
    band, so no program of the family gets one it has not earned on another source."""
    assert {e["sources"][0] for e in TABLE["too_few_rows"] if e["family"] == "torch"} == {"torchtitan_bench_h100_202412"}
    assert TABLE["min_sources"] == 2 and "torch" not in TABLE["bands"] and "torch" not in TABLE["families"]
    found = band_of("torch", kernels)
    assert found.wide and (found.low, found.high) == (TABLE["unknown"]["low"], TABLE["unknown"]["high"])


def test_a_plan_reads_its_family_and_kernels() -> None:
    deepspeed = load_plan(SEED.format("zero2"), ())
    assert band(deepspeed).cell == "deepspeed × eager-hf"
    fsdp = load_plan(SEED.format("zero2"), ("launch.backend=torchrun", "strategy=fsdp"))
    assert band(fsdp).wide and (band(fsdp).family, band(fsdp).kernels) == ("torch", "eager-hf")
    unknown = load_plan(SEED.format("zero2"), ("kernels.compile=unknown",))
    assert band(unknown).wide and band(unknown).kernels == "unknown"


def test_the_seed_s_zero1_is_tight() -> None:
    """85 GB by the plan on 80 GB: DeepSpeed's band (−6.8 % … +7.8 %) puts it on both sides."""
    est = estimate(load_plan(SEED.format("zero1"), ()))
    said = est.verdict
    assert said is not None and said.word == "tight" and est.fits is True and not est.comfortable
    assert said.low == pytest.approx(est.need * (1 + said.band.low))
    assert said.low < 80e9 < said.high


@pytest.mark.parametrize(("headroom", "usable"), [("0.05", 76e9), ("4GB", 76e9), ("0", 80e9)])
def test_headroom_is_kept_free(headroom: str, usable: float) -> None:
    plan = load_plan(SEED.format("zero2"), (f"cluster.headroom={headroom}",))
    said = verdict(plan, 71e9)
    assert said is not None and said.usable == pytest.approx(usable)
    assert said.word == ("fits" if usable == 80e9 else "tight")  # 71 GB × 1.078 = 76.5 GB


def test_without_gpu_memory_there_is_no_verdict() -> None:
    plan = load_plan(str(RECIPES / "tiny-cpu.yaml"), ())
    assert verdict(plan, 1e9) is None and estimate(plan).fits is None


@pytest.mark.parametrize(("name", "answer", "code"), [("zero2", "yes", 0), ("zero1", "tight", 0), ("ddp", "no", 1)])
def test_plan_exits_1_only_when_it_does_not_fit(cli: Callable[..., Result], name: str, answer: str,
                                                code: int) -> None:
    recipe = SEED.format(name)
    text = cli("plan", recipe)
    assert text.code == code
    assert f"fits? {answer}: needs " in text.out
    data = json.loads(cli("plan", recipe, "--format", "json").out)
    said = {"yes": "fits", "tight": "tight", "no": "does not fit"}[answer]
    assert (data["verdict"], data["fits"]) == (said, answer != "no")
    assert data["band"]["family"] == ("torch" if name == "ddp" else "deepspeed")
    assert data["band"]["low_bytes"] == pytest.approx(data["need"] * (1 + data["band"]["low"]))
    assert data["band"]["high_bytes"] == pytest.approx(data["need"] * (1 + data["band"]["high"]))


def test_text_names_the_band_and_the_headroom(cli: Callable[..., Result]) -> None:
    out = cli("plan", SEED.format("zero1"), "--set", "cluster.headroom=4GB").out
    assert ("fits? no: needs 84.96 GB (−6.8 % … +7.8 %: 79.15 GB–91.56 GB, deepspeed × eager-hf) = reserved "
            "82.81 GB + CUDA context and NCCL 2.15 GB, of 80 GB less cluster.headroom 4 GB = 76 GB") in out


def test_compare_diff_and_lint_read_the_same_verdict(cli: Callable[..., Result]) -> None:
    rows = {line.split()[0]: line.split()[-1] for line in cli("plan", SEED.format("zero2"), "--compare").out
            .splitlines()[-4:]}
    assert rows == {"DDP": "no", "ZeRO-1": "tight", "ZeRO-2": "yes", "ZeRO-3": "yes"}
    diff = cli("diff", SEED.format("zero2"), SEED.format("zero1"))
    assert "ZeRO-2 fits → ZeRO-1 tight" in diff.out
    lint = cli("lint", SEED.format("zero1"))
    assert lint.code == 0 and "warning DR372: tight: ZeRO-1 needs 84.96 GB per GPU" in lint.out


@pytest.mark.parametrize(("value", "message"), [
    ("100GB", "cluster.headroom 100 GB leaves nothing of the GPU's 80 GB: keep less free"),
    ("1.5", "cluster.headroom must be a number ≥ 0 or a string like 80GiB, got 1.5"),
    ("abc", "cluster.headroom must be a number ≥ 0 or a string like 80GiB, got 'abc'"),
])
def test_a_headroom_that_is_not_one_is_refused_at_its_key(cli: Callable[..., Result], value: str,
                                                          message: str) -> None:
    result = cli("plan", SEED.format("zero2"), "--set", f"cluster.headroom={value}")
    assert result.code == 2 and result.out == ""
    assert result.err == f"--set cluster.headroom={value}:1:18: error: {message}\n"
