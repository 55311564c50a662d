#!/bin/bash
# fine-tune with the DeepSpeed ZeRO-3 config; hyper-parameters are train.py's own
accelerate launch --use_deepspeed --num_processes 8 \
    --deepspeed_config_file configs/zero3.json \
    train.py --lr 2e-5 --epochs 3
