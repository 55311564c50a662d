#!/bin/bash
DIR=`pwd`
MODEL="Qwen/Qwen-7B"
torchrun --nproc_per_node 8 finetune.py \
    --model_name_or_path $MODEL \
    --bf16 True \
    --output_dir output_qwen \
    --per_device_train_batch_size 1 \
    --gradient_accumulation_steps 16 \
    --evaluation_strategy "no" \
    --save_strategy "steps" \
    --learning_rate 1e-5 \
    --lr_scheduler_type "cosine" \
    --model_max_length 512
