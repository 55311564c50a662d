"""`HfArgumentParser` is the judge of the argv `launch` gives a Trainer script.

For generated recipes, the exact words `launch.handoff` appends are parsed by
`HfArgumentParser(TrainingArguments)` itself; every number must come back as the
Plan's, and on the DeepSpeed path the Trainer's `HfTrainerDeepSpeedConfig`, filling
the ds_config written beside them from those arguments, must find no mismatch and
give back the Plan's batch.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from distrecipe.engines.argv import read_flags
from distrecipe.engines.deepspeed import CONFIG_FILE, batch_ranks
from distrecipe.engines.hf import OPTIM, uses_fsdp
from distrecipe.engines.hf_argv import same_value
from distrecipe.job import Plan
from distrecipe.launch.handoff import handoff
from distrecipe.translator import deepspeed, hf
from distrecipe.translator.accelerate import fsdp1_sharding
from tests.emit_strategies import engine_documents, plan_of

pytestmark = pytest.mark.slow  # imports transformers and torch

training_args = pytest.importorskip("transformers.training_args")
hf_argparser = pytest.importorskip("transformers.hf_argparser")


def parse(plan: Plan, run_dir: Path, user: tuple[str, ...] = ()) -> Any:
    """The TrainingArguments a Trainer script builds from launch's argv, at the plan's world."""
    configs = {CONFIG_FILE: json.dumps(deepspeed.emit(plan))} if plan.recipe.strategy == "zero" else {}
    for name, text in configs.items():
        (run_dir / name).write_text(text, encoding="utf-8")
    argv = handoff("hf", plan, user_args=("--output_dir", str(run_dir), "--report_to", "none", *user),
                   run_dir=run_dir, configs=configs).args
    with mock.patch.object(training_args.TrainingArguments, "world_size", new_callable=mock.PropertyMock,
                           return_value=plan.dims.world), \
            mock.patch.object(training_args, "is_torch_bf16_gpu_available", return_value=True):
        (args,) = hf_argparser.HfArgumentParser(training_args.TrainingArguments).parse_args_into_dataclasses(
            args=list(argv))
        if plan.recipe.strategy == "zero":
            model = SimpleNamespace(config=SimpleNamespace(hidden_size=plan.recipe.model.hidden_size))
            # Raises "Please correct the following DeepSpeed config values that mismatch".
            args.hf_deepspeed_config.trainer_config_finalize(args, model, 1000)
    return args


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(engine_documents(strategies=("ddp", "zero", "fsdp")))
def test_the_trainer_parses_the_plans_numbers(tmp_path: Path, doc: dict[str, Any]) -> None:
    plan = plan_of(doc)
    if any(f.severity == "error" for f in hf.findings(plan)):
        return  # launch refuses these before any argv exists (test_hf_emit)
    with contextlib.chdir(tmp_path):
        args = parse(plan, tmp_path)
    opt = plan.recipe.optimizer
    assert args.per_device_train_batch_size == plan.batch.micro
    assert args.gradient_accumulation_steps == plan.batch.accumulation
    assert (args.bf16, args.fp16) == (plan.precision == "bf16", plan.precision == "fp16")
    assert (args.learning_rate, args.weight_decay) == (opt.lr, opt.weight_decay)
    assert (args.adam_beta1, args.adam_beta2, args.adam_epsilon) == (*opt.betas, opt.eps)
    assert args.max_grad_norm == (plan.recipe.grad_clip or 0.0)
    assert args.optim.value == OPTIM[opt.name]
    if plan.recipe.strategy == "zero":
        config = args.hf_deepspeed_config.config
        assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"],
                config["train_batch_size"]) == (plan.batch.micro, plan.batch.accumulation,
                                                plan.batch.micro * plan.batch.accumulation * batch_ranks(plan))
        assert config["zero_optimization"]["stage"] == plan.stage
    else:
        assert args.deepspeed is None
    if uses_fsdp(plan):
        assert args.fsdp
        for key, value in hf.emit(plan)["fsdp_config"].items():
            assert args.fsdp_config[key] == value, key
        reshard = args.fsdp_plugin_args["reshard_after_forward"]
        if plan.fsdp_version == 1:  # FSDP1's sharding strategy by name, as the Trainer passes it on
            assert reshard == fsdp1_sharding(plan).lower()
        else:
            assert reshard is (plan.stage == 3)
    else:
        assert not args.fsdp and args.gradient_checkpointing is (plan.recipe.activation_checkpointing != "none")


def test_an_allowed_override_reaches_the_trainer(tmp_path: Path) -> None:
    doc = {"recipe": 1, "name": "o", "cluster": {"nodes": 1, "gpus_per_node": 2}, "strategy": "ddp",
           "batch": {"micro": 2, "accumulation": 2, "global": 8}, "model": {"hidden_size": 64},
           "precision": "fp32"}
    plan = plan_of(doc)
    configs: dict[str, str] = {}
    argv = handoff("hf", plan, user_args=("--output_dir", str(tmp_path), "--per_device_train_batch_size=4"),
                   run_dir=tmp_path, configs=configs, allow_override=True).args
    (args,) = hf_argparser.HfArgumentParser(training_args.TrainingArguments).parse_args_into_dataclasses(
        args=list(argv))
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 2


@pytest.mark.parametrize("argv", [
    ("--bf16", "--per_device_train_batch_size", "3", "--use_cpu"),
    ("--bf16=no", "--fp16", "--gradient_checkpointing"),
    ("--per_device_train_batch_size=5", "--learning_rate", "0.5", "--per_device_train_batch_size", "6"),
    ("--fsdp", "--fsdp_config", '{"version": 2}', "--use_cpu", "yes"),
    ("--fsdp", "full_shard auto_wrap", "--gradient_accumulation_steps", "7", "--use_cpu"),
    ("--per-device-train-batch-size", "5", "--gradient-accumulation-steps=2"),  # find_flags missed the dashed alias
])
def test_reading_a_users_flags_agrees_with_the_trainers_parser(argv: tuple[str, ...]) -> None:
    """What `read_flags` + `same_value` conclude is what HfArgumentParser makes of the argv
    (a flag given alone is read as "true", as `launch.handoff` reads it)."""
    names = ["bf16", "fp16", "gradient_checkpointing", "use_cpu", "fsdp", "fsdp_config",
             "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate"]
    (args,) = hf_argparser.HfArgumentParser(training_args.TrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", "unused", "--report_to", "none", *argv])
    last = {name: "true" if flag.value is None else flag.value for flag in read_flags(argv)
            if (name := flag.name.replace("-", "_")) in names}
    assert len(last) == len({word.partition("=")[0] for word in argv if word.startswith("--")}), argv
    assert last, argv
    for name, text in last.items():
        parsed = getattr(args, name)
        if name == "fsdp_config":
            assert same_value(text, {"version": 2}) and parsed["version"] == 2
        elif name == "fsdp":  # a bare --fsdp is read as "true"; the Trainer turns either on
            assert parsed and text in ("true", "full_shard auto_wrap")
        else:
            assert same_value(text, parsed), (name, text, parsed)
