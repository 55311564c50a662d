"""Files lint used to refuse or misread (issue 27): each is read as its own tool reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

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
    """`$[...]` is bash's older spelling of `$((...))`: the same shell arithmetic, evaluated
    where the script fixes its operands (issue 27), and said so."""
    script = tmp_path / "run_grpo.sh"
    script.write_text(LEGACY_ARITHMETIC.replace("$[N_GPUS * PROMPTS_PER_GPU]", written))
    result = cli("import", script, "--world", "8", "-o", tmp_path / "recipe.yaml")
    assert result.code == 0, result.err
    assert yaml.safe_load((tmp_path / "recipe.yaml").read_text())["rl"] == {"rollout_n": 5, "prompts_per_step": 256}
    assert (f"data.train_batch_size={written} is 256, as the script sets it: taken from line 10's shell "
            "arithmetic; line 3; line 4") in result.err


MANIFESTS = """# Fine-tuning Llama 3 8B on two nodes with the Kubeflow training operator.
apiVersion: v1
kind: ConfigMap
metadata:
  name: sft-ds-config
data:
  ds_config.json: |
    {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
     "zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: llama3_sft
  namespace: training
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: nvcr.io/nvidia/pytorch:24.05-py3
            command: [torchrun, --nnodes, "2", --nproc_per_node, "8", train.py,
                      --deepspeed, /config/ds_config.json, --per_device_train_batch_size, "4"]
            resources:
              limits: {nvidia.com/gpu: 8}
            volumeMounts: [{name: ds-config, mountPath: /config}]
          volumes: [{name: ds-config, configMap: {name: sft-ds-config}}]
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: nvcr.io/nvidia/pytorch:24.05-py3
            command: [torchrun, --nnodes, "2", --nproc_per_node, "8", train.py,
                      --deepspeed, /config/ds_config.json, --per_device_train_batch_size, "4"]
            resources:
              limits: {nvidia.com/gpu: 8}
---
apiVersion: v1
kind: Service
metadata:
  name: tensorboard
spec:
  selector: {training.kubeflow.org/job-name: llama3-sft}
  ports: [{port: 6006}]
"""
UNREAD = """apiVersion: v1
kind: Namespace
metadata: {name: training}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: trainer, namespace: training}
"""


def test_each_document_of_a_yaml_stream_is_linted_where_it_stands(cli: Callable[..., Result],
                                                                   tmp_path: Path) -> None:
    """A Kubernetes repository keeps a job beside the objects it uses, `---` between them."""
    manifest = tmp_path / "sft.yaml"
    manifest.write_text(MANIFESTS)
    result = cli("lint", manifest)
    assert (result.code, result.err) == (1, "")
    assert result.out == (f"{manifest}:14:9: error DR390: PyTorchJob name 'llama3_sft' is not a DNS-1035 label "
                          "(lower-case letters, digits and '-', starting with a letter): try 'llama3-sft'\n"
                          "1 file checked: 1 error, 0 warnings, 0 infos\n")
    manifest.write_text(f"---\n{MANIFESTS}---\n")  # `---` before the first and after the last: empty ones
    assert cli("lint", manifest).out.startswith(f"{manifest}:15:9: error DR390: PyTorchJob name 'llama3_sft'")
    # a stream of none lint reads is no config, as one such document is: skipped as pre-commit runs it
    objects = tmp_path / "namespace.yaml"
    objects.write_text(UNREAD)
    assert cli("lint", "--ignore-unknown", objects).code == 0
    result = cli("lint", objects)
    assert result.code == 2 and result.err.startswith(f"{objects}:1:1: error: not a config distrecipe reads")


def test_a_stream_holding_a_config_its_tool_reads_alone_is_refused_as_the_tool_refuses_it(
        cli: Callable[..., Result], tmp_path: Path) -> None:
    """`yaml.safe_load` (Accelerate) and OmegaConf (verl) read one document and refuse a stream."""
    config = tmp_path / "accelerate.yaml"
    config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n"
                      "---\ncompute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 16\n")
    result = cli("lint", config)
    assert (result.code, result.err) == (2, f"{config}:4:1: error: a stream of 2 YAML documents (`---` between "
                                            "them) holding a config of kind accelerate, whose reader takes one "
                                            "document and refuses the stream\n")
