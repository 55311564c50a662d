#! /bin/bash
torchrun --nproc_per_node 8 src/entry_point/sft_train.py \
    --model_name_or_path /models/llama-7b \
    --deepspeed configs/deepspeed_config.json \
    # --use_lora \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 4 \
    --bf16 \
    --output_dir saved_models
