#!/bin/bash
# PPO with a critic, written for verl 0.8: the critic's FSDP settings moved in 0.9.
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=gae \
    data.train_batch_size=256 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
    critic.model.fsdp_config.param_offload=True \
    trainer.n_gpus_per_node=8 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    trainer.nnodes=1
