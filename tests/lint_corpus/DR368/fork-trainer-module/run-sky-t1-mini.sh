#!/bin/bash
set -x
export VLLM_ATTENTION_BACKEND=XFORMERS

python3 -m verl.trainer.main_ppo_sky \
    data.train_files=$HOME/data/train.parquet \
    data.train_batch_size=128 \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 $@
