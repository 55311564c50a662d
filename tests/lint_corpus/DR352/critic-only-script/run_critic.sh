#!/usr/bin/env bash
# Only critic and algorithm overrides: still verl, because the script runs its trainer.
set -x
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=gae \
    critic.optim.lr=1e-5 \
    critic.model.fsdp_config.param_offload=True \
    "$@"
