"""`plan.activations`' kernel terms against saved-tensor measurements: the CSV the
benchmark wrote, and (slow) a fresh measurement of one tiny shape on this machine's torch."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from distrecipe.plan.activations import (
    eager_attention_backward,
    hf_llama,
    kernel_choice,
    llama_layer,
    loss_head,
    plan_activations,
    tiled_mlp_backward,
)
from tests.published import Row, plan_for_row

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "benchmarks" / "saved_activations.csv"
NORMS = 8
"""Bytes per token the formulas leave out: the two RMSNorms' fp32 reciprocal RMS."""


def measured(table: str = "") -> list[dict[str, str]]:
    """The rows of `benchmarks/saved_activations{table}.csv`, its `#` comment lines left out."""
    with CSV.with_stem(CSV.stem + table).open(encoding="utf-8") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def layer_formula(row: dict[str, Any]) -> float:
    s, b, h, a, kv, i = (int(row[k]) for k in ("s", "b", "h", "a", "h_kv", "i"))
    flash, compiled = row["attention"] == "sdpa", str(row["compile"]) == "True"
    tiled = row.get("mlp") == "tiled"
    return (llama_layer(s=s, b=b, h=h, a=a, kv=kv, inter=i, flash=flash, compiled=compiled, tiled=tiled)
            + NORMS * s * b)


DENSE = [r for r in measured() if r["family"] in ("llama", "qwen2") and r["recompute"] == "none"]


@pytest.mark.parametrize("row", DENSE, ids=lambda r: f"{r['family']}-{r['attention']}-compile{r['compile']}-"
                         f"{r['loss']}-{r['mlp']}-mlp")
def test_layer_formula_is_the_measurement(row: dict[str, str]) -> None:
    """Eager exactly; compiled sdpa exactly; compiled eager attention's softmax statistics
    to within 1 % (the partitioner's choice among them varies with the graph)."""
    tolerance = 0.01 if row["attention"] == "eager" and row["compile"] == "True" else 0.0
    assert layer_formula(row) == pytest.approx(int(row["layer_saved"]), rel=tolerance)


@pytest.mark.parametrize("row", [r for r in measured() if r["family"] == "llama" and r["compile"] == "False"],
                         ids=lambda r: f"{r['attention']}-{r['loss']}-{r['recompute']}-{r['mlp']}-mlp")
def test_head_and_checkpoint_formulas_are_the_measurement(row: dict[str, str]) -> None:
    """The head: measured without the final norm (body_rest holds it: 6·sbh and its 4·sb
    statistics), so the formula's 8·sbh less 6·sbh; full recompute holds 2·sbh a layer."""
    s, b, h, vocab = (int(row[k]) for k in ("s", "b", "h", "V"))
    head, _ = loss_head(s=s, b=b, h=h, vocab=vocab, loss=row["loss"], holds_logits=True)
    logits = 2 * s * b * vocab if row["loss"] == "full" else 0
    saved = head - logits - 6 * s * b * h
    labels = 8 * s * b if row["loss"] != "fused" else 0  # cross_entropy's int64 target, left out
    assert saved + labels == pytest.approx(int(row["head_saved"]), abs=32)  # + the loss's scalars
    assert int(row["logits_held"]) == logits
    if row["recompute"] == "full":
        assert int(row["layer_held"]) == 2 * s * b * h and int(row["layer_saved"]) == 0


@pytest.mark.slow
def test_a_fresh_measurement_matches() -> None:
    """Re-measure the tiny shape with this torch (eager and compiled) and hold the formula to it."""
    spec = importlib.util.spec_from_file_location("saved_activations", ROOT / "benchmarks" / "saved_activations.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["saved_activations"] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    torch = pytest.importorskip("torch")
    for variant in (bench.Variant(), bench.Variant(attention="eager"), bench.Variant(compile=True),
                    bench.Variant(mlp="tiled")):
        one = bench.measure("llama", variant, 1, torch.bfloat16, s=32, b=1)
        two = bench.measure("llama", variant, 2, torch.bfloat16, s=32, b=1)
        row = {"s": 32, "b": 1, "h": 64, "a": 4, "h_kv": 32, "i": 176, "attention": variant.attention,
               "compile": str(variant.compile), "mlp": variant.mlp}
        assert two["body"] - one["body"] == layer_formula(row), variant
    saved, _, backward = bench.mlp_peaks(256, 1, "tiled")  # 4 shards of 64 tokens
    assert saved == 0
    assert backward == pytest.approx(tiled_mlp_backward(s=256, b=1, h=64, inter=176), rel=0.002)


def row_with(**changes: str) -> Row:
    base = {"source_id": "torchtitan_bench_h100_202412", "model": "Llama-3.1-8B", "params": "8030261248",
            "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "14336", "vocab": "128256",
            "gpus": "8", "gpu": "H100 80GB", "gpu_memory_GiB": "", "strategy": "fsdp2", "zero_stage": "",
            "tp": "1", "pp": "1", "cp": "1", "micro": "1", "global_batch": "8", "seq_len": "8192",
            "checkpointing": "none", "precision": "bf16", "compile": "", "notes": ""}
    return Row({**base, **changes})


@pytest.mark.parametrize(("compile_", "choice", "per_sbh"), [("", "eager-hf", 20 + 1 + 28), ("no", "eager-hf", 20 + 1 + 28),
                                                              ("yes", "compile", 12 + 1 + 21)])
def test_a_published_row_states_compile_only_where_it_says(compile_: str, choice: str, per_sbh: int) -> None:
    """Llama-3.1-8B (h_kv/h 1/4, i/h 3.5), b = 1: sbh·(20 + 4·h_kv/h + 8·i/h) eager,
    sbh·(12 + 4·h_kv/h + 6·i/h) compiled, each + 4·a·s·b; unstated stays eager."""
    plan = plan_for_row(row_with(compile=compile_))
    assert kernel_choice(plan) == choice
    assert ("kernels.compile" in plan.recipe.where) == bool(compile_)
    per_layer = plan_activations(plan)[0].layers / 32
    assert per_layer == 8192 * 4096 * per_sbh + 4 * 32 * 8192


@pytest.mark.parametrize("row", measured("_tiled"), ids=lambda r: f"s{r['s']}-{r['shards']}-shards")
def test_tiled_mlp_terms_are_the_measurement(row: dict[str, str]) -> None:
    """DeepSpeed's `TiledMLP` saves nothing beyond the MLP's input where the whole MLP saves
    8·sbi (the term `llama_layer(tiled=True)` drops), and its backward peaks at the input's
    gradient, 2·sbh, plus one shard's work (`tiled_mlp_backward`), at any shard count."""
    s, b, h, i = (int(row[k]) for k in ("s", "b", "h", "i"))
    assert int(row["full_saved"]) == 8 * s * b * i
    assert int(row["tiled_saved"]) == 0
    assert int(row["shards"]) == -(-s // h)
    assert int(row["tiled_backward_peak"]) == pytest.approx(tiled_mlp_backward(s=s, b=b, h=h, inter=i), rel=0.002)


def test_a_published_row_states_a_tiled_mlp() -> None:
    """`[kernels: mlp=tiled]` states `kernels.mlp: tiled`; `mlp=plain` the default, stated.
    Llama-3.1-8B, b = 1: sbh·(20 + 4·h_kv/h) + 4·a·s·b a layer, the MLP's 8·sbi gone."""
    tiled = plan_for_row(row_with(notes="[kernels: mlp=tiled]"))
    plain = plan_for_row(row_with(notes="[kernels: mlp=plain]"))
    assert (tiled.recipe.kernels.mlp, plain.recipe.kernels.mlp) == ("tiled", "full")
    assert "kernels.mlp" in plain.recipe.where
    assert (kernel_choice(tiled), kernel_choice(plain)) == ("tiled-mlp", "eager-hf")
    assert plan_activations(tiled)[0].layers / 32 == 8192 * 4096 * 21 + 4 * 32 * 8192
    assert "tiled MLP" in plan_activations(tiled)[0].formula


def test_a_tiled_mlp_under_full_recompute_adds_its_backward_to_the_rebuilt_layer() -> None:
    """Full recompute keeps 2·sbh a layer either way; the layer rebuilt in backward saves
    8·sbi less and allocates `tiled_mlp_backward` (2·sbh + one shard) on top."""
    s, h, i = 1_200_000, 4096, 14336  # ALST's one-H200 row: the fused loss holds no logits
    shape: dict[str, Any] = dict(s=s, b=1, h=h, a=32, kv=1024, inter=i, layers=32, vocab=128256, flash=True,
                                 recompute="full", loss="fused")
    full, tiled = hf_llama(**shape), hf_llama(**shape, tiled=True)
    assert tiled.layers == full.layers and tiled.head == full.head
    assert tiled.peak - full.peak == pytest.approx(-8 * s * i + tiled_mlp_backward(s=s, b=1, h=h, inter=i))


def test_eager_backward_term_is_the_measured_limit() -> None:
    """The CSV's eager-over-SDPA backward peak approaches 8·a·s²·b from below as s grows,
    the term `eager_attention_backward` charges."""
    found = measured("_backward")
    ratios = [float(r["difference_per_a_s2_b"]) for r in found]
    assert ratios == sorted(ratios) and 6.5 < ratios[-1] < 8
    last, before = found[-1], found[-2]
    grown = [(int(r["eager_peak"]) - int(r["sdpa_peak"])) for r in (before, last)]
    s0, s1, a = int(before["s"]), int(last["s"]), int(last["a"])
    slope = (grown[1] - grown[0] * s1 / s0) / (a * s1 * s1 - a * s0 * s0 * s1 / s0)  # c in c·a·s² + d·s
    assert slope == pytest.approx(eager_attention_backward(s=1, b=1, a=1), rel=0.05)


def test_the_full_loss_peak_is_the_measured_one() -> None:
    """transformers' loss, forward and backward, peaks 12·sbV beyond the logits the caller
    holds: the saved fp32 log-softmax (in the head) plus `loss_backward`'s 8·sbV."""
    found = measured("_loss")
    assert found
    for row in found:
        s, b, vocab = int(row["s"]), int(row["b"]), int(row["V"])
        head, backward = loss_head(s=s, b=b, h=0, vocab=vocab, loss="full", holds_logits=False)
        assert head + backward == pytest.approx(int(row["peak"]), abs=64)


@pytest.mark.parametrize("row", measured("_chunked_loss"), ids=lambda r: f"{r['loss']}-n{r['n']}-V{r['V']}")
def test_the_chunked_loss_terms_are_the_measurement(row: dict[str, str]) -> None:
    """One chunk of torchtune's loss (the head's input terms aside, h = 0): eager saves the
    fp32 log-softmax, 4 bytes a logit, and its backward peaks at 8; compiled
    (`training.compile_loss`) saves the 16-bit logits, 2 bytes a logit, and its backward
    makes the 16-bit gradient, 2. The formula is the whole loss, 8 chunks, so one chunk is
    n·V with s·b = 8·n; the int64 labels (8 bytes a token) and per-row statistics (8 more
    compiled) are left out."""
    n, vocab, compiled = int(row["n"]), int(row["V"]), row["loss"] == "compiled"
    head, backward = loss_head(s=8 * n, b=1, h=0, vocab=vocab, loss="chunked", holds_logits=False,
                               compiled=compiled)
    saved = int(row["saved_beyond_input"]) + int(row["input_saved"])
    left_out = 8 * n + (8 * n if compiled else 4)  # labels; statistics (compiled) or the weight scalar
    assert head / 8 + left_out == saved
    assert int(row["input_saved"]) == (2 * n * vocab if compiled else 0)
    assert backward == pytest.approx(int(row["backward_peak"]), rel=0.01)


def test_a_compiled_chunked_loss_is_planned_only_with_compile() -> None:
    """torchtune's `compile` compiles the loss too: the compiled row of the blog saves 2·sbV
    for the loss, the eager one 4·sbV; the rest of the head is the same."""
    base = {"source_id": "pytorch_blog_torchtune_liger_202503", "model": "Llama-3.2-1B", "params": "1235814400",
            "layers": "16", "hidden": "2048", "heads": "32", "kv_heads": "8", "ffn": "8192", "vocab": "128256",
            "gpus": "4", "gpu": "A100 (memory not stated)", "gpu_memory_GiB": "", "strategy": "fsdp2",
            "zero_stage": "", "tp": "1", "pp": "1", "cp": "1", "micro": "256", "global_batch": "1024",
            "seq_len": "512", "checkpointing": "full", "precision": "bf16",
            "notes": "[kernels: attention=sdpa loss=chunked(torchtune)] [model: tied=yes]"}
    eager = plan_activations(plan_for_row(Row({**base, "compile": "no"})))[0]
    compiled = plan_activations(plan_for_row(Row({**base, "compile": "yes"})))[0]
    assert eager.head - compiled.head == 2 * 512 * 256 * 128256
    assert "compiled chunked loss" in compiled.formula and "compiled chunked" not in eager.formula


@pytest.mark.slow
def test_a_fresh_chunked_loss_measurement_is_the_csv() -> None:
    """Re-measure one chunk of torchtune's loss, eager and compiled, with this torch: the
    saved bytes are the CSV's to the byte."""
    spec = importlib.util.spec_from_file_location("saved_activations", ROOT / "benchmarks" / "saved_activations.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["saved_activations"] = bench
    spec.loader.exec_module(bench)
    pytest.importorskip("torch")
    fresh = {(r["loss"], r["n"]): (r["saved_beyond_input"], r["input_saved"]) for r in bench.chunked_loss_rows()}
    stored = {(r["loss"], int(r["n"])): (int(r["saved_beyond_input"]), int(r["input_saved"]))
              for r in measured("_chunked_loss")}
    assert fresh == stored
