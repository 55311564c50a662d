python3 -m verl.trainer.main_ppo \
    data.train_batch_size=64 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    ~trainer.val_generations_to_log \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \
    trainer.n_gpus_per_node=8
