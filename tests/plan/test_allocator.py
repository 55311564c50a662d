"""`plan.allocator`: the optimizer step's temporaries by the Trainer's `optim`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.plan.allocator import IN_PLACE_STEP, foreach_temporaries
from distrecipe.plan.report import estimate
from tests.published import TRAINER_OPTIM, plan_for_row, rows


def _estimate(tmp_path: Path, native: dict[str, Any] | None) -> Any:
    doc: dict[str, Any] = {
        "recipe": 1, "name": "optim",
        "model": {"hidden_size": 4096, "layers": 32, "heads": 32, "intermediate_size": 11008, "vocab": 32000},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory": "80GB", "device": "gpu"},
        "strategy": "fsdp", "batch": {"micro": 1, "accumulation": 1, "global": 8, "seq_len": 512},
        "launch": {"backend": "accelerate"},
    }
    if native is not None:
        doc["native"] = native
    path = tmp_path / "optim.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return estimate(load_plan(path))


@pytest.mark.parametrize(("optim", "temporary"), [
    (None, True),  # the Trainer's default adamw_torch: foreach
    ("adamw_torch", True),
    ("adamw_torch_fused", False),
    ("paged_adamw_32bit", False),  # bitsandbytes: one in-place kernel per tensor
])
def test_the_trainer_s_optim_decides_the_foreach_temporary(tmp_path: Path, optim: str | None,
                                                           temporary: bool) -> None:
    est = _estimate(tmp_path, None if optim is None else {"hf": {"optim": optim}})
    held = foreach_temporaries(est.plan, est.engine)
    assert (held == est.engine.points["step"]["optimizer"] / 2) if temporary else held == 0.0
    assert ("optimizer temporaries" in est.memory.step) is temporary
    assert (optim in IN_PLACE_STEP) is not temporary


def test_the_hf_blog_70b_states_the_optimizer_its_script_ran() -> None:
    """DHS-LLM-Workshop's train.py of the blog defaults `optim` to paged_adamw_32bit: no 16 GiB
    foreach temporary, so the 70B that trained needs 72.7 GiB of 79.1 (90.3 with it)."""
    row = next(r for r in rows() if r.data["source_id"] in TRAINER_OPTIM)
    est = estimate(plan_for_row(row))
    assert est.plan.recipe.native.hf["optim"] == "paged_adamw_32bit"
    assert "optimizer temporaries" not in est.memory.step
    assert est.verdict is not None and est.verdict.word == "fits"
