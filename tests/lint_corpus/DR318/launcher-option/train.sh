#!/bin/bash
accelerate launch --use_deepspeed --num_processes 8 \
    --deepspeed_config_file configs/zero2.json \
    train.py --lr 2e-5
