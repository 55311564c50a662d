"""The scripts users bring, launched for real on two CPU ranks through `distrecipe launch`.

Each kind is judged by its engine at run time: the Trainer and its DeepSpeed engine
(hf, under DeepSpeed's launcher), DeepSpeed's engine (a raw `--deepspeed_config`
script), and the ranks' own all-reduce of the samples they consumed (a torchrun FSDP2
script that reads the Plan through `distrecipe.api`). Accelerate cannot start CPU
ranks (`launch` refuses it), so that kind is proven by its argv in test_launch_kinds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import rank_lines

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "recipes" / "tiny-cpu.yaml"  # micro 2 × accumulation 2 × 2 ranks = global 8
PROGRAMS = Path(__file__).resolve().parent / "programs"


def launch(tmp_path: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `distrecipe launch`; returns rank 0's JSON line and the run record."""
    run_dir = tmp_path / "run"
    # The ranks run scripts from tests/programs, so this checkout must come first on their path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "distrecipe", "launch", str(TINY), "--run-dir", str(run_dir),
                           *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [line for line in rank_lines(done.stdout) if line.startswith('{"')]
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    result: dict[str, Any] = json.loads(line)
    return result, record


def test_an_hf_trainer_script_trains_with_the_recipes_batch(tmp_path: Path) -> None:
    got, record = launch(tmp_path, "--", str(PROGRAMS / "hf_trainer.py"), "--output_dir", str(tmp_path / "out"),
                         "--max_steps", "3", "--report_to", "none", "--save_strategy", "no",
                         "--logging_steps", "1")
    assert record["program_kind"]["kind"] == "hf"
    assert (got["world"], got["micro"], got["accumulation"]) == (2, 2, 2)
    assert got["engine_batch"] == [2, 2, 8], "DeepSpeed's engine runs the Plan's batch"
    assert got["steps"] == 3 and len(got["losses"]) == 3


def test_a_raw_deepspeed_script_gets_its_config(tmp_path: Path) -> None:
    got, record = launch(tmp_path, "--", str(PROGRAMS / "raw_deepspeed.py"), "--steps", "3")
    assert record["program_kind"]["kind"] == "deepspeed"
    assert got["engine_batch"] == [2, 2, 8]
    assert got["optimizer_steps"] == 3


def test_a_torchrun_fsdp2_script_reads_the_plan_through_the_api(tmp_path: Path) -> None:
    got, record = launch(tmp_path, "--set", "strategy=fsdp", "--set", "stage=3", "-t", "torchrun", "--",
                         str(PROGRAMS / "torchrun_fsdp2.py"))
    assert record["program_kind"]["kind"] == "torchrun"
    assert record["env"]["DISTRECIPE_PLAN"] == str(tmp_path / "run" / "plan.json")
    assert got["world"] == 2
    assert got["samples"] == [8, 8, 8], "micro 2 × accumulation 2 on each of 2 ranks, every step"


TRL_FLAGS = ("--max_steps", "2", "--report_to", "none", "--save_strategy", "no", "--logging_steps", "1")


def test_a_trl_sft_script_trains_with_the_recipes_batch(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    got, record = launch(tmp_path, "--", str(PROGRAMS / "trl_sft.py"), "--output_dir", str(tmp_path / "out"),
                         *TRL_FLAGS)
    assert record["program_kind"]["kind"] == "hf"  # SFTTrainer is a Trainer: it takes the Trainer's flags
    assert (got["trainer"], got["world"], got["micro"], got["accumulation"]) == ("SFTTrainer", 2, 2, 2)
    assert got["engine_batch"] == [2, 2, 8], "DeepSpeed's engine runs the Plan's batch"
    assert got["steps"] == 2 and len(got["losses"]) == 2


def test_a_trl_grpo_script_generates_and_trains_with_the_recipes_batch(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    # the group comes from the recipe's rl: launch passes --num_generations itself
    got, record = launch(tmp_path, "--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=2", "--",
                         str(PROGRAMS / "trl_grpo.py"), "--output_dir", str(tmp_path / "out"), *TRL_FLAGS,
                         "--max_completion_length", "8")
    assert record["program_kind"]["kind"] == "hf"
    assert (got["trainer"], got["world"], got["micro"], got["accumulation"]) == ("GRPOTrainer", 2, 2, 2)
    # GRPOConfig's arithmetic on the recipe's numbers: micro 2 completions × 2 ranks × 2
    # steps per generation (the accumulation) = 8 completions, two prompts' groups of 4
    assert (got["generation_batch_size"], got["steps_per_generation"], got["num_generations"]) == (8, 2, 4)
    assert got["engine_batch"] == [2, 2, 8]
    assert got["steps"] == 2 and got["scored_per_call"] == [4, 4], "each rank scores its 4 of the 8 completions"
