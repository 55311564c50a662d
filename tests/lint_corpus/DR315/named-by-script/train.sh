#!/bin/bash
# the Trainer reads the ds_config (--deepspeed), so every "auto" below is filled
GPUS=4
torchrun --nproc_per_node $GPUS train.py \
    --deepspeed configs/zero2.json \
    --per_device_train_batch_size 8 \
    --learning_rate 2e-5
