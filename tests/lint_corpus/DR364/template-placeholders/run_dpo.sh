#! /bin/bash
learning_rate=...
per_device_train_batch_size=1
torchrun --nnodes=1 --nproc_per_node=8 ../src/entry_point/dpo_train.py \
    --bf16 True \
    --per_device_train_batch_size ${per_device_train_batch_size} \
    --save_strategy "steps" \
    --learning_rate ${learning_rate} \
    --lr_scheduler_type "cosine_annealing" \
    --output_dir out
