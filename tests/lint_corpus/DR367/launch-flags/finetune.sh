#!/bin/bash
# full fine-tune on one node of 8 GPUs
deepspeed --num_gpus 8 finetune.py \
    --model_name_or_path Qwen/Qwen2.5-7B \
    --data_path data/train.json \
    --output_dir output/qwen-sft \
    --num_train_epochs 2 \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 8 \
    --learning_rate 1e-5 \
    --lr_scheduler_type cosine \
    --warmup_ratio 0.01 \
    --bf16 True \
    --deepspeed ds_z3.json
