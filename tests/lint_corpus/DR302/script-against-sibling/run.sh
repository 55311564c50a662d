#!/bin/bash
deepspeed --num_gpus 4 train.py --deepspeed_config ds_config.json
