set -x
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    data.train_batch_size=64 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \
    # actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.rollout.n=4 \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 $@
