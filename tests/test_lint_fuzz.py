"""Hostile configs never crash lint, import or diff: findings or one clean error line.

Documents are built from the keys each engine uses with values of any type (a list
where a block belongs, a string where a number does), plus arbitrary text, and run
through the real reader, every rule and the importers. An exception other than
`DistrecipeError` is a bug.

The typed documents are drawn directly, never retried: a mapping of 1-8 keys whose
values nest lists (up to 3 items) and mappings (up to 5 keys) at most `DEPTH` deep.
That is one container deeper than the deepest key a reader looks up (verl's
`actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype`) and as deep as
the leaf-bounded `st.recursive` this replaces ever went; that bound threw away and
redrew every value over 20 leaves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
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
FLOAT32_MAX = 3.4028234663852886e38
"""Bounding 32-bit floats keeps Hypothesis from drawing wider ones and rejecting them."""
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 300),
                    st.floats(-FLOAT32_MAX, FLOAT32_MAX, width=32), st.sampled_from([float("inf"), float("-inf")]),
                    st.sampled_from(["auto", "cpu", "none", "2", "HYBRID_SHARD", "DEEPSPEED", "FSDP", "fsdp2",
                                     "megatron", "ds.json", "DR311", ""]))
DEPTH = 5
"""Containers nested inside a document's top-level values."""


def values(depth: int) -> st.SearchStrategy[Any]:
    """A scalar, or a list or mapping of values at most `depth` containers deep."""
    if depth == 0:
        return SCALARS
    inner = values(depth - 1)
    return st.one_of(SCALARS, st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5))


DOCUMENTS = st.dictionaries(st.sampled_from(KEYS), values(DEPTH), min_size=1, max_size=8)


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


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for every example: each writes the same names, so nothing stale is read."""
    return tmp_path_factory.mktemp("chaos")


def write_new(path: Path, text: str) -> None:
    """Replace `path` by a new file: ext4 writes a file truncated and rewritten in place
    back to disk on close (`auto_da_alloc`), about ten times slower than a new one."""
    path.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")


@settings(max_examples=300, deadline=None)
@given(doc=DOCUMENTS, suffix=st.sampled_from([".json", ".yaml"]))
def test_typed_chaos_never_crashes(workdir: Path, doc: dict[str, Any], suffix: str) -> None:
    directory = workdir / f"typed{suffix}"
    directory.mkdir(exist_ok=True)
    text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc)
    write_new(directory / f"config{suffix}", text)
    write_new(directory / "ds.json", json.dumps(doc.get("deepspeed_config", doc)))
    run_everything(directory, f"config{suffix}")


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300), suffix=st.sampled_from([".json", ".yaml", ".txt", ".sh"]))
def test_any_text_never_crashes(workdir: Path, text: str, suffix: str) -> None:
    directory = workdir / f"text{suffix}"
    directory.mkdir(exist_ok=True)
    write_new(directory / f"f{suffix}", text)
    run_everything(directory, f"f{suffix}")
