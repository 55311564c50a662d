"""`distrecipe plan` end to end: text, --compare, --format json, --plot, and a light start."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.plan.efficiency import FITTED
from tests.conftest import RECIPES, Result

SEED_ZERO2 = RECIPES / "seed-8b-32gpu-zero2.yaml"


def test_text_shows_both_views_and_the_verdict(cli: Callable[..., Result]) -> None:
    result = cli("plan", SEED_ZERO2)
    assert result.code == 0, result.err
    assert "formula (seed)  2Ψ + 14Ψ/N = 19.5 GB" in result.out
    assert "engine          DeepSpeed ZeRO-2: rest 19 GB" in result.out
    # Two 8K sequences per micro-batch, recomputed; the loss's logits and fp32 gradients
    # (14 bytes per token × vocab), reserved × 1.10 and the CUDA context: what a GPU shows.
    assert ("fits? yes: needs 67.91 GB (−6.8 % … +7.8 %: 63.27 GB–73.18 GB, deepspeed × eager-hf) = reserved "
            "65.76 GB") in result.out
    result = cli("plan", SEED_ZERO2, "--set", "activation_checkpointing=none")
    assert "fits? no" in result.out
    assert "it fits with batch.micro 1 (batch.accumulation 8), activation_checkpointing: selective" in result.out


def test_compare_lists_every_strategy_with_the_seed_numbers(cli: Callable[..., Result]) -> None:
    """The seed's table, less Megatron: DeepSpeed, which runs the seed, would run it as ZeRO
    data parallelism (DR218), so it is not offered; its 51 GB is `test_plan_seed`'s."""
    out = cli("plan", SEED_ZERO2, "--compare").out
    rows = {line.split()[0]: line for line in out.splitlines()[-4:]}
    assert list(rows) == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    for name, state, sent in [("DDP", "128 GB", "31 GB"), ("ZeRO-1", "35 GB", "31 GB"),
                              ("ZeRO-2", "19.5 GB", "31 GB"), ("ZeRO-3", "4 GB", "46.5 GB")]:
        assert f" {state} " in rows[name] and f" {sent} " in rows[name]
    torchrun = cli("plan", SEED_ZERO2, "--compare", "--set", "launch.backend=torchrun").out
    assert torchrun.splitlines()[-1].startswith("Megatron ")  # the user's script: nothing refuses it


def test_json_is_bytes_and_matches_the_text(cli: Callable[..., Result]) -> None:
    result = cli("plan", SEED_ZERO2, "--format", "json", "--compare")
    data = json.loads(result.out)
    assert data["units"] == "bytes"
    assert data["formula"]["total"] == 19.5e9
    assert data["engine"]["peak"] == pytest.approx(2 * 8e9 + 18 * 8e9 / 32 + 2 * 4096**2 * 2)
    assert data["engine"]["peak_point"] == "step"
    assert data["traffic"]["formula"]["total"] == pytest.approx(31e9)
    assert data["fits"] is True and data["advice"]
    assert [row["strategy"] for row in data["compare"]] == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]


def test_plot_writes_a_real_svg(cli: Callable[..., Result], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "memory.svg"
    result = cli("plan", SEED_ZERO2, "--plot", target)
    assert result.code == 0, result.err
    svg = target.read_text(encoding="utf-8")
    assert "<svg" in svg and svg.count("<path") > 10  # bars, axes, legend


def test_plot_without_matplotlib_says_how_to_install(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    result = cli("plan", SEED_ZERO2, "--plot", tmp_path / "memory.svg")
    assert result.code == 2
    assert "pip install 'distrecipe[plot]'" in result.err
    assert not (tmp_path / "memory.svg").exists()


def test_plan_without_a_parameter_count_is_one_line(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    recipe = write("r.yaml", "recipe: 1\nname: x\nmodel: {hidden_size: 64}\n"
                   "cluster: {nodes: 1, gpus_per_node: 2, gpu_memory: 80GB}\nstrategy: zero\n"
                   "stage: 2\nbatch: {micro: 1, global: 2}\n")
    result = cli("plan", recipe)
    assert result.code == 2
    assert "model.params" in result.err and len(result.err.strip().splitlines()) == 1


def test_plan_imports_no_engine_and_no_matplotlib() -> None:
    probe = ("import sys\nfrom distrecipe.cli import main\ncode = main(sys.argv[1:])\n"
             "heavy = [m for m in ('torch', 'deepspeed', 'accelerate', 'verl', 'transformers', "
             "'matplotlib') if m in sys.modules]\nprint('HEAVY:' + ','.join(heavy), file=sys.stderr)\n"
             "raise SystemExit(code)\n")
    done = subprocess.run([sys.executable, "-c", probe, "plan", str(SEED_ZERO2), "--compare"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "HEAVY:"


def test_plan_exits_1_when_it_does_not_fit_and_compile_refuses_dr370(cli: Callable[..., Result]) -> None:
    """A script can gate a booking on `plan`; `compile` refuses what lint rejects (exit 1,
    lint's code for an error finding), `--strict` or not, with lint's positioned line."""
    assert cli("plan", SEED_ZERO2).code == 0
    ddp = RECIPES / "seed-8b-32gpu-ddp.yaml"
    assert cli("plan", ddp).code == 1
    for flags in ((), ("--strict",)):
        result = cli("compile", ddp, *flags)
        assert result.code == 1 and result.out == ""
        assert f"{ddp}:16:51: error DR370: DDP needs" in result.err
        assert "cannot express" not in result.err
    assert "DR370" not in cli("compile", SEED_ZERO2).err


def test_step_time_says_whose_efficiency_it_is(cli: Callable[..., Result]) -> None:
    """A generation no published run calibrates borrows a fitted cell's figure, and the text
    and JSON say so; DeepSpeed shares torch's kernels' figure."""
    hopper = FITTED[("torch", "hopper")]
    out = cli("plan", SEED_ZERO2, "--set", "cluster.gpu=h100").out
    assert f"recompute included; efficiency {hopper.basis})" in out
    out = cli("plan", SEED_ZERO2, "--set", "cluster.gpu=l40s", "--set", "cluster.gpu_memory=48GB").out
    assert (f"({hopper.value:g} × matmul size 0.85 of L40S (PCIe 4)'s 362.05 TFLOPS, recompute included; "
            "efficiency borrowed from FSDP2/DDP on Hopper: no published bf16 run on Ada GPUs)") in out
    step = json.loads(cli("plan", SEED_ZERO2, "--set", "cluster.gpu=mi300x", "--set", "cluster.gpu_memory=192GB",
                          "--format", "json").out)
    assert step["step_time"]["efficiency_borrowed"] is True
    assert step["step_time"]["efficiency_basis"] == ("borrowed from FSDP2/DDP on Hopper: no published bf16 run "
                                                     "on CDNA 3 GPUs")
    step = json.loads(cli("plan", SEED_ZERO2, "--set", "cluster.gpu=h200", "--set", "cluster.gpu_memory=141GB",
                          "--format", "json").out)
    assert step["step_time"]["efficiency_borrowed"] is False
