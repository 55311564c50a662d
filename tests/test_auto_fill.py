"""The fill tables are the engines' own: the Trainer and Accelerate run on an all-`"auto"` template.

`engines.hf.TRAINER_FILLS` must be exactly the `"auto"` values `TrainingArguments`
(`trainer_config_process`, and the `DeepSpeedPlugin` it builds) plus
`trainer_config_finalize` replace; `engines.accelerate.DEEPSPEED_FILLS` exactly those
`DeepSpeedPlugin` and `set_mixed_precision` replace, plus the keys
`Accelerator._prepare_deepspeed` passes to `deepspeed_config_process` (read from its
source: running it needs a process group).
"""

from __future__ import annotations

import copy
import inspect
import os
import tempfile
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest

from distrecipe.engines.accelerate import DEEPSPEED_FILLS
from distrecipe.engines.deepspeed import autos
from distrecipe.engines.hf import TRAINER_FILLS
from distrecipe.source import KeyPath

pytestmark = pytest.mark.slow  # imports transformers, accelerate and torch

training_args = pytest.importorskip("transformers.training_args")
accelerate_dataclasses = pytest.importorskip("accelerate.utils.dataclasses")
accelerator = pytest.importorskip("accelerate.accelerator")

CANDIDATES: tuple[KeyPath, ...] = (
    *TRAINER_FILLS, *DEEPSPEED_FILLS,
    ("bfloat16", "enabled"), ("zero_optimization", "prefetch_bucket_size"),
    ("zero_optimization", "param_persistence_threshold"), ("zero_optimization", "overlap_comm"),
    ("wall_clock_breakdown",), ("communication_data_type",),
)
"""Every key either table names, and some neither fills (so a fill nobody listed shows)."""


def template(stage: int | str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for path in CANDIDATES:
        node = config
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = "auto"
    config["optimizer"]["type"] = "AdamW"
    config["scheduler"]["type"] = "WarmupDecayLR"
    config["zero_optimization"]["stage"] = stage
    return config


def filled(before: dict[str, Any], after: dict[str, Any]) -> set[KeyPath]:
    still = set(autos(after))
    return {path for path in autos(before) if path not in still}


@pytest.mark.parametrize("stage", [2, 3])
def test_trainer_fills_exactly_its_table(stage: int) -> None:
    config = template(stage)
    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch.dict(os.environ, {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")},
                            clear=True), \
            mock.patch.object(training_args, "is_torch_bf16_gpu_available", return_value=True):
        args = training_args.TrainingArguments(output_dir=tmp, report_to="none", deepspeed=copy.deepcopy(config),
                                               bf16=True)
        ds = args.hf_deepspeed_config
        ds.trainer_config_finalize(args, SimpleNamespace(config=SimpleNamespace(hidden_size=64)), 1000)
    got = filled(config, ds.config)
    plugin_fills = {("zero_optimization", "offload_optimizer", "device"),
                    ("zero_optimization", "offload_param", "device"),
                    ("zero_optimization", "offload_optimizer", "nvme_path"),
                    ("zero_optimization", "offload_param", "nvme_path"),
                    ("zero_optimization", "stage3_gather_16bit_weights_on_model_save"), ("steps_per_print",)}
    want = set(TRAINER_FILLS) | plugin_fills
    if stage != 3:  # at ZeRO-2 the Trainer leaves these to Accelerate's prepare
        want -= {("zero_optimization", "stage3_prefetch_bucket_size"),
                 ("zero_optimization", "stage3_param_persistence_threshold")}
    assert got == want
    assert plugin_fills <= set(DEEPSPEED_FILLS)


def test_accelerate_fills_exactly_its_table() -> None:
    config = template("auto")
    with mock.patch.dict(os.environ, {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")},
                         clear=True):
        plugin = accelerate_dataclasses.DeepSpeedPlugin(hf_ds_config=copy.deepcopy(config))
        plugin.set_mixed_precision("bf16")
    got = filled(config, plugin.deepspeed_config)
    prepare = inspect.getsource(accelerator.Accelerator._prepare_deepspeed)
    named = {path for path in CANDIDATES if f'"{".".join(map(str, path))}"' in prepare}
    # gradient_accumulation_steps is filled by its own fill_match call in _prepare_deepspeed
    assert got | named == set(DEEPSPEED_FILLS)
