python3 -m verl.trainer.main_ppo \
data.train_files=$DATA_DIR/train.parquet \
data.train_batch_size=256 \
actor_rollout_ref.actor.ppo_mini_batch_size=128 \
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
trainer.n_gpus_per_node=$N_GPUS \
+trainer.val_before_train=False \
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
trainer.nnodes=1 2>&1 | tee verl_demo.log
