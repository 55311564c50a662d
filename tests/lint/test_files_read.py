"""Files lint used to refuse or misread (issue 27): each is read as its own tool reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.engines.native import read_file
from tests.conftest import Result

FULL_PATH = """#!/bin/bash
# Supervised fine-tuning on one node, from the project's own virtual environment.
set -euo pipefail
export NCCL_DEBUG=WARN
/home/u/envs/sft/bin/torchrun --nproc_per_node 8 --master_port 29500 train.py \\
    --config configs/sft_llama3_8b.yaml \\
    --seed 42
"""
VENV_PATH = """#!/bin/bash
source "$CONDA_PREFIX/etc/profile.d/conda.sh"
"$CONDA_PREFIX/bin/torchrun" --nproc_per_node 8 finetune.py --config configs/sft.yaml
"""
ENV_IN_FRONT = """#!/usr/bin/env bash
cd "$(dirname "$0")/.."
ACCELERATE_LOG_LEVEL=info accelerate launch --config_file c.yaml train.py \\
    --model_name_or_path Qwen/Qwen2.5-7B \\
    --dataset_name HuggingFaceH4/ultrachat_200k
"""
PLAIN = """#!/bin/bash
torchrun --nnodes=1 --nproc_per_node=8 prog.py
"""


@pytest.mark.parametrize("text", [FULL_PATH, VENV_PATH, ENV_IN_FRONT, PLAIN],
                         ids=["full-path", "venv-path", "env-in-front", "plain"])
def test_a_launch_script_passing_nothing_lint_reads_is_checked_clean(
        cli: Callable[..., Result], tmp_path: Path, text: str) -> None:
    script = tmp_path / "run.sh"
    script.write_text(text)
    result = cli("lint", script)
    assert (result.code, result.err, result.out) == (0, "", "1 file checked: 0 errors, 0 warnings, 0 infos\n")


def test_such_a_script_is_still_judged_by_the_launch_script_rules(cli: Callable[..., Result],
                                                                  tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n/opt/venv/bin/torchrun --nproc_per_node 8 prog.py \\\n"
                      "    --config configs/a.yaml \\\n    # --resume \\\n    --seed 1\n")
    result = cli("lint", script)
    assert result.code == 1
    assert f"{script}:4:5: error DR365: this comment ends the command of line 2" in result.out


SBATCH_TORCHRUN = """#!/bin/bash
#SBATCH --job-name=sft-llama3-8b
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=96
#SBATCH --output=logs/%x-%j.out

set -x -e
echo "START TIME: $(date)"
source ~/.bashrc
conda activate sft

export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
export MASTER_PORT=6000

srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 \\
    --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT \\
    train.py \\
    --deepspeed ds_z3.json \\
    --per_device_train_batch_size 4 \\
    --evaluation_strategy steps \\
    --bf16 True \\
    --output_dir /scratch/$USER/sft
"""
SBATCH_DEEPSPEED = """#!/bin/bash
#SBATCH -J dpo
#SBATCH -N 1
#SBATCH --gres=gpu:8
#SBATCH --time=48:00:00

module load cuda/12.4
deepspeed --num_gpus 8 train.py \\
    --deepspeed ds_z3.json \\
    --per_device_train_batch_size 4 \\
    --evaluation_strategy steps \\
    --output_dir out
"""
DS_AUTO = '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", ' \
          '"zero_optimization": {"stage": 3}}\n'


@pytest.mark.parametrize(("text", "line"), [(SBATCH_TORCHRUN, 22), (SBATCH_DEEPSPEED, 11)],
                         ids=["srun-torchrun", "deepspeed"])
def test_an_sbatch_script_is_read_as_the_shell_script_it_is(cli: Callable[..., Result], tmp_path: Path,
                                                            text: str, line: int) -> None:
    script = tmp_path / "train.slurm"
    script.write_text(text)
    (tmp_path / "ds_z3.json").write_text(DS_AUTO)
    result = cli("lint", script)
    assert (result.code, result.err) == (1, "")
    assert f"{script}:{line}:5: error DR363: --evaluation_strategy is no TrainingArguments field" in result.out
    # the ds_config it names is filled by the Trainer, as a .sh script's would be
    result = cli("lint", tmp_path / "ds_z3.json", "--world", "16")
    assert "DR310" not in result.out and "DR315" in result.out


CONTINUED = """#!/bin/bash
deepspeed --num_gpus 8 train.py \\
    --deepspeed ds_z3.json \\
    --model_name_or_path meta-llama/Llama-3.1-8B \\
    --per_device_train_batch_size 4 \\
    --gradient_checkpointing \\
    --logging_first_step \\
    --bf16 True \\
    --output_dir out \\
    --logging_steps 1 \\
    --save_only_model \\
"""


@pytest.mark.parametrize("text", [CONTINUED.replace("\n", "\r\n"), CONTINUED[:-1]],
                         ids=["crlf-checkout", "no-newline-at-end"])
def test_a_line_continuation_is_never_a_flag_s_value(cli: Callable[..., Result], tmp_path: Path,
                                                     text: str) -> None:
    script = tmp_path / "finetune.sh"
    script.write_bytes(text.encode())
    (tmp_path / "ds_z3.json").write_text(DS_AUTO)
    result = cli("lint", script)
    assert (result.code, result.err, result.out) == (0, "", "1 file checked: 0 errors, 0 warnings, 0 infos\n")
    data = read_file(script).data
    assert (data["logging_first_step"], data["bf16"], data["save_only_model"], data["output_dir"]) == (
        True, True, True, "out")


def test_a_blank_after_the_backslash_is_said_to_end_the_command(cli: Callable[..., Result],
                                                                 tmp_path: Path) -> None:
    """bash passes the escaped blank and ends the command: the lines below never reach the program."""
    script = tmp_path / "finetune.sh"
    script.write_text(CONTINUED.replace("--logging_first_step \\\n", "--logging_first_step \\ \n"))
    (tmp_path / "ds_z3.json").write_text(DS_AUTO)
    result = cli("lint", script)
    assert f"{script}:7:26: error DR365: the blank after this backslash ends the command of line 2" \
           in result.out
    assert "--bf16, --output_dir, --logging_steps, --save_only_model never reach train.py" in result.out


LEGACY_ARITHMETIC = """set -x
export VLLM_ATTENTION_BACKEND=XFORMERS
N_GPUS=8
PROMPTS_PER_GPU=32

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/data/gsm8k/train.parquet \\
    data.val_files=$HOME/data/gsm8k/test.parquet \\
    data.train_batch_size=$[N_GPUS * PROMPTS_PER_GPU] \\
    data.max_prompt_length=512 \\
    data.max_response_length=1024 \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \\
    trainer.n_gpus_per_node=$N_GPUS \\
    trainer.nnodes=1 \\
    trainer.total_epochs=15 $@
"""


@pytest.mark.parametrize("written", ["$[N_GPUS * PROMPTS_PER_GPU]", "$((N_GPUS * PROMPTS_PER_GPU))"])
def test_legacy_arithmetic_is_read_as_arithmetic_is(cli: Callable[..., Result], tmp_path: Path,
                                                    written: str) -> None:
    """`$[...]` is bash's older spelling of `$((...))`: the same shell arithmetic, and said so."""
    script = tmp_path / "run_grpo.sh"
    script.write_text(LEGACY_ARITHMETIC.replace("$[N_GPUS * PROMPTS_PER_GPU]", written))
    result = cli("import", script, "--world", "8", "-o", tmp_path / "recipe.yaml")
    assert (result.code, result.err) == (2, (
        f"{script}:10:27: error: data.train_batch_size={written} has no value the script fixes (it is "
        "computed by shell arithmetic at line 10); the import reads a script without running it: write "
        "the value\n"))
