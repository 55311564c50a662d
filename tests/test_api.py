"""`distrecipe.api`: what a training script gets, judged by the engines that take it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.errors import LaunchError
from distrecipe.launch.rundir import plan_json, read_plan
from distrecipe.translator import deepspeed, verl

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
SEED3 = ROOT / "recipes" / "seed-8b-32gpu-zero3.yaml"
RL = ("rl.rollout_n=4", "rl.prompts_per_step=128", "strategy=fsdp", "launch.backend=verl")


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.stem)
def test_the_run_directorys_plan_reads_back_as_the_plan(recipe: Path) -> None:
    plan = api.load(recipe)
    assert read_plan(plan_json(plan)) == plan


def test_native_settings_read_back_too() -> None:
    plan = api.load(SEED3, ["native.deepspeed={steps_per_print: 5}", "native.verl=[trainer.total_epochs=2]"])
    assert plan.recipe.native.verl == ("trainer.total_epochs=2",)
    assert read_plan(plan_json(plan)) == plan
    assert api.deepspeed_config(plan)["steps_per_print"] == 5


def test_current_is_the_runs_own_plan(tmp_path: Path) -> None:
    plan = api.load(SEED3, ["batch.global=512"])
    (tmp_path / "plan.json").write_text(plan_json(plan), encoding="utf-8")
    assert api.current({"DISTRECIPE_RUN_DIR": str(tmp_path)}) == plan
    assert api.current({"DISTRECIPE_PLAN": str(tmp_path / "plan.json")}).batch.global_ == 512
    with pytest.raises(LaunchError, match="not inside a job started by `distrecipe launch`"):
        api.current({})
    with pytest.raises(LaunchError, match="cannot read the run's plan"):
        api.current({"DISTRECIPE_RUN_DIR": str(tmp_path / "elsewhere")})


def test_the_dicts_are_the_emitted_files() -> None:
    plan = api.load(SEED3)
    assert api.deepspeed_config(plan) == deepspeed.emit(plan)
    assert api.training_arguments(plan)["deepspeed"] == deepspeed.emit(plan)
    assert api.deepspeed_plugin_kwargs(plan) == {"hf_ds_config": deepspeed.emit(plan), "zero3_init_flag": True}
    rl = api.load(SEED3, RL)
    assert api.verl_overrides(rl) == verl.overrides_text(rl).splitlines()
    assert api.accelerator_kwargs(plan) == {"mixed_precision": "bf16",
                                            "gradient_accumulation_steps": plan.batch.accumulation}


def test_importing_the_api_imports_no_engine() -> None:
    code = ("import sys; from distrecipe import api; "
            "print(sorted(m for m in ('torch', 'deepspeed', 'accelerate', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_engines_take_the_dicts() -> None:
    """Accelerate's plugins and the Trainer build themselves from what the API returns."""
    accelerate_dataclasses = pytest.importorskip("accelerate.utils.dataclasses")
    training_args = pytest.importorskip("transformers.training_args")
    plan = api.load(SEED3, ["strategy=fsdp", "precision=fp32"])
    plugin = accelerate_dataclasses.FullyShardedDataParallelPlugin(**api.fsdp_plugin_kwargs(plan))
    assert (plugin.fsdp_version, plugin.reshard_after_forward) == (2, True)
    assert plugin.transformer_cls_names_to_wrap == ["Qwen3DecoderLayer"]
    assert plugin.activation_checkpointing is True and plugin.state_dict_type.name == "SHARDED_STATE_DICT"
    zero = api.load(SEED3, ["precision=fp32"])
    ds_plugin = accelerate_dataclasses.DeepSpeedPlugin(**api.deepspeed_plugin_kwargs(zero))
    assert ds_plugin.zero_stage == 3
    assert ds_plugin.deepspeed_config["train_batch_size"] == zero.batch.global_
    args = training_args.TrainingArguments(output_dir="unused", report_to="none",
                                           **api.training_arguments(zero))
    assert args.hf_deepspeed_config.config["train_batch_size"] == zero.batch.global_
