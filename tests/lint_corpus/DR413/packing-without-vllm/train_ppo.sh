python3 -m openrlhf.cli.train_ppo_ray \
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture \
   --reward.model_name_or_path OpenRLHF/Llama-3-8b-rm-700k \
   --actor.num_gpus_per_node 8 \
   --critic.num_gpus_per_node 8 \
   --train.batch_size 128 \
   --ds.packing_samples
