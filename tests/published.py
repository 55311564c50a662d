"""Published GPU measurements (`tests/corpus/gpu/published.csv`) as distrecipe Plans.

Each row states a model's shape, the parallelism, micro-batch, sequence length,
checkpointing mode and precision of a real run, and what it measured: peak memory
(`memory_GiB`, mostly torch's `max_memory_reserved`) and throughput. `plan_for_row`
writes the recipe a user would write for that run; `tests/test_plan_gpu.py` compares
the plan's prediction with each measurement.

Which rows each test judges, and which it reports apart with the reason, is decided in
`tests/test_plan_gpu.py` (memory) and `tests/test_plan_steptime.py` (throughput). A row's
`cp` is the recipe's `parallel.sequence`, `pp` its `parallel.pipeline`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distrecipe.engines.gpus import GPUS as GPU_TABLE
from distrecipe.job import Plan
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve

CSV = Path(__file__).resolve().parent / "corpus" / "gpu" / "published.csv"

GPU_GIB = {"H100 SXM HBM2e 96GB": 95.0, "H100 SXM HBM2e 95GB": 95.0, "H200": 140.0,
           "H100 80GB": 79.1, "A100 80GB": 79.1, "A100-SXM4-80G": 79.1, "A100 40GB": 39.4, "DGX-H100": 79.1}
"""What torch reports as total memory for each card the rows name (GiB)."""

GPU_MODEL = {"H100 SXM": "h100", "H100 80GB": "h100", "DGX-H100": "h100", "H200": "h200",
             "A100 80GB": "a100-80gb", "A100-SXM4-80G": "a100-80gb", "A100 40GB": "a100-40gb", "A100 (": "a100-80gb",
             "DGX-B200": "b200"}
"""Each row's card as a `cluster.gpu` (an A100 of unstated memory has the same peak)."""

CHECKPOINTING: dict[str, Any] = {"none": "none", "full": "full", "selective_op": "selective",
                                 "selective_layer": {"mode": "selective", "every": 2}}
"""torchtitan's `selective_ac_option` for layer SAC in its A100 table is 2."""


@dataclass(frozen=True)
class Row:
    data: dict[str, str]

    @property
    def name(self) -> str:
        d = self.data
        return (f"{d['source_id']} {d['model']} {d['gpus']} GPUs tp{d['tp'] or 1} "
                f"pp{d['pp'] or 1} cp{d['cp'] or 1} "
                f"micro {d['micro']} s{d['seq_len']} {d['checkpointing']}"
                f"{' compile' if d['compile'] == 'yes' else ''}")

    @property
    def float8(self) -> bool:
        return "float8" in self.data["precision"].lower() or "fp8" in self.data["precision"].lower()

    @property
    def gpu_gib(self) -> float | None:
        if self.data["gpu_memory_GiB"]:
            return float(self.data["gpu_memory_GiB"])
        return next((v for k, v in GPU_GIB.items() if self.data["gpu"].startswith(k)), None)


    @property
    def gpu_model(self) -> str | None:
        return next((v for k, v in GPU_MODEL.items() if self.data["gpu"].startswith(k)), None)

    @property
    def throughput(self) -> float | None:
        value = self.data["tokens_per_s_per_gpu"]
        return float(value) if value else None


def rows(path: Path = CSV) -> list[Row]:
    """The corpus's rows, or another file's in its columns (`benchmarks/gpu_memory.py`'s)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [Row(d) for d in csv.DictReader(handle)]


def plan_for_row(row: Row) -> Plan:
    """The recipe a user would write for the published run, resolved."""
    d = row.data
    gpus, tp, cp, pp = int(d["gpus"]), int(d["tp"] or 1), int(d["cp"] or 1), int(d["pp"] or 1)
    per_node = min(gpus, 4 if "4 per node" in d["gpu"] else 8)
    h, heads = int(d["hidden"]), int(d["heads"])
    model: dict[str, Any] = {
        "hidden_size": h, "layers": int(d["layers"]), "heads": heads,
        "kv_heads": int(d["kv_heads"] or heads), "intermediate_size": int(d["ffn"]),
        "vocab": int(d["vocab"]),
    }
    if d["params"]:
        model["params"] = int(float(d["params"]))
    strategy = {"fsdp2": "fsdp", "fsdp": "fsdp", "ddp": "ddp", "zero": "zero"}[d["strategy"]]
    stage = int(d["zero_stage"]) if d["zero_stage"] else {"fsdp": 3, "ddp": 0, "zero": 2}[strategy]
    micro = int(d["micro"])
    dp = gpus // (tp * pp * cp)
    # The row's global batch where stated: accumulation = global / (micro × DP), so the
    # plan's step (traffic per step, ZeRO's held gradients, tokens per step) is the run's.
    global_batch = int(d["global_batch"]) if d["global_batch"] else micro * dp
    backend = {"fsdp": "torchrun", "ddp": "accelerate", "zero": "deepspeed"}[strategy]
    doc: dict[str, Any] = {
        "recipe": 1, "name": "published", "model": model,
        "cluster": {"nodes": gpus // per_node, "gpus_per_node": per_node},
        "strategy": strategy, "stage": stage,
        "parallel": {"tensor": tp, "pipeline": pp, "sequence": cp},
        "batch": {"micro": micro, "accumulation": global_batch // (micro * dp), "global": global_batch,
                  "seq_len": int(d["seq_len"])},
        "precision": "bf16", "activation_checkpointing": CHECKPOINTING[d["checkpointing"]],
        "launch": {"backend": backend},
    }
    if "Sharding Strategy=HSDP" in d["notes"]:  # HSDP: shard within the node, replicate across
        doc["parallel"]["shard_group"] = per_node
    if row.gpu_gib is not None:
        doc["cluster"]["gpu_memory"] = f"{row.gpu_gib}GiB"
    if row.gpu_model is not None and (row.gpu_gib is None or GPU_TABLE[row.gpu_model].agrees(  # type: ignore[index]
            round(row.gpu_gib * 2**30))):
        doc["cluster"]["gpu"] = row.gpu_model  # a card of another size (a slice) states its memory alone
    return resolve(recipe_from_text(yaml.safe_dump(doc, sort_keys=False), row.name))
