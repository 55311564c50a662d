"""Hostile configs never crash lint, import or diff: findings or one clean error line.

Documents are built from the keys each engine uses with values of any type (a list
where a block belongs, a string where a number does), plus arbitrary text, and run
through the real reader, every rule and the importers. An exception other than
`DistrecipeError` is a bug.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrecipe.errors import DistrecipeError
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native

KEYS = [
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization",
    "stage", "offload_param", "offload_optimizer", "device", "fp16", "bf16", "enabled", "optimizer", "params",
    "sequence_parallel_size", "zero_hpz_partition_size", "reduce_bucket_size", "distributed_type", "num_processes",
    "num_machines", "fsdp_config", "fsdp_version", "fsdp_sharding_strategy", "fsdp_reshard_after_forward",
    "parallelism_config", "deepspeed_config", "deepspeed_config_file", "mixed_precision", "actor_rollout_ref",
    "actor", "rollout", "n", "ppo_mini_batch_size", "ppo_micro_batch_size_per_gpu", "ppo_micro_batch_size",
    "data", "trainer", "n_gpus_per_node", "nnodes", "megatron", "strategy", "per_device_train_batch_size",
    "deepspeed", "output_dir", "fsdp", "recipe", "batch", "micro", "global", "cluster", "gpus_per_node",
    "//distrecipe-ignore", "auto",
]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False, width=32),
                    st.sampled_from(["auto", "cpu", "none", "2", "HYBRID_SHARD", "DEEPSPEED", "FSDP", "fsdp2",
                                     "megatron", "ds.json", "DR311", ""]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5), max_leaves=20)
DOCUMENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=8)


def run_everything(directory: Path, name: str) -> None:
    report = lint([directory / name], config=LintConfig(), world=8)
    for finding in report.findings:
        assert finding.where is not None and finding.where.line >= 1
    try:
        kind, doc = read_native(directory / name)
        if kind != "recipe":
            import_document(kind, doc, World(1, 8))
    except DistrecipeError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCUMENTS, suffix=st.sampled_from([".json", ".yaml"]))
def test_typed_chaos_never_crashes(doc: dict[str, Any], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc)
        (Path(tmp) / f"config{suffix}").write_text(text)
        (Path(tmp) / "ds.json").write_text(json.dumps(doc.get("deepspeed_config", doc)))
        run_everything(Path(tmp), f"config{suffix}")


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300), suffix=st.sampled_from([".json", ".yaml", ".txt", ".sh"]))
def test_any_text_never_crashes(text: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"f{suffix}").write_text(text, encoding="utf-8", errors="surrogatepass")
        run_everything(Path(tmp), f"f{suffix}")
