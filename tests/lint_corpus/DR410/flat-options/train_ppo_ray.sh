#!/bin/bash
# written for OpenRLHF 0.9: the options were grouped in 0.10.2
set -x
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 \
   --ref.num_gpus_per_node 8 \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --micro_train_batch_size 8 \
   --train.batch_size 128 \
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture
