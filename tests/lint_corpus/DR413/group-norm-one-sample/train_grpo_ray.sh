#!/bin/bash
set -x
ray job submit --address="http://127.0.0.1:8265" \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --vllm.num_engines 4 \
   --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct \
   --reward.remote_url http://localhost:5000/get_reward \
   --train.batch_size 128 \
   --rollout.batch_size 128 \
   --algo.advantage.estimator group_norm
