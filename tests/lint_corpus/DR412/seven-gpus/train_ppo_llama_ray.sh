#!/bin/bash
set -x
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 \
   --ref.num_gpus_per_node 7 \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 7 \
   --critic.num_nodes 1 \
   --critic.num_gpus_per_node 7 \
   --vllm.num_engines 1 \
   --train.batch_size 256 \
   --train.micro_batch_size 2 \
   --rollout.batch_size 1024 \
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture
