"""Accelerate is the judge of `accelerate_config.yaml`.

Each emitted file goes through what `accelerate launch --config_file F` does: its own
loader (which refuses unknown top-level keys), its launch-argument merge and the
environment its launcher exports to the workers; the worker-side objects
(`FullyShardedDataParallelPlugin`, `ParallelismConfig`, `DeepSpeedPlugin`) are then
built from that environment, as `Accelerator()` would, and must say what the recipe
says. Nested keys are held to the set Accelerate's source reads, because it ignores
unknown ones silently.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings

from distrecipe.engines.accelerate import FSDP1_SHARDING, distributed_type
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.judges import accelerate as accelerate_judge
from distrecipe.translator import accelerate as emitter
from distrecipe.translator.targets import EmitOptions
from tests.emit_strategies import engine_documents, plan_of

pytestmark = pytest.mark.slow  # imports accelerate and torch

launch = pytest.importorskip("accelerate.commands.launch")
config_args = pytest.importorskip("accelerate.commands.config.config_args")
launch_utils = pytest.importorskip("accelerate.utils.launch")
dataclasses_mod = pytest.importorskip("accelerate.utils.dataclasses")
parallelism = pytest.importorskip("accelerate.parallelism_config")
fsdp_api = pytest.importorskip("torch.distributed.fsdp")

PARSER = launch.launch_command_parser()
PARSER_DESTS = set(vars(PARSER.parse_args(["train.py"])))


def launched(directory: Path, plan: Plan) -> tuple[Any, dict[str, str]]:
    """The merged launch arguments and the worker environment for the files in `directory`."""
    args, env = accelerate_judge.launch_env(directory / "accelerate_config.yaml")
    return args, {**env, **emitter.launch_env(plan)}


def check_accepted(plan: Plan) -> None:
    output = emitter.render(plan, EmitOptions())
    kind = distributed_type(plan)
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        for name, text in output.files.items():
            Path(name).write_text(text, encoding="utf-8")
        loaded = config_args.load_config_from_file("accelerate_config.yaml")
        assert loaded.distributed_type == kind
        assert loaded.num_processes == plan.dims.world
        args, env = launched(Path(tmp), plan)
        assert int(args.num_processes) == plan.dims.world
        with mock.patch.dict(os.environ, env, clear=True):
            if kind == "DEEPSPEED":
                check_deepspeed(plan)
            elif kind == "FSDP":
                check_fsdp(plan, env)
            else:
                assert "ACCELERATE_USE_FSDP" not in env
                assert plan.dims.world == 1 or (plan.dims.shard_group == 1 or plan.stage == 0)
            if kind != "DEEPSPEED":
                expected = emitter.MIXED_PRECISION[plan.precision]
                assert env["ACCELERATE_MIXED_PRECISION"] == expected
                assert int(env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"]) == plan.batch.accumulation
        if plan.dims.nodes > 1 and kind != "DEEPSPEED":
            assert int(args.nproc_per_node) * int(args.nnodes) == plan.dims.world


def on_a_gpu() -> Any:
    """The plugin as a GPU worker builds it: FSDP1's `sync_module_states` is refused on CPU."""
    return mock.patch.object(dataclasses_mod, "get_torch_accelerator_backend", return_value=("cuda", None))


def check_fsdp(plan: Plan, env: dict[str, str]) -> None:
    with on_a_gpu():
        plugin = dataclasses_mod.FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == (plan.fsdp_version or 2)  # zero runs FSDP2 here (DR238)
    offloaded = plan.recipe.offload.params != "none" or plan.recipe.offload.optimizer != "none"
    if plan.fsdp_version == 1:  # the strategy names the stage and the hybrid shard groups
        # rank 0 loads and broadcasts exactly where the emitter says (Accelerate's FSDP1 reads it)
        assert plugin.sync_module_states is (plan.stage == 3)
        # Accelerate's names are torch's values in order (torch spells the fifth `_HYBRID_SHARD_ZERO2`)
        assert plugin.sharding_strategy.value == FSDP1_SHARDING.index(emitter.fsdp1_sharding(plan)) + 1
        assert ("HYBRID" in plugin.sharding_strategy.name) is plan.dims.hybrid
        assert plugin.cpu_offload.offload_params is offloaded
        assert env.get("ACCELERATE_USE_PARALLELISM_CONFIG") != "true"
        return
    assert plugin.reshard_after_forward is (plan.stage == 3)
    assert isinstance(plugin.cpu_offload, fsdp_api.CPUOffloadPolicy) is offloaded
    assert plugin.activation_checkpointing is (plan.recipe.activation_checkpointing != "none")
    if plan.recipe.model.layer_cls:
        assert plugin.transformer_cls_names_to_wrap == [plan.recipe.model.layer_cls]
    if env.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true":
        config = parallelism.ParallelismConfig()
        fake = SimpleNamespace(
            multi_device=True,
            num_processes=plan.dims.world,
            is_fsdp2=True,
            distributed_type="FSDP",
            is_main_process=False,
        )
        config._validate_accelerator(fake)
        assert (config.dp_replicate_size, config.dp_shard_size) == (plan.dims.replicas, plan.dims.shard_group)
        assert (config.tp_size, config.cp_size) == (plan.dims.tensor, plan.dims.sequence)
    else:
        # One flat FSDP mesh over every process: only right when nothing else splits it.
        assert not plan.dims.hybrid and plan.dims.tensor == plan.dims.sequence == 1


def check_deepspeed(plan: Plan) -> None:
    plugin = dataclasses_mod.DeepSpeedPlugin()
    assert plugin.zero_stage == plan.stage
    assert plugin.gradient_accumulation_steps == plan.batch.accumulation
    assert plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == plan.batch.micro


@settings(max_examples=320, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine_documents(strategies=("ddp", "zero", "fsdp", "megatron")))
def test_accelerate_accepts_what_distrecipe_emits(doc: dict[str, Any]) -> None:
    plan = plan_of(doc)
    refused = any(f.severity == "error" for f in emitter.findings(plan))
    event("refused (DR208)" if refused else distributed_type(plan))
    if refused:
        with pytest.raises(RecipeError):
            emitter.render(plan, EmitOptions())
        return
    check_accepted(plan)


def read_keys(function: Any) -> set[str]:
    """Launch arguments (`args.NAME`) that a launcher function reads, from its own source."""
    source = inspect.getsource(function)
    return {name for name in PARSER_DESTS if re.search(rf"\bargs\.{name}\b", source)}


@settings(max_examples=60, deadline=None)
@given(engine_documents(strategies=("ddp", "zero", "fsdp")))
def test_nested_keys_are_ones_accelerate_reads(doc: dict[str, Any]) -> None:
    plan = plan_of(doc)
    if any(f.severity == "error" for f in emitter.findings(plan)):
        return
    config = emitter.emit(plan)
    cluster_fields = set(config_args.ClusterConfig.__dataclass_fields__)
    assert set(config) <= cluster_fields
    multi_gpu = read_keys(launch_utils.prepare_multi_gpu_env)
    for key in config.get("fsdp_config", {}):
        assert key in PARSER_DESTS and key in multi_gpu, key
    extend = read_keys(launch_utils.prepare_extend_env_parallelism_config)
    for key in config.get("parallelism_config", {}):
        assert key in PARSER_DESTS and key in extend, key
    deepspeed = read_keys(launch_utils.prepare_deepspeed_cmd_env)
    for key in config.get("deepspeed_config", {}):
        assert key in PARSER_DESTS and key in deepspeed, key


def test_seed_recipe_is_accepted(cli: Any, tmp_path: Path) -> None:
    result = cli("compile", "recipes/seed-8b-32gpu-zero3.yaml", "--target", "accelerate",
                 "-o", tmp_path)
    assert result.code == 0, result.err
    config = yaml.safe_load((tmp_path / "accelerate_config.yaml").read_text())
    assert config["fsdp_config"]["fsdp_reshard_after_forward"] is True
    assert config["num_processes"] == 32


def test_unknown_nested_key_would_be_ignored_silently() -> None:
    """Why the key-set test exists: Accelerate drops a misspelt nested key without a word."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_text(yaml.safe_dump({
            "distributed_type": "FSDP", "num_processes": 2,
            "fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_fwd": False},
        }))
        args = PARSER.parse_args(["--config_file", str(path), "train.py"])
        args, _, _ = launch._validate_launch_command(args)
        assert args.fsdp_reshard_after_forward == "true"  # the default, not what was meant


FSDP1_DOC: dict[str, Any] = {
    "recipe": 1, "name": "fsdp1", "model": {"params": 1_300_000_000, "hidden_size": 1024, "layers": 8, "heads": 16},
    "cluster": {"nodes": 2, "gpus_per_node": 4}, "strategy": "fsdp", "fsdp_version": 1,
    "batch": {"micro": 1, "accumulation": 1, "global": 8, "seq_len": 1024}, "launch": {"master_addr": "10.0.0.1"}}


@pytest.mark.parametrize(("changes", "strategy"), [
    ({"stage": 3}, "FULL_SHARD"), ({"stage": 2}, "SHARD_GRAD_OP"),
    ({"stage": 3, "parallel": {"shard_group": 4}}, "HYBRID_SHARD"),
    ({"stage": 2, "parallel": {"shard_group": 4}}, "HYBRID_SHARD_ZERO2"),
])
def test_fsdp1_is_launched_as_its_sharding_strategy(changes: dict[str, Any], strategy: str) -> None:
    """`fsdp_version: 1` through `accelerate launch`: the plugin builds FSDP1 with the strategy
    the stage and shard groups name, and no parallelism_config (FSDP2's only)."""
    plan = plan_of({**FSDP1_DOC, **changes})
    assert emitter.emit(plan)["fsdp_config"]["fsdp_sharding_strategy"] == strategy
    assert "parallelism_config" not in emitter.emit(plan)
    check_accepted(plan)


@pytest.mark.parametrize(("changes", "words"), [
    ({"parallel": {"shard_group": 2}}, "fsdp_version 1 with parallel.shard_group 2: FSDP1's HYBRID_SHARD"),
    ({"parallel": {"tensor": 2}, "batch": {"micro": 1, "accumulation": 1, "global": 4, "seq_len": 1024}},
     "fsdp_version 1 with tensor 2 / sequence 1"),
])
def test_fsdp1_refuses_what_only_fsdp2_expresses(changes: dict[str, Any], words: str) -> None:
    plan = plan_of({**FSDP1_DOC, **changes})
    refused = [f for f in emitter.findings(plan) if f.severity == "error"]
    assert [f.code for f in refused] == ["DR208"] and words in refused[0].message
    with pytest.raises(RecipeError, match="DR208"):
        emitter.render(plan, EmitOptions())
