"""The decision tree's branches, each reached by changing one thing in the seed's recipe."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.advice import advise
from distrecipe.plan.engine import plan_engine_view
from distrecipe.plan.report import deepspeed_zero, estimate
from distrecipe.plan.units import GB
from tests.conftest import RECIPES

ZERO2 = RECIPES / "seed-8b-32gpu-zero2.yaml"
ZERO3 = RECIPES / "seed-8b-32gpu-zero3.yaml"


def test_small_model_on_one_gpu_keeps_ddp_and_skips_empty_trade_offs() -> None:
    plan = load_plan(ZERO2, ("strategy=ddp", "stage=0", "cluster.nodes=1",
                             "cluster.gpus_per_node=1", "model.params=5e8", "batch.seq_len=1024"))
    lines = advise(plan)
    assert lines[0].startswith("fits: DDP needs")
    assert not any("saves" in line for line in lines)  # one rank: sharding saves nothing


def test_activations_too_big_means_micro_then_recompute_not_a_stage() -> None:
    """Micro 1 alone does not fit (72 GB of activations); op-level selective at micro 1 does,
    so nothing is said about stages, which is what made the old advice contradict itself."""
    (line,) = advise(load_plan(ZERO2, ("activation_checkpointing=none",)))
    assert line.startswith("does not fit: ZeRO-2 needs 182.27 GB of 80 GB; it fits with batch.micro 1 "
                           "(batch.accumulation 8), activation_checkpointing: selective (ZeRO-2 then needs")
    assert "stage" not in line.split("; it fits with")[1]


def test_two_gpus_need_offload_and_say_host_memory_per_node() -> None:
    plan = load_plan(ZERO2, ("cluster.nodes=1", "cluster.gpus_per_node=2"))
    (line,) = advise(plan)
    assert "it fits with strategy zero, stage 3, offload.optimizer: cpu" in line
    # (4 + 8 + 4 + 2)Ψ/2 × 2 ranks
    assert line.endswith("and 144 GB of host memory per node (cluster.cpu_memory not set: not checked))")


def test_offload_is_not_advised_beyond_the_host_memory() -> None:
    plan = load_plan(ZERO2, ("cluster.nodes=1", "cluster.gpus_per_node=2", "cluster.cpu_memory=100GB"))
    (line,) = advise(plan)
    assert "it fits with" not in line and "split layers with tensor parallelism" in line
    assert line.startswith("nothing fits: host memory binds: strategy zero, stage 3, batch.micro 1 "
                           "(batch.accumulation 128), offload.optimizer: cpu fits the GPU (37.52 GB) but "
                           "ZeRO-3 + offload needs host 144 GB per node of 100 GB: more than the node has; "
                           "without offload, micro 1, full recompute and the most sharding need ")


def test_nothing_fits_means_tensor_parallel() -> None:
    (line,) = advise(load_plan(ZERO2, ("cluster.gpu_memory=8GB",)))
    assert "one layer alone holds 0.39 GB of weights" in line  # the seed's 0.19B-parameter layer
    assert line.startswith("nothing fits: GPU memory binds: micro 1, full recompute, the most sharding and "
                           "offload need ")
    assert line.endswith("split layers with tensor parallelism (parallel.tensor)")


def test_shard_group_is_hsdp_for_fsdp_and_hpz_for_deepspeed() -> None:
    fsdp = load_plan(ZERO3, ("strategy=fsdp", "parallel.shard_group=8", "launch.backend=accelerate"))
    assert plan_engine_view(fsdp).total("rest") == 12 * 8e9 / 8  # sharded over the group of 8
    ds = load_plan(ZERO3, ("parallel.shard_group=8",))
    view = plan_engine_view(ds, deepspeed_zero(ds))
    # Over all 32 ranks, plus ZeRO++'s secondary 16-bit copy within the group of 8.
    assert view.points["rest"]["parameters"] == pytest.approx(2 * 8e9 / 32 + 2 * 8e9 / 8, rel=1e-3)
    assert estimate(ds).engine.total("rest") < estimate(fsdp).engine.total("rest")


def test_offload_engine_view_puts_the_optimizer_on_the_host() -> None:
    est = estimate(load_plan(RECIPES / "seed-8b-32gpu-zero2-offload.yaml"))
    assert est.engine.engine == "DeepSpeed ZeRO-2 + optimizer offload"
    assert est.engine.cpu == {"master weights": 1 * GB, "optimizer": 2 * GB, "fp32 gradients": 1 * GB,
                              "16-bit parameters": 0.5 * GB, "accumulated gradients": 0.5 * GB}
    assert est.engine.total("rest") == 16 * GB  # 2Ψ, DeepSpeed's own offload estimate


def test_auto_micro_takes_the_largest_that_fits_and_says_so() -> None:
    """The issue's case: with micro and accumulation auto, the algebra alone picked micro 8."""
    plan = load_plan(ZERO2, ("batch.micro=auto",))
    assert (plan.batch.micro, plan.batch.accumulation) == (2, 4)
    assert plan.provenance["batch.micro"].startswith(
        "largest that fits 80 GB at the top of its error band: needs 67.91 GB (−6.8 % … +7.8 %: 63.27 GB–73.18 GB, "
        "deepspeed × eager-hf)")
    assert "micro 4 would need" in plan.provenance["batch.micro"]
    assert estimate(plan).fits
    tight = load_plan(ZERO2, ("batch.micro=auto", "activation_checkpointing=none"))
    assert (tight.batch.micro, tight.batch.accumulation) == (1, 8)
    assert tight.provenance["batch.micro"].startswith("none fits 80 GB")
