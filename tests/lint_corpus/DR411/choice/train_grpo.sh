#!/bin/bash
python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --train.batch_size 128 \
   --train.micro_batch_size 4 \
   --rollout.batch_size 128 \
   --rollout.n_samples_per_prompt 8 \
   --algo.advantage.estimator grpo
