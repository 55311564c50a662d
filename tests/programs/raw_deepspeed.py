"""A raw DeepSpeed script: `deepspeed.add_config_arguments` and `deepspeed.initialize(args=...)`.

The ds_config arrives as `--deepspeed_config PATH` (DeepSpeed's own flag). Rank 0
prints one JSON line with the batch the engine derived and the losses.
"""

from __future__ import annotations

import argparse
import json

import deepspeed
import deepspeed.ops
import torch
from torch import nn

from distrecipe.launch.tiny_train import exit_without_teardown


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=3)
    deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    # DeepSpeed on CPU would JIT-build a shared-memory all-reduce (minutes); gloo suffices.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    generator = torch.Generator().manual_seed(1 + engine.global_rank)
    losses = []
    for _ in range(args.steps * engine.gradient_accumulation_steps()):
        x = torch.randn(engine.train_micro_batch_size_per_gpu(), 8, generator=generator)
        loss = nn.functional.mse_loss(engine(x), x.sum(dim=1, keepdim=True).sin())
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    if engine.global_rank == 0:
        print(json.dumps({"engine_batch": [engine.train_micro_batch_size_per_gpu(),
                                           engine.gradient_accumulation_steps(), engine.train_batch_size()],
                          "optimizer_steps": engine.global_steps, "losses": losses}), flush=True)


if __name__ == "__main__":
    main()
    # gloo's threads can abort a finished rank in interpreter teardown (a torch issue: see
    # distrecipe.launch.tiny_train.exit_without_teardown); a user's script may hit it too,
    # this test must not.
    exit_without_teardown(0)
