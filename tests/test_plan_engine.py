"""Real engines are the judge of `plan`'s engine view.

One `torchrun --nproc_per_node 2` launch (CPU, gloo) runs `tests/engine_probe.py`,
which trains a tiny random Llama (Ψ = 1,049,728) under DeepSpeed ZeRO-0/1/2/3 and
torch FSDP2 (also in pure bf16, `optimizer.master_weights: bf16`: DeepSpeed's
`bf16_master_weights_and_grads`, FSDP2 over a model cast to bf16) with the DeepSpeed config
`distrecipe compile` emits for the same recipe,
and sums the storages each rank really holds at rest, after backward and at the
step's peak. The engine view must be within 3% at every point, on the worst rank.

Padding: every tensor here is a multiple of 128 elements, so ZeRO-1/2's flat-group
alignment (2·N elements) and ZeRO-3's per-tensor padding to N add nothing; FSDP2 pads
dim 0 to a multiple of N rows, shown by the vocab-1023 case (one 128-element row per
tensor). The plan leaves padding out; what is left is listed in docs/plan.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.report import Estimate, estimate
from distrecipe.translator.deepspeed import emit

pytestmark = pytest.mark.slow

TOLERANCE = 0.03
PROBE = Path(__file__).with_name("engine_probe.py")
SHAPE = {"hidden_size": 128, "layers": 4, "heads": 4, "kv_heads": 2,
         "intermediate_size": 384, "vocab": 1024}
RECIPE = f"""
recipe: 1
name: engine-probe
model: {json.dumps({**SHAPE, "attention": "sdpa"})}
cluster: {{nodes: 1, gpus_per_node: 2, device: cpu}}
strategy: zero
stage: 2
batch: {{micro: 2, accumulation: 1, global: 4, seq_len: 32}}
precision: bf16
optimizer: {{name: adamw, lr: 1.0e-4}}
launch: {{backend: deepspeed}}
"""
CASES: dict[str, tuple[str, ...]] = {
    "ZeRO-0": ("strategy=ddp", "stage=0"),
    "ZeRO-1": ("stage=1",),
    "ZeRO-2": (),
    "ZeRO-3": ("stage=3",),
    "ZeRO-1, accumulation 2": ("stage=1", "batch.accumulation=2", "batch.global=8"),
    "ZeRO-2, accumulation 2": ("batch.accumulation=2", "batch.global=8"),
    "ZeRO-0, fp32": ("strategy=ddp", "stage=0", "precision=fp32"),
    "ZeRO-2, fp32": ("precision=fp32",),
    "ZeRO-3, fp32": ("stage=3", "precision=fp32"),
    "FSDP2, reshard false": ("strategy=fsdp", "stage=2", "launch.backend=accelerate"),
    "FSDP2, reshard true": ("strategy=fsdp", "stage=3", "launch.backend=accelerate"),
    # Pure bf16 (optimizer.master_weights): DeepSpeed's bf16_master_weights_and_grads with
    # bf16_optimizer_states, and FSDP2 over a model cast to bf16 with torch's AdamW.
    "ZeRO-2, pure bf16": ("optimizer.master_weights=bf16", "optimizer.state_dtype=bf16"),
    "ZeRO-3, pure bf16": ("stage=3", "optimizer.master_weights=bf16", "optimizer.state_dtype=bf16"),
    "FSDP2, pure bf16": ("strategy=fsdp", "stage=3", "launch.backend=accelerate",
                         "optimizer.master_weights=bf16"),
    # 1,023 rows do not split in two: FSDP2 pads dim 0 of embedding and head by one row.
    "FSDP2, vocab 1023": ("strategy=fsdp", "stage=3", "launch.backend=accelerate",
                          "model.vocab=1023"),
}


def job(name: str, est: Estimate) -> dict[str, Any]:
    """The probe's instructions for one case, from the same Plan the estimate used."""
    plan = est.plan
    shape = {**SHAPE, "vocab": plan.recipe.model.vocab}
    pure = plan.recipe.optimizer is not None and plan.recipe.optimizer.master_weights == "bf16"
    spec: dict[str, Any] = {"name": name, "shape": shape, "micro": plan.batch.micro,
                            "accumulation": plan.batch.accumulation, "precision": plan.precision,
                            "pure": pure}
    if plan.recipe.strategy == "fsdp":
        # Accelerate's FSDP2 reduces in the compute dtype (verl would reduce in fp32).
        return {**spec, "engine": "fsdp2", "reshard": plan.stage >= 3, "reduce": plan.precision}
    config = emit(plan)
    # FusedAdam needs CUDA; torch's AdamW without foreach keeps no step-sized temporaries.
    config["optimizer"]["params"].update(torch_adam=True, foreach=False)
    return {**spec, "engine": "deepspeed", "ds_config": config}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Estimate, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("engine")
    recipe = tmp / "probe.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    estimates = {name: estimate(load_plan(recipe, sets)) for name, sets in CASES.items()}
    jobs, out = tmp / "jobs.json", tmp / "out.json"
    jobs.write_text(json.dumps([job(n, e) for n, e in estimates.items()]), encoding="utf-8")
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", str(PROBE), str(jobs), str(out)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = {r["name"]: r for r in json.loads(out.read_text(encoding="utf-8"))}
    return {name: (est, results[name]) for name, est in estimates.items()}


def worst_rank(result: dict[str, Any]) -> dict[str, int]:
    """Per point, the most any rank held; `backward` is the worst micro-step."""
    ranks = [{k: v for k, v in r.items() if k != "sent"} for r in result["ranks"]]
    return {
        "rest": max(r["rest"] for r in ranks),
        "backward": max(v for r in ranks for k, v in r.items() if k.startswith("bwd")),
        "peak": max(max(r.values()) for r in ranks),
    }


@pytest.mark.parametrize("name", list(CASES))
def test_engine_view_matches_what_the_engine_holds(measured: Any, name: str) -> None:
    est, result = measured[name]
    assert est.psi == result["psi"], "the recipe's shape must give the probe model's Ψ"
    held = worst_rank(result)
    planned = {"rest": est.engine.total("rest"), "backward": est.engine.total("backward"),
               "peak": est.engine.peak}
    for point, value in held.items():
        error = (planned[point] - value) / value
        print(f"{name:24} {point:8} measured {value / est.psi:7.4f} B/Ψ  "
              f"plan {planned[point] / est.psi:7.4f} B/Ψ  error {error:+.3%} "
              f"({planned[point] - value:+.0f} B)")
        assert abs(error) <= TOLERANCE, (name, point, value, planned[point])


def test_deepspeed_estimators_against_engine_and_plan(measured: Any) -> None:
    """DeepSpeed's estimators: ZeRO-2's 2Ψ + 18Ψ/G is the measured peak without the
    reduce buckets; ZeRO-3's 4·largest layer + 18Ψ/G misses the fp32 gradient copy (it
    counts 2Ψ/G, the engine makes 4Ψ/G) and that, under the default
    `stage3_max_live_parameters` of 1e9, a small model stays gathered from forward to
    backward: it is below what the engine holds."""
    est2, result2 = measured["ZeRO-2"]
    ds2 = result2["deepspeed_estimate"]["zero2"]
    buckets = est2.engine.points["step"]["buffers"]
    assert ds2 == pytest.approx(est2.engine.peak - buckets, rel=1e-6)
    assert ds2 == pytest.approx(worst_rank(result2)["peak"] - buckets, rel=TOLERANCE)
    est3, result3 = measured["ZeRO-3"]
    ds3 = result3["deepspeed_estimate"]["zero3"]
    assert ds3 < worst_rank(result3)["peak"] * (1 - TOLERANCE)
    assert est3.engine.peak == pytest.approx(worst_rank(result3)["peak"], rel=TOLERANCE)


@pytest.mark.parametrize("name", list(CASES))
def test_engine_traffic_matches_what_the_engine_sends(measured: Any, name: str) -> None:
    """Bytes one rank sends over the measured step, against `plan`'s engine traffic."""
    est, result = measured[name]
    sent = max(r["sent"] for r in result["ranks"])
    planned = est.traffic_engine.total
    print(f"{name:24} sent     measured {sent / est.psi:7.4f} B/Ψ  plan "
          f"{planned / est.psi:7.4f} B/Ψ  seed {est.traffic_formula.total / est.psi:7.4f} B/Ψ")
    assert planned == pytest.approx(sent, rel=TOLERANCE)
