"""A plain torchrun script that reads its settings through `distrecipe.api`, trained with FSDP2.

`api.current()` gives the Plan `distrecipe launch` resolved; the script takes the
micro-batch, accumulation, stage (re-shard after forward), learning rate and clipping
from it. Rank 0 prints the samples each optimizer step consumed over all ranks.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from distrecipe import api
from distrecipe.launch.tiny_train import exit_without_teardown


def main() -> None:
    plan = api.current()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, reshard_after_forward=plan.stage == 3)
    fully_shard(model, reshard_after_forward=plan.stage == 3)
    stated = plan.recipe.optimizer  # what the recipe leaves out stays torch's default
    kwargs = {key: value for key in ("lr", "betas", "eps", "weight_decay")
              if stated is not None and (value := getattr(stated, key)) is not None}
    optimizer = torch.optim.AdamW(model.parameters(), **kwargs)
    generator = torch.Generator().manual_seed(1 + rank)
    samples, losses = [], []
    for _ in range(3):
        seen = torch.zeros(1)
        for _ in range(plan.batch.accumulation):
            x = torch.randn(plan.batch.micro, 8, generator=generator)
            loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True).sin()) / plan.batch.accumulation
            loss.backward()
            seen += plan.batch.micro
        if plan.recipe.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), plan.recipe.grad_clip)
        optimizer.step()
        optimizer.zero_grad()
        dist.all_reduce(seen)
        samples.append(int(seen.item()))
        losses.append(loss.item() * plan.batch.accumulation)
    if rank == 0:
        print(json.dumps({"world": world, "samples": samples, "losses": losses}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # gloo's threads can abort a finished rank in interpreter teardown (a torch issue: see
    # distrecipe.launch.tiny_train.exit_without_teardown); a user's script may hit it too,
    # this test must not.
    exit_without_teardown(0)
