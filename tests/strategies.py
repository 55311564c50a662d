"""Hypothesis strategies for valid recipes, shared by every property test.

A valid recipe is built from its resolved numbers outward (DP first, then a batch
triple that multiplies exactly), and then up to two batch numbers are hidden behind
`auto`, so every generated document must resolve and every engine must accept it.
A test that needs only part of that space says which with `Only`, and the choices
outside it are never drawn (nothing is generated to be thrown away).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import strategies as st

STAGES = {"ddp": [0], "zero": [1, 2, 3], "fsdp": [2, 3], "megatron": [0, 1]}
ALL = frozenset(STAGES)
NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Only:
    """Under which strategies `recipe_documents` may draw each choice; by default all."""

    sharded_single_rank: frozenset[str] = ALL
    """A sharding stage (> 0) over one data-parallel rank."""
    shard_group: frozenset[str] = ALL
    """Hybrid sharding (`parallel.shard_group` < DP)."""
    optimizer_offload_alone: frozenset[str] = ALL
    """Optimizer state offloaded while the parameters stay on the GPU."""
    adam: frozenset[str] = ALL
    """`optimizer.name: adam` (coupled L2 decay) beside `adamw`."""
    fp32: frozenset[str] = ALL
    """`precision: fp32` beside bf16 and fp16."""


@st.composite
def recipe_documents(
    draw: st.DrawFn,
    strategies: tuple[str, ...] = ("ddp", "zero", "fsdp"),
    only: Only = Only(),
    rl: bool = False,
) -> dict[str, Any]:
    """A valid recipe as plain data (dump it with `to_yaml`); with `rl`, an `rl` section
    whose rollout_n divides the global batch, so verl's batch rules hold, and on one GPU a
    rollout tensor parallelism of 1 in `native.verl` (verl's default 2 does not start, DR221)."""
    strategy = draw(st.sampled_from(strategies))
    stage = draw(st.sampled_from(STAGES[strategy]))
    min_dp = 1 if stage == 0 or strategy in only.sharded_single_rank else 2
    nodes = draw(st.sampled_from([1, 1, 2, 4]))
    gpus = draw(st.sampled_from([g for g in (1, 2, 4, 8) if nodes * g >= min_dp]))
    world = nodes * gpus
    tensor = 1
    if strategy == "megatron":
        tensor = draw(st.sampled_from([t for t in (1, 2) if world % t == 0 and world // t >= min_dp]))
    dp = world // tensor
    micro = draw(st.integers(1, 8))
    acc = draw(st.integers(1, 8))
    glob = micro * acc * dp
    batch: dict[str, Any] = {"micro": micro, "accumulation": acc, "global": glob}
    hide = draw(st.sampled_from([(), ("micro",), ("accumulation",), ("global",),
                                 ("micro", "accumulation"), ("accumulation", "global")]))
    if "accumulation" in hide and len(hide) == 2:
        # two autos mean accumulation 1 (global's auto; micro's under batch.micro_policy
        # accumulation-1): only documents that really have 1 can hide it
        hide = hide if acc == 1 else (hide[1],)
    for key in hide:
        batch[key] = "auto"
    if hide == ("micro", "accumulation"):
        batch["micro_policy"] = "accumulation-1"
    batch["seq_len"] = draw(st.sampled_from([512, 2048, 4096]))
    hidden = draw(st.sampled_from([None, 256, 1024, 4096]))
    model: dict[str, Any] = {"params": draw(st.sampled_from([125_000_000, 1_300_000_000, 8_000_000_000]))}
    if hidden is not None:
        model.update(hidden_size=hidden, layers=draw(st.integers(2, 48)), heads=hidden // 64)
    precision = draw(st.sampled_from(["bf16", "fp16", "fp32"] if strategy in only.fp32 else ["bf16", "fp16"]))
    offload: dict[str, Any] = {}
    alone = strategy in only.optimizer_offload_alone
    if stage >= 1 and strategy in ("zero", "fsdp") and (alone or stage == 3) and draw(st.booleans()):
        offload["optimizer"] = "cpu"
        if stage == 3 and (not alone or draw(st.booleans())):
            offload["params"] = "cpu"
    doc: dict[str, Any] = {
        "recipe": 1,
        "name": "generated",
        "model": model,
        "cluster": {"nodes": nodes, "gpus_per_node": gpus, "gpu_memory": "80GB"},
        "strategy": strategy,
        "stage": stage,
        "batch": batch,
        "precision": precision,
        "optimizer": {
            "name": draw(st.sampled_from(["adamw", "adam"] if strategy in only.adam else ["adamw"])),
            "lr": draw(st.sampled_from([1e-5, 3e-4, 1e-3])),
            "weight_decay": draw(st.sampled_from([0.0, 0.1])),
        },
        "grad_clip": draw(st.sampled_from([0, 1.0, 0.5])),
    }
    if offload:
        doc["offload"] = offload
    if tensor > 1:
        doc["parallel"] = {"tensor": tensor}
    if stage >= 2 and dp >= 4 and strategy in only.shard_group and draw(st.booleans()):
        doc.setdefault("parallel", {})["shard_group"] = dp // 2
    if rl:
        n = draw(st.sampled_from([d for d in (1, 2, 4, 8) if glob % d == 0]))
        doc["rl"] = {"rollout_n": n, "prompts_per_step": glob // n * draw(st.integers(1, 3))}
        if world % 2:
            doc["native"] = {"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]}
    return doc


def to_yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False)
