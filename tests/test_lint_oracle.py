"""The engines are the judges of lint: its key sets and batch verdicts come from them.

* The key sets lint reads are the engine tables (`tests/test_engine_tables.py` and
  `tests/test_lint_tables_oracle.py` judge them).
* For random batch triples at random world sizes, `DeepSpeedConfig` refuses exactly
  the configs lint gives a batch error (DR101-DR104), and accepts the others.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distrecipe.judges import accelerate as accelerate_judge
from distrecipe.judges import deepspeed as deepspeed_judge
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = pytest.mark.slow  # imports deepspeed and accelerate (torch)

ds_config = pytest.importorskip("deepspeed.runtime.config")
pytest.importorskip("accelerate")

def lint_codes(config: dict[str, Any], world: int) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds_config.json"
        path.write_text(json.dumps(config))
        return {f.code for f in lint([path], config=LintConfig(), world=world).findings}


BATCH_CODES = {"DR101", "DR102", "DR103", "DR104"}


@settings(max_examples=150, deadline=None)
@given(world=st.sampled_from([1, 2, 3, 4, 8, 16]), total=st.none() | st.integers(1, 64),
       micro=st.none() | st.integers(1, 16), accumulation=st.none() | st.integers(1, 8))
def test_batch_verdicts_agree_with_deepspeed(world: int, total: int | None, micro: int | None,
                                            accumulation: int | None) -> None:
    config: dict[str, Any] = {"zero_optimization": {"stage": 1}}
    for key, value in (("train_batch_size", total), ("train_micro_batch_size_per_gpu", micro),
                       ("gradient_accumulation_steps", accumulation)):
        if value is not None:
            config[key] = value
    codes = lint_codes(config, world)
    assert deepspeed_judge.accepts(config, world) == (not codes & BATCH_CODES), (config, world, codes)


@settings(max_examples=120, deadline=None)
@given(stage=st.integers(0, 4), grad_norm=st.sampled_from([None, True, False]),
       ratio=st.sampled_from([None, 0.5, 1.0]), op=st.sampled_from([None, "sum", "SUM", "mean"]))
def test_stage_settings_agree_with_deepspeed(stage: int, grad_norm: bool | None, ratio: float | None,
                                             op: str | None) -> None:
    zero: dict[str, Any] = {"stage": stage}
    if grad_norm is not None:
        zero["compute_grad_norm"] = grad_norm
    if ratio is not None:
        zero["offload_optimizer"] = {"device": "cpu", "ratio": ratio}
    config: dict[str, Any] = {"train_batch_size": 8, "zero_optimization": zero}
    if op is not None:
        config["gradient_allreduce_op"] = op
    codes = lint_codes(config, 8)
    assert deepspeed_judge.accepts(config, 8) == ("DR322" not in codes), (config, codes)


parallelism = pytest.importorskip("accelerate.parallelism_config")
accelerate_state = pytest.importorskip("accelerate.utils.dataclasses")


@settings(max_examples=200, deadline=None)
@given(sizes=st.fixed_dictionaries({name: st.sampled_from([None, 0, 1, 2, 4])
                                    for name in ("dp_replicate", "dp_shard", "tp", "cp", "sp")}),
       processes=st.sampled_from([1, 2, 4, 8, 16]), fsdp=st.booleans())
def test_parallelism_verdicts_agree_with_accelerate(sizes: dict[str, int | None], processes: int,
                                                     fsdp: bool) -> None:
    given_sizes = {name: size for name, size in sizes.items() if size is not None}
    kind = accelerate_state.DistributedType.FSDP if fsdp else accelerate_state.DistributedType.MULTI_GPU
    accelerator = mock.Mock(multi_device=processes > 1, num_processes=processes, is_fsdp2=fsdp, distributed_type=kind,
                            is_main_process=False)
    try:
        mesh = parallelism.ParallelismConfig(**{f"{name}_size": size for name, size in given_sizes.items()})
        mesh._validate_accelerator(accelerator)
        accepted = True
    except ValueError:
        accepted = False
    config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP" if fsdp else "MULTI_GPU",
              "num_machines": 1, "num_processes": processes,
              "parallelism_config": {f"parallelism_config_{name}_size": size for name, size in given_sizes.items()}}
    if not given_sizes:
        config["parallelism_config"] = {"parallelism_config_cp_backend": "torch"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accelerate_config.yaml"
        path.write_text(json.dumps(config))
        codes = {f.code for f in lint([path], config=LintConfig()).findings}
    assert accepted == ("DR346" not in codes), (given_sizes, processes, fsdp, codes)


@settings(max_examples=100, deadline=None)
@given(extra=st.lists(st.sampled_from(["fsdp_version", "num_process", "gradient_accumulation_steps", "mixed_precison",
                                       "zero_stage", "dynamo_backend", "use_cpu", "gpu_ids", "fp16",
                                       "enable_cpu_affinity"]),
                      max_size=3, unique=True))
@example(extra=["no distributed_type"])
def test_top_level_verdicts_agree_with_accelerate(extra: list[str]) -> None:
    config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_processes": 2,
              **{key: 1 for key in extra}}
    if config.pop("no distributed_type", None):
        del config["distributed_type"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accelerate_config.yaml"
        path.write_text(json.dumps(config))
        refusal = accelerate_judge.loader_refusal(path)
        assert refusal is None or "unknown keys" in str(refusal) or "distributed_type" in str(refusal)
        accepted = refusal is None
        codes = {f.code for f in lint([path], config=LintConfig()).findings}
    assert accepted == ("DR341" not in codes), (extra, codes)
