"""What a Megatron-DeepSpeed pipeline stage holds beyond its layers' checkpoints: the
embedding's saved dropout mask, DeepSpeed's pipeline buffers and the BF16_Optimizer's fp32
gradient copy, each on the stage that holds it, and each moving the plan's figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.job import Plan
from distrecipe.plan.allocator import CONTEXT, FRAGMENTATION
from distrecipe.plan.pipeline import (
    COPY,
    bf16_optimizer,
    embedding_mask,
    embedding_norm_input,
    fp32_copy_segment,
    fp32_gradient_copy,
    largest_parameter,
    pipe_buffers,
)
from distrecipe.plan.report import estimate
from distrecipe.plan.stages import in_flight, stage
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from tests import probes

H, L, V, S = 14336, 72, 250880, 2048
"""BigScience's 181B search shape (tests/corpus/gpu/published.csv)."""


def plan_of(*, tensor: int = 8, pipeline: int = 12, micro: int = 2, backend: str = "deepspeed",
            gated: bool = False, tensor_sequence: bool = False, family: str | None = None, **extra: Any) -> Plan:
    model: dict[str, Any] = {"params": 181_000_000_000, "hidden_size": H, "layers": L, "heads": 64,
                             "vocab": V, "tied_embeddings": True, "attention": "eager"}
    if family is not None:
        model["family"] = family
    if gated:
        model["intermediate_size"] = 4 * H
    doc: dict[str, Any] = {
        "recipe": 1, "name": "bigscience", "model": model,
        "cluster": {"nodes": 48, "gpus_per_node": 8, "gpu": "a100-80gb"},
        "strategy": "megatron", "stage": 1,
        "parallel": {"tensor": tensor, "pipeline": pipeline, "tensor_sequence": tensor_sequence},
        "batch": {"micro": micro, "global": 2048, "seq_len": S},
        "precision": "bf16", "activation_checkpointing": "full", "launch": {"backend": backend},
        **extra,
    }
    return resolve(recipe_from_text(yaml.safe_dump(doc), "bigscience.yaml"))


def test_the_first_stage_keeps_the_embeddings_dropout_mask_per_micro_batch_in_flight() -> None:
    plan = plan_of()
    first, middle, last = (stage(plan, r) for r in (0, 1, 11))
    sbh = S * 2 * H
    assert embedding_mask(plan, first) == 12 * sbh  # 1 byte per element, 12 micro-batches in flight
    assert embedding_mask(plan, middle) == embedding_mask(plan, last) == 0.0


def test_bloom_s_embedding_norm_keeps_its_input_per_micro_batch_in_flight() -> None:
    """`--embed-layernorm`: 16-bit input and fp32 mean and inverse deviation per token, on the
    first stage only, for each of its 12 micro-batches in flight; no norm, nothing."""
    plan = plan_of(family="bloom")
    first, last = stage(plan, 0), stage(plan, 11)
    assert embedding_norm_input(plan, first) == 12 * (2 * S * 2 * H + 8 * S * 2)
    assert embedding_norm_input(plan, last) == embedding_norm_input(plan_of(), stage(plan_of(), 0)) == 0.0


@pytest.mark.parametrize(("case", "extra", "factor"), [
    ("gated MLP (Llama family): no dropout", {"gated": True}, 0.0),
    ("sequence parallel splits it over the tensor group", {"tensor_sequence": True}, 1 / 8),
])
def test_the_mask_follows_dropout_and_sequence_parallelism(case: str, extra: dict[str, Any], factor: float) -> None:
    plan = plan_of(**extra)
    assert embedding_mask(plan, stage(plan, 0)) == pytest.approx(factor * 12 * S * 2 * H), case


@pytest.mark.parametrize(("tensor", "held", "rebuilt"), [
    # t = 1: the whole output of each of the 12 micro-batches in flight, and the gradient buffer
    (1, 13 * 2.0, 0.0),
    # t = 8: each output's slice (PartitionedTensor), the gradient buffer's slice; in backward
    # the whole output and the whole gradient rebuilt (PartitionedTensor.full())
    (8, 13 * 2.0 / 8, 2 * 2.0),
])
def test_deepspeeds_pipeline_buffers_on_the_first_stage(tensor: int, held: float, rebuilt: float) -> None:
    plan = plan_of(tensor=tensor)
    sbh = S * 2 * H
    assert pipe_buffers(plan, stage(plan, 0)) == pytest.approx((held * sbh, rebuilt * sbh))


def test_the_last_stage_keeps_only_its_receive_buffer_and_megatron_core_none() -> None:
    plan = plan_of()
    assert pipe_buffers(plan, stage(plan, 11)) == pytest.approx((2.0 * S * 2 * H / 8, 0.0))
    core = plan_of(backend="torchrun")
    assert pipe_buffers(core, stage(core, 0)) == (0.0, 0.0)


def test_the_bf16_optimizer_copies_the_largest_gradient_to_fp32_after_each_backward() -> None:
    """bf16 with fp32 accumulation (BF16_Optimizer): `lp.grad.to(fp32)` of the embedding,
    V·h/t elements, less one micro-batch's share and the recomputed layer, which are gone."""
    plan = plan_of(tensor=4)
    first = stage(plan, 0)
    assert largest_parameter(plan, first) == V * H / 4
    assert largest_parameter(plan, stage(plan, 1)) == 4 * H * H / 4  # GPT's dense_h_to_4h
    est = estimate(plan)
    assert est.stage is not None and est.stage.rank == 0
    act = est.activations[0]
    mask = embedding_mask(plan, first)
    held, rebuilt = pipe_buffers(plan, first)
    extra = fp32_gradient_copy(plan, first, act, mask + held, rebuilt)
    one = (act.total + mask + held) / in_flight(plan, 0)
    assert extra == pytest.approx(4 * V * H / 4 - one - act.backward - rebuilt)
    assert est.memory.backward[COPY] == pytest.approx(extra)
    # with room, the copy takes a segment of its own size on top of the rest of backward's
    mem = est.memory
    assert mem.segments == fp32_copy_segment(plan, first) == 4 * V * H / 4
    assert mem.beneath == pytest.approx(sum(mem.backward.values()) - extra)
    assert mem.reserved == pytest.approx((mem.beneath + mem.stranded) * (1 + FRAGMENTATION) + mem.segments)
    assert mem.needed == mem.retained + CONTEXT < mem.shown


def test_sixteen_bit_gradients_make_no_fp32_copy() -> None:
    """`reduce_dtype: bf16` is DeepSpeed's ZeRO-1 optimizer with 16-bit gradients (no BF16_Optimizer)."""
    plan = plan_of(tensor=4, reduce_dtype="bf16")
    est = estimate(plan)
    assert fp32_gradient_copy(plan, stage(plan, 0), est.activations[0], 0.0) == fp32_copy_segment(plan, stage(plan, 0)) == 0.0
    assert "fp32 gradient copy (after backward)" not in est.memory.backward


def test_the_terms_raise_the_first_stages_need() -> None:
    """Each term is in the judged stage's backward moment, so `needed` is above the layers' alone."""
    est = estimate(plan_of(tensor=4))
    parts = est.memory.backward
    sbh = S * 2 * H
    assert parts["embedding dropout mask (saved)"] == 12 * sbh
    assert parts["pipeline buffers"] == pytest.approx(13 * 2 * sbh / 4)
    assert parts["pipeline buffers (backward)"] == 4 * sbh
    assert sum(parts.values()) == est.memory.allocated


@pytest.mark.parametrize(("pipeline", "accumulation"), [(12, 256), (3, 2), (6, 64), (48, 256)])
def test_deepspeeds_schedule_holds_what_the_terms_count_per_stage(pipeline: int, accumulation: int) -> None:
    """The installed DeepSpeed's `TrainSchedule` is the oracle for the micro-batches a stage
    holds at once (each one's mask and output buffer): the most forwards not yet backwarded,
    and the output buffers it allocates (`num_pipe_buffers`, at least 2)."""
    from deepspeed.runtime.pipe.schedule import BackwardPass, ForwardPass, TrainSchedule

    dp = 384 // (8 * pipeline)
    plan = plan_of(pipeline=pipeline, micro=2048 // (accumulation * dp), tensor=8)
    for rank in (0, 1, pipeline - 1):
        schedule = TrainSchedule(micro_batches=accumulation, stages=pipeline, stage_id=rank)
        held = most = 0
        for commands in schedule.steps():
            for command in commands:
                held += isinstance(command, ForwardPass) - isinstance(command, BackwardPass)
                most = max(most, held)
        assert (most, schedule.num_pipe_buffers()) == (in_flight(plan, rank), max(2, in_flight(plan, rank)))


TINY = {"hidden": 64, "vocab": 128, "seq": 32, "layers": 4, "micro": 2, "accumulation": 4, "embed_norm": 1}


@pytest.mark.slow
def test_deepspeeds_pipeline_engine_holds_what_the_terms_say(tmp_path: Path) -> None:
    """Measured: a tiny GPT as `GPTModelPipe` in DeepSpeed's PipelineEngine (2 stages, gloo,
    bf16 BF16_Optimizer, BLOOM's embedding norm; `tests/pipeline_probe.py`). At the first
    backward the first stage has run p forwards; each saved, outside the checkpoints, the
    embedding's dropout mask (s·b·h elements; on CPU torch keeps the scaled noise in bf16, 2
    bytes, where CUDA's fused dropout keeps a bool) and the norm's bf16 input and two
    statistics per token (bf16 on CPU, as the norm's weight; fp32 on CUDA) beside the token
    indices (8 bytes each); and the pipeline buffers are the
    whole outputs in flight and the gradient buffer (t = 1), the last stage's its receive buffer;
    `update_hp_grads` copies each stage's largest gradient to fp32."""
    first, last = probes.run("pipeline_probe", TINY, tmp_path)
    h, s, b = TINY["hidden"], TINY["seq"], TINY["micro"]
    doc = {"recipe": 1, "name": "tiny-pipe",
           "model": {"params": 300_000, "hidden_size": h, "layers": TINY["layers"], "heads": 4,
                     "vocab": TINY["vocab"], "attention": "eager", "family": "bloom"},
           "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "cpu"},
           "strategy": "megatron", "stage": 1, "parallel": {"pipeline": 2, "tensor_sequence": False},
           "batch": {"micro": b, "accumulation": TINY["accumulation"], "seq_len": s},
           "precision": "bf16", "activation_checkpointing": "full", "launch": {"backend": "deepspeed"}}
    plan = resolve(recipe_from_text(yaml.safe_dump(doc), "tiny.yaml"))
    stage0, stage1 = stage(plan, 0), stage(plan, 1)
    assert (first["in_flight"], last["in_flight"]) == (in_flight(plan, 0), in_flight(plan, 1)) == (2, 1)
    norm = embedding_norm_input(plan, stage0) / in_flight(plan, 0)
    assert norm == 2 * s * b * h + 8 * s * b  # CUDA's fp32 statistics
    norm_on_cpu = norm - 4 * s * b  # the statistics in bf16
    mask_elements = first["saved_bool"] + (first["saved_other"] - 8 * s * b - norm_on_cpu) // 2  # bool, or bf16 noise
    assert mask_elements == embedding_mask(plan, stage0) / in_flight(plan, 0) == s * b * h
    assert first["outputs"] + first["grad_layer"] + first["recv"] == pipe_buffers(plan, stage0)[0]
    assert last["recv"] == pipe_buffers(plan, stage1)[0]
    # update_hp_grads' lp.grad.to(fp32): the stage's largest parameter (here a block's fc1, 4h·h)
    assert bf16_optimizer(plan)
    assert (first["largest_copy"], last["largest_copy"]) == (4 * largest_parameter(plan, stage0),
                                                             4 * largest_parameter(plan, stage1)) == (16 * h * h,) * 2
