"""Expert parallelism's all-to-all in the step time (`steptime.expert_parallel_bytes`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.hardware import hardware
from distrecipe.plan.steptime import expert_parallel_bytes, expert_parallel_seconds
from tests.conftest import ROOT

RECIPE = f"""recipe: 1
name: mixtral
model: {{hf_config: {ROOT / "tests" / "corpus" / "hf_configs" / "reconstructed" / "mixtral-8x7b.classdefaults.json"}}}
cluster: {{nodes: 8, gpus_per_node: 8, gpu: h100}}
strategy: megatron
stage: 1
parallel: {{tensor: 2, pipeline: 2, expert: 8}}
batch: {{micro: 2, global: 256, seq_len: 4096}}
precision: bf16
activation_checkpointing: none
"""


def test_dispatch_and_combine_forward_and_backward(write: Callable[[str, str], Path]) -> None:
    """Mixtral (32 MoE layers, top-2, h 4096): a rank of TP 2 with sequence parallelism holds
    4096 · 2 / 2 tokens; 16 layers a stage; 4 all-to-alls a layer (dispatch and combine, forward
    and backward), 7/8 leaving the rank; accumulation 256 / (2 × 16) = 8."""
    plan = load_plan(write("r.yaml", RECIPE))
    assert (plan.dims.dp, plan.batch.accumulation) == (16, 8)
    per_layer = 4 * (4096 * 2 / 2) * 2 * 4096 * 2 * 7 / 8
    assert expert_parallel_bytes(plan) == pytest.approx(8 * 16 * per_layer)
    full = load_plan(write("f.yaml", RECIPE.replace("checkpointing: none", "checkpointing: full")))
    assert expert_parallel_bytes(full) == pytest.approx(expert_parallel_bytes(plan) * 6 / 4)
    hw = hardware(plan)
    assert hw is not None
    # EP 8 × TP 2 spans 16 ranks, 4 of the group on each node: 3 of a rank's 7 peers share its node.
    sent = expert_parallel_bytes(plan)
    assert expert_parallel_seconds(plan, hw) == pytest.approx(sent * 3 / 7 / hw.intra + sent * 4 / 7 / hw.inter)
    assert expert_parallel_bytes(load_plan(write("d.yaml", RECIPE.replace("expert: 8", "expert: 1")))) == 0
