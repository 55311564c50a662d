"""`plan.allocator`: the optimizer step's temporaries by the Trainer's `optim`, and the
segments ZeRO-1/2's step adds to backward's reservation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.api import load_plan
from distrecipe.plan.allocator import (
    CONTEXT,
    FRAGMENTATION,
    IN_PLACE_STEP,
    foreach_temporaries,
    largest_gradient,
    zero_step,
)
from distrecipe.plan.render import text
from distrecipe.plan.report import estimate
from distrecipe.plan.units import gb
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from tests import probes
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
    foreach temporary, so the 70B that trained needs 72.7 GiB of 79.1 (90.3 with it): *tight*
    by the wide band the torch family takes (one source of its own), launched, never refused."""
    row = next(r for r in rows() if r.data["source_id"] in TRAINER_OPTIM)
    est = estimate(plan_for_row(row))
    assert est.plan.recipe.native.hf["optim"] == "paged_adamw_32bit"
    assert "optimizer temporaries" not in est.memory.step
    assert est.verdict is not None and est.verdict.word == "tight"  # the torch family's wide band
    assert est.need < est.verdict.usable


def _zero(**changes: Any) -> Any:
    """A tiny ZeRO-1 plan on 2 CPU ranks, the shape `tests/zero_step_probe.py` trains."""
    doc: dict[str, Any] = {
        "recipe": 1, "name": "zero-step",
        "model": {"params": 196_608, "hidden_size": 64, "layers": 2, "heads": 4, "intermediate_size": 256,
                  "vocab": 1024},
        "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "cpu"},
        "strategy": "zero", "stage": 1, "batch": {"micro": 1, "accumulation": 1, "seq_len": 32},
        "precision": "bf16", "launch": {"backend": "deepspeed"}, **changes,
    }
    return estimate(resolve(recipe_from_text(yaml.safe_dump(doc), "zero.yaml")))


def test_the_zero_step_s_segments_stack_on_backward_s_reservation() -> None:
    """BigScience's fp16 ZeRO-1 first stage (tp 8): the step's fp64 norm copy of the
    vocabulary-parallel embedding (8·V·h/t bytes) is larger than the flattened and cast
    partition and than any block backward freed, so reserved is backward's plus it."""
    row = next(r for r in rows() if r.data["source_id"] == "bigscience_tr11_prequel_2022"
               and "not stated" in r.data["precision"] and r.data["zero_stage"] == "1")
    est = estimate(plan_for_row(row))
    mem, d = est.memory, row.data
    embedding = int(d["vocab"]) * int(d["hidden"]) / int(d["tp"])
    assert mem.moment == "backward"
    assert mem.segments == 8 * embedding
    assert mem.reserved == (sum(mem.backward.values()) + mem.stranded) * (1 + FRAGMENTATION) + 8 * embedding
    # what nvidia-smi shows with room; "fits?" needs only the binding moment's (a full GPU frees the cache)
    assert mem.shown == mem.reserved + CONTEXT > mem.needed == mem.retained + CONTEXT
    assert est.memory.step["fp64 gradient norm (transient)"] == pytest.approx(
        8 * embedding - mem.step["fp32 gradients"] - mem.step["flattened gradients (transient)"])
    shown = text(est, [])  # plan names both figures, and which one "fits?" reads
    assert f"with room, reserved reaches {gb(mem.reserved)}: new segments {gb(mem.segments)}" in shown
    assert f"= reserved {gb(mem.retained)} + CUDA context" in shown


@pytest.mark.parametrize(("changes", "why"), [
    ({"stage": 3}, "ZeRO-3's sub-group step"),
    ({"offload": {"optimizer": "cpu"}}, "the norm is taken on the host"),
    ({"strategy": "fsdp", "stage": 2, "launch": {"backend": "accelerate"}}, "not DeepSpeed's optimizer"),
])
def test_only_zero_1_and_2_on_the_gpu_take_segments(changes: dict[str, Any], why: str) -> None:
    est = _zero(**changes)
    assert est.memory.segments == 0.0, why
    assert "fp64 gradient norm (transient)" not in est.memory.step


def test_a_freed_block_that_holds_the_step_s_tensors_adds_nothing() -> None:
    """Backward's largest freed blocks (the head's logits, the loss's gradients) take the
    step's tensors when they are larger: 32 tokens of a 1024 vocabulary leave none that large,
    2048 tokens' fp32 logits outgrow the tiny partition's copies, so nothing stacks."""
    assert _zero().memory.segments > 0
    est = _zero(batch={"micro": 1, "accumulation": 1, "seq_len": 2048})
    assert est.memory.segments == 0.0
    assert zero_step(est.plan, est.engine, est.stage)[1] <= max(est.activations[0].head, est.activations[0].backward)


@pytest.mark.slow
def test_deepspeeds_step_makes_the_copies_the_plan_counts(tmp_path: Path) -> None:
    """Measured (`tests/zero_step_probe.py`, 2 gloo ranks, bf16, ZeRO-1 and ZeRO-2): inside
    `engine.step()` the largest fp64 tensor is the largest gradient's piece of the partition
    (the embedding or the head, 1024·64 elements, within the 98,304-element partition) and the
    cast is the partition, on both ranks, as `zero_step` counts them."""
    ranks = probes.run("zero_step_probe", {"hidden": 64, "vocab": 1024, "seq": 32, "layers": 2,
                                            "stages": [1, 2]}, tmp_path)
    for stage in (1, 2):
        est = _zero(stage=stage)
        cast = est.engine.points["step"]["fp32 gradients"]
        partition = cast / 4
        fp64 = 8 * min(largest_gradient(est.plan, est.stage), partition)
        assert [rank[str(stage)] for rank in ranks] == [{"fp64": fp64 / 8, "cast": partition,
                                                          "partition": partition}] * 2
        copies = cast + est.memory.step.get("flattened gradients (transient)", 0.0)
        assert zero_step(est.plan, est.engine, est.stage) == (max(0.0, fp64 - copies), max(fp64, copies))
