#!/usr/bin/env bash
# GRPO on 2 nodes of 8 GPUs
set -euo pipefail
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_batch_size=90 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.actor.fsdp_config.fsdp_size=-1 \
    trainer.nnodes=2 \
    trainer.n_gpus_per_node=8 "$@"
