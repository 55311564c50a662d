#!/bin/bash
NUM_GPUS=8
deepspeed --num_gpus $NUM_GPUS pretrain.py \
    --deepspeed \
    --deepspeed_config ds_config.json
