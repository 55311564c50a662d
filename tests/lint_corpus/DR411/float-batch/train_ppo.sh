python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_gpus_per_node 8 \
   --critic.num_gpus_per_node 8 \
   --train.batch_size 128 \
   --train.micro_batch_size 0.5
