"""Program kinds: read from the script, overridable, and each handed the recipe its own way.

The argv a Trainer gets is parsed by `HfArgumentParser` itself in test_launch_hf.py;
here the decisions (which kind, which launcher, which user arguments are refused) are
checked without importing an engine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from distrecipe.commands import launch as launch_command
from distrecipe.commands.launch import launch
from distrecipe.errors import LaunchError, RecipeError
from distrecipe.launch.kinds import infer
from distrecipe.launch.spec import TINY_TRAINER, Program
from distrecipe.launch.supervise import Outcome

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"
RL = ("rl.rollout_n=4", "rl.prompts_per_step=128", "strategy=fsdp")

SCRIPTS = {
    "hf": "import os\nfrom transformers import HfArgumentParser, TrainingArguments\n",
    "hf_alias": "import transformers as tf\n\nargs = tf.TrainingArguments('out')\n",
    "trl": "from trl import SFTTrainer\n",
    "accelerate": "from accelerate import Accelerator\naccelerator = Accelerator()\n",
    "deepspeed": "import deepspeed\n\nengine, *_ = deepspeed.initialize(model=m)\n",
    "ds_args": "import argparse, deepspeed\np = argparse.ArgumentParser()\ndeepspeed.add_config_arguments(p)\n",
    "ds_sub": "import deepspeed.comm\n\ndeepspeed.initialize(model=m)\n",
    "plain": "import torch.distributed as dist\ndist.init_process_group('gloo')\n",
    "both": "from accelerate import Accelerator\nfrom transformers import Trainer\n",
}


def script(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPTS[name], encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "kind", "why"), [
    ("hf", "hf", ":2 imports HfArgumentParser from transformers"),
    ("hf_alias", "hf", ":3 uses tf.TrainingArguments"),
    ("trl", "hf", ":1 imports SFTTrainer from trl"),
    ("accelerate", "accelerate", ":1 imports Accelerator from accelerate"),
    ("deepspeed", "deepspeed", ":3 uses deepspeed.initialize"),
    ("ds_args", "deepspeed", ":3 uses deepspeed.add_config_arguments"),
    ("ds_sub", "deepspeed", ":3 uses deepspeed.initialize"),
    ("plain", "torchrun", " uses no Trainer, Accelerator or deepspeed.initialize"),
    ("both", "hf", ":2 imports Trainer from transformers"),
])
def test_the_kind_is_read_from_the_script(tmp_path: Path, name: str, kind: str, why: str) -> None:
    path = script(tmp_path, name)
    choice = infer(Program(target=str(path)), "deepspeed")
    assert (choice.kind, choice.reason) == (kind, f"{path}{why}")


def test_a_module_is_found_without_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SCRIPTS["hf"], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert infer(Program(target="pkg.train", module=True), "torchrun").kind == "hf"


def test_unreadable_scripts_get_the_launchers_usual_kind(tmp_path: Path) -> None:
    missing = infer(Program(target=str(tmp_path / "nope.py")), "deepspeed")
    assert missing.kind == "deepspeed" and "cannot read" in missing.reason
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n", encoding="utf-8")
    assert infer(Program(target=str(broken)), "torchrun").reason.startswith(f"cannot parse {broken}")
    assert infer(Program(target=TINY_TRAINER, module=True), "torchrun").kind == "torchrun"


def dry(capsys: pytest.CaptureFixture[str], recipe: Path, *overrides: str, **options: Any) -> dict[str, Any]:
    capsys.readouterr()
    assert launch(recipe=str(recipe), overrides=overrides, run_dir="/tmp/distrecipe-kinds", dry_run=True,
                  environ=options.pop("environ", {}), **options) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_hf_gets_trainer_flags_not_deepspeed_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "hf")
    got = dry(capsys, TINY, program=(str(path), "--output_dir", "out"))
    assert got["program_kind"] == "hf"
    args = got["argv"][got["argv"].index(str(path)) + 1:]
    assert "--deepspeed_config" not in args
    assert args[:4] == ["--output_dir", "out", "--deepspeed", "/tmp/distrecipe-kinds/ds_config.json"]
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--per_device_train_batch_size"] == "2"
    assert pairs["--gradient_accumulation_steps"] == "2"
    assert pairs["--use_cpu"] == "true"


def test_the_program_kind_option_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "hf")
    got = dry(capsys, TINY, program=(str(path),), program_kind="deepspeed")
    assert (got["program_kind"], got["program_kind_reason"]) == ("deepspeed", "--program-kind")
    assert got["argv"][-2:] == ["--deepspeed_config", "/tmp/distrecipe-kinds/ds_config.json"]
    got = dry(capsys, TINY, "launch.program_kind=torchrun", program=(str(path),))
    assert got["program_kind_reason"] == "launch.program_kind in the recipe"
    assert got["argv"][-1] == str(path), "a plain torchrun program gets only the environment"
    assert got["env"]["DISTRECIPE_PLAN"] == "/tmp/distrecipe-kinds/plan.json"


def test_an_accelerate_script_moves_a_defaulted_launcher(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "accelerate")
    got = dry(capsys, SEED, "launch.backend=auto", "launch.master_addr=10.0.0.1", program=(str(path),))
    assert got["argv"][1:4] == ["launch", "--config_file", "/tmp/distrecipe-kinds/accelerate_config.yaml"]
    assert "--deepspeed_config_file" in got["argv"], "strategy zero: Accelerate's DeepSpeed path"
    with pytest.raises(LaunchError, match=re.escape("program kind accelerate cannot run under launch.backend deepspeed")):
        dry(capsys, SEED, "launch.master_addr=10.0.0.1", target="deepspeed", program=(str(path),))


def test_a_raw_deepspeed_script_under_torchrun_still_gets_its_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "deepspeed")
    got = dry(capsys, TINY, "strategy=ddp", "stage=0", target="torchrun", program=(str(path),))
    assert got["argv"][-2:] == ["--deepspeed_config", "/tmp/distrecipe-kinds/ds_config.json"]
    assert "ds_config.json" in got["files"]


@pytest.mark.parametrize(("words", "message"), [
    (("--per_device_train_batch_size", "4"),
     "--per_device_train_batch_size 4 contradicts the recipe's 2 (batch.micro)"),
    (("--gradient_accumulation_steps=8",),
     "--gradient_accumulation_steps 8 contradicts the recipe's 2 (batch.accumulation)"),
    (("--bf16",), "--bf16 true contradicts the recipe's false (precision)"),
    (("--deepspeed", "mine.json"), "--deepspeed mine.json contradicts the recipe's "
                                   "/tmp/distrecipe-kinds/ds_config.json (strategy/stage/offload"),
    (("--fsdp", "full_shard"), "--fsdp full_shard contradicts the recipe's no value (strategy)"),
])
def test_hf_arguments_that_contradict_the_recipe_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], words: tuple[str, ...], message: str) -> None:
    path = script(tmp_path, "hf")
    with pytest.raises(LaunchError, match=re.escape("program argument " + message)):
        dry(capsys, TINY, program=(str(path), *words))


def test_a_recipe_the_trainer_cannot_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "hf")
    with pytest.raises(RecipeError, match="DR208"):
        dry(capsys, SEED, "strategy=megatron", "stage=1", "parallel.tensor=2", program=(str(path),),
            target="torchrun")


def test_agreeing_and_unknown_arguments_pass_untouched(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "hf")
    words = ("--per_device_train_batch_size", "2", "--max_steps", "3", "--fp16=no", "--my_flag")
    got = dry(capsys, TINY, program=(str(path), *words))
    args = got["argv"][got["argv"].index(str(path)) + 1:]
    assert args[:len(words)] == list(words)
    assert args.count("--per_device_train_batch_size") == 1 and "--fp16" not in args[len(words):]


def test_verl_overrides_that_contradict_the_recipe_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    ray = {"RAY_ADDRESS": "10.0.0.1:6379"}
    mini = "actor_rollout_ref.actor.ppo_mini_batch_size"
    with pytest.raises(LaunchError, match=f"program argument {mini} 48 contradicts the recipe's 64"):
        dry(capsys, SEED, *RL, target="verl", environ=ray, program=(f"{mini}=48",))
    got = dry(capsys, SEED, *RL, target="verl", environ=ray, program=(f"+{mini}=64", "trainer.x=1"))
    assert got["argv"][-2:] == [f"+{mini}=64", "trainer.x=1"]
    assert f"{mini}=64" not in got["argv"]
    got = dry(capsys, SEED, *RL, target="verl", environ=ray, allow_override=True, program=(f"{mini}=48",))
    assert [word for word in got["argv"] if word.startswith(mini)] == [f"{mini}=48"]


def test_a_raw_deepspeed_config_of_ones_own_is_refused(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "deepspeed")
    with pytest.raises(LaunchError, match=re.escape("--deepspeed_config mine.json contradicts")):
        dry(capsys, TINY, program=(str(path), "--deepspeed_config", "mine.json"))


def test_allow_override_uses_the_users_value_and_records_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "hf")
    started: list[tuple[str, ...]] = []

    def supervise(argv: tuple[str, ...], env: dict[str, str], **_: Any) -> Outcome:
        started.append(argv)
        return Outcome(exit_code=0)

    monkeypatch.setattr(launch_command, "supervise", supervise)
    run = tmp_path / "run"
    assert launch(recipe=str(TINY), run_dir=str(run), environ={}, allow_override=True,
                  program=(str(path), "--per_device_train_batch_size", "4")) == 0
    (argv,) = started
    assert argv.count("--per_device_train_batch_size") == 1
    assert argv[argv.index("--per_device_train_batch_size") + 1] == "4"
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert record["overridden"] == [{"argument": "--per_device_train_batch_size", "recipe": "2",
                                     "given": "4", "key": "batch.micro"}]
    assert record["program_kind"]["kind"] == "hf"
    assert "--allow-override: --per_device_train_batch_size 4 replaces the recipe's 2" in capsys.readouterr().err
