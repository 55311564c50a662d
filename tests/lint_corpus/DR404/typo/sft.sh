#!/bin/bash
# SFT with the TRL CLI
trl sft \
    --model_name_or_path Qwen/Qwen2.5-0.5B \
    --dataset_name trl-lib/Capybara \
    --learning_rate 2.0e-5 \
    --packing \
    --max_lenght 1024 \
    --output_dir Qwen2.5-0.5B-SFT
