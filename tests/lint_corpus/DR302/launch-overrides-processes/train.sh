#!/bin/bash
accelerate launch --config_file fsdp.yaml --num_processes 4 \
    train.py --model_name_or_path meta-llama/Llama-3.1-8B
