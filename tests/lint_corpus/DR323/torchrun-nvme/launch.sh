#!/bin/bash
torchrun --nnodes 1 --nproc_per_node 8 pretrain.py \
    --deepspeed_config configs/ds_zero3_nvme.json \
    --seq-length 2048
