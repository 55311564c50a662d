#!/bin/bash
set -euo pipefail
accelerate launch --config_file zero2.yaml \
    train.py --model_name_or_path meta-llama/Llama-3.1-8B --output_dir out
