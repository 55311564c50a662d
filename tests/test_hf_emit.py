"""The Hugging Face Trainer is the judge of `training_args.json`.

`TrainingArguments(**kwargs)` must accept every emitted file; on the DeepSpeed path
the Trainer's own `HfTrainerDeepSpeedConfig` must find no mismatch between the
kwargs and the ds_config written beside them (concrete or `--hf-auto`), at the
process count the launcher would give it; on the FSDP path the plugin the Trainer
builds from its `fsdp_config` must equal what the Accelerate config says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings

from distrecipe.engines.accelerate import FSDP1_SHARDING
from distrecipe.engines.deepspeed import autotp_size
from distrecipe.engines.hf import uses_fsdp
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.translator import accelerate, deepspeed, hf
from distrecipe.translator.targets import EmitOptions
from tests.emit_strategies import engine_documents, plan_of

pytestmark = pytest.mark.slow  # imports transformers, accelerate and torch

training_args = pytest.importorskip("transformers.training_args")
accelerate_dataclasses = pytest.importorskip("accelerate.utils.dataclasses")


@contextlib.contextmanager
def trainer_world(plan: Plan) -> Iterator[None]:
    """What a launched Trainer sees: `world` processes, a bf16-capable GPU."""
    with mock.patch.object(training_args.TrainingArguments, "world_size",
                           new_callable=mock.PropertyMock, return_value=plan.dims.world), \
            mock.patch.object(training_args, "is_torch_bf16_gpu_available", return_value=True):
        yield


def build(plan: Plan, hf_auto: bool) -> Any:
    output = hf.render(plan, EmitOptions(hf_auto=hf_auto))
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        for name, text in output.files.items():
            Path(name).write_text(text, encoding="utf-8")
        kwargs = json.loads(output.files["training_args.json"])
        with trainer_world(plan):
            args = training_args.TrainingArguments(output_dir=tmp, report_to="none", **kwargs)
            if "deepspeed" in kwargs:
                model = SimpleNamespace(config=SimpleNamespace(hidden_size=plan.recipe.model.hidden_size))
                # Raises "Please correct the following DeepSpeed config values that mismatch".
                args.hf_deepspeed_config.trainer_config_finalize(args, model, 1000)
    return args


@settings(max_examples=360, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine_documents(strategies=("ddp", "zero", "fsdp", "megatron")))
def test_trainer_accepts_what_distrecipe_emits(doc: dict[str, Any]) -> None:
    plan = plan_of(doc)
    refused = any(f.severity == "error" for f in hf.findings(plan))
    event("refused" if refused else plan.recipe.strategy)
    if refused:
        with pytest.raises(RecipeError):
            hf.render(plan, EmitOptions())
        return
    for hf_auto in (False, True):
        args = build(plan, hf_auto)
        assert args.per_device_train_batch_size == plan.batch.micro
        assert args.gradient_accumulation_steps == plan.batch.accumulation
        fields = dataclasses.fields(type(args))  # unstated: the Trainer's own default stands
        default = next(f.default for f in fields if f.name == "max_grad_norm")
        assert args.max_grad_norm == (default if plan.recipe.grad_clip is None else plan.recipe.grad_clip)
        assert (args.bf16, args.fp16) == (plan.precision == "bf16", plan.precision == "fp16")
        if plan.recipe.strategy == "zero":
            config = args.hf_deepspeed_config.config
            assert config["train_batch_size"] == plan.batch.global_ * (autotp_size(plan) or 1)
            assert config["gradient_accumulation_steps"] == plan.batch.accumulation
    if uses_fsdp(plan):
        check_fsdp_matches_accelerate(plan, args)
    else:
        assert not args.fsdp_plugin_args


def check_fsdp_matches_accelerate(plan: Plan, args: Any) -> None:
    # as a GPU worker builds it: FSDP1's sync_module_states is refused on CPU
    with mock.patch.object(accelerate_dataclasses, "get_torch_accelerator_backend", return_value=("cuda", None)):
        plugin = accelerate_dataclasses.FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    fsdp = accelerate.emit(plan)["fsdp_config"]
    assert plugin.fsdp_version == fsdp["fsdp_version"] == plan.fsdp_version
    if plan.fsdp_version == 1:  # the Trainer's reshard_after_forward names FSDP1's strategy
        assert plugin.reshard_after_forward.value == FSDP1_SHARDING.index(fsdp["fsdp_sharding_strategy"]) + 1
        assert plugin.sync_module_states is fsdp["fsdp_sync_module_states"]
        assert plugin.cpu_offload.offload_params is fsdp["fsdp_offload_params"]
    else:
        assert plugin.reshard_after_forward is fsdp["fsdp_reshard_after_forward"]
        assert (type(plugin.cpu_offload).__name__ == "CPUOffloadPolicy") is fsdp["fsdp_offload_params"]
    assert plugin.activation_checkpointing is fsdp["fsdp_activation_checkpointing"]
    assert plugin.cpu_ram_efficient_loading is fsdp["fsdp_cpu_ram_efficient_loading"]
    if "fsdp_state_dict_type" in fsdp:
        assert plugin.state_dict_type.name == fsdp["fsdp_state_dict_type"]
    else:  # unstated: distrecipe writes none, and the Trainer's own default stands
        assert "state_dict_type" not in hf.emit(plan).get("fsdp_config", {})
    if plan.recipe.model.layer_cls:
        assert plugin.transformer_cls_names_to_wrap == [fsdp["fsdp_transformer_layer_cls_to_wrap"]]


def test_ulysses_with_the_trainer_is_refused_before_the_trainer_does() -> None:
    """The Trainer counts train_batch_size over all processes; DeepSpeed over DP."""
    doc = {
        "recipe": 1, "name": "sp", "cluster": {"nodes": 1, "gpus_per_node": 8},
        "strategy": "zero", "stage": 2, "parallel": {"sequence": 2},
        "batch": {"micro": 1, "accumulation": 2, "global": 8}, "precision": "bf16",
        "model": {"hidden_size": 1024},
    }
    plan = plan_of(doc)
    assert "DR208" in {f.code for f in hf.findings(plan)}
    with pytest.raises(RecipeError):
        hf.render(plan, EmitOptions())
    # The Trainer itself, given the same files, would refuse at train start:
    files = {"ds_config.json": json.dumps(deepspeed.emit(plan)),
             "training_args.json": json.dumps(hf.emit(plan))}
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        for name, text in files.items():
            Path(name).write_text(text)
        with trainer_world(plan), pytest.raises(ValueError, match="mismatch"):
            args = training_args.TrainingArguments(output_dir=tmp, report_to="none",
                                                   **json.loads(files["training_args.json"]))
            model = SimpleNamespace(config=SimpleNamespace(hidden_size=1024))
            args.hf_deepspeed_config.trainer_config_finalize(args, model, 1000)


@pytest.mark.parametrize(("stage", "shard_group"), [(3, None), (2, None), (3, 4), (2, 4)])
def test_the_trainer_builds_fsdp1_as_accelerate_does(stage: int, shard_group: int | None) -> None:
    """`fsdp_version: 1`: the Trainer's `fsdp_config` (version 1, the strategy as its
    `reshard_after_forward`) builds the plugin Accelerate's file builds."""
    doc: dict[str, Any] = {
        "recipe": 1, "name": "fsdp1", "model": {"params": 1_300_000_000, "hidden_size": 1024, "layers": 8,
                                                 "heads": 16},
        "cluster": {"nodes": 2, "gpus_per_node": 4}, "strategy": "fsdp", "stage": stage, "fsdp_version": 1,
        "batch": {"micro": 1, "accumulation": 1, "global": 8, "seq_len": 1024}}
    if shard_group:
        doc["parallel"] = {"shard_group": shard_group}
    plan = plan_of(doc)
    assert hf.emit(plan)["fsdp_config"]["version"] == 1
    check_fsdp_matches_accelerate(plan, build(plan, hf_auto=False))
