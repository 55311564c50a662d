"""The reference model trained through Accelerate on CPU ranks, saved and loaded with
`Accelerator.save_state` / `load_state`: what the Accelerate checkpoint tests run.

Started by torchrun (`python -m torch.distributed.run`): `Accelerator(cpu=True)` under
torchrun's environment is Accelerate's MULTI_CPU on gloo (`state._prepare_backend`), the
plain DDP a user's CPU script gets. (`distrecipe launch` refuses Accelerate on CPU: its
`accelerate launch --cpu` starts one process.) The model, data set, sample order and
optimizer are the reference trainer's (`distrecipe.launch.tiny_train`), so a run at
another world with accumulation making up the global batch sees the same samples.
`--fsdp` shards the model with FSDP2 instead and saves through Accelerate's FSDP branch
(`fsdp` says how, and why Accelerate needs to be told on CPU).

Each step every rank also draws one number from torch's generator (what dropout or a
shuffle would consume), so the random states `save_state` writes per process differ from
a fresh process's. Rank 0 prints one JSON line at the end: the per-step losses (mean over
all ranks' micro-batches), and each rank's next draw right after the save and right after
the load — equal where Accelerate restored that process's random state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from pathlib import Path

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from torch import nn

from distrecipe.launch.tiny_train import (
    TrainSettings,
    build_dataset,
    build_model,
    build_optimizer,
    exit_without_teardown,
    max_norm,
    mse,
    sample_indices,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--save", type=Path, help="save_state into this folder after --save-at steps")
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--load", type=Path, help="load_state from this folder, saved after --save-at steps")
    parser.add_argument("--scheduler", action="store_true",
                        help="a prepared LinearLR over the run (Accelerate steps it once per process)")
    parser.add_argument("--fsdp", choices=["SHARDED_STATE_DICT", "FULL_STATE_DICT"],
                        help="FSDP2 on a CPU mesh, saved and loaded through Accelerate's FSDP branch")
    return parser.parse_args()


def fsdp(accelerator: Accelerator, model: nn.Module, state_dict_type: str,
         settings: TrainSettings) -> torch.optim.Optimizer:
    """`model` sharded by FSDP2 on a CPU mesh and registered with `accelerator` as its FSDP
    model, so `save_state` / `load_state` take their FSDP branch (`save_fsdp_model`,
    `save_fsdp_optimizer`, ...) with a `FullyShardedDataParallelPlugin` of `state_dict_type`.

    `AcceleratorState` never chooses FSDP on CPU ranks (it does so only in its branch for
    accelerators, accelerate/state.py), and `prepare` would wrap the model in DDP, so the
    distributed type is set here and the model and optimizer are registered as `prepare`
    registers them; everything `save_state` and `load_state` then do is Accelerate's."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type=state_dict_type)
    mesh = init_device_mesh("cpu", (accelerator.num_processes,))
    for layer in model.children():
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = build_optimizer(model.parameters(), settings.optimizer)
    accelerator.state.fsdp_plugin = plugin
    accelerator.state.distributed_type = DistributedType.FSDP
    accelerator._models.append(model)
    accelerator._optimizers.append(optimizer)
    return optimizer


def gathered(value: torch.Tensor) -> list[float]:
    values = [torch.zeros(()) for _ in range(dist.get_world_size())]
    dist.all_gather(values, value)
    return [float(item) for item in values]


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO)  # Accelerate's own messages, whatever they are
    accelerator = Accelerator(cpu=True)
    rank, world = accelerator.process_index, accelerator.num_processes
    accumulation = args.global_batch // (args.micro * world)
    settings = TrainSettings(engine="ddp", device="cpu", micro=args.micro, accumulation=accumulation,
                             global_batch=args.global_batch, precision="fp32", reshard_after_forward=False,
                             offload=False, optimizer={"name": "adamw", "lr": 1e-3}, grad_clip=1.0,
                             steps=args.steps)
    model = build_model(settings.seed)
    schedulers = []
    if args.fsdp:
        optimizer = fsdp(accelerator, model, args.fsdp, settings)
    else:
        optimizer = build_optimizer(model.parameters(), settings.optimizer)
        prepared = [model, optimizer]
        if args.scheduler:
            prepared.append(torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=args.steps * world))
        model, optimizer, *schedulers = accelerator.prepare(*prepared)
    torch.manual_seed(1 + rank)  # each process's own stream, as a seeded script has
    inputs, targets = build_dataset(settings.seed)
    start, report = 0, {"world": world, "accumulation": accumulation}
    if args.load is not None:
        accelerator.load_state(args.load)
        start = args.save_at
        report["after_load"] = gathered(torch.rand(()))
    losses = {}
    for step in range(start, args.steps):
        total = torch.zeros(())
        for micro_step in range(accumulation):
            index = sample_indices(settings, step=step, micro_step=micro_step, rank=rank)
            last = micro_step == accumulation - 1
            with contextlib.nullcontext() if last else accelerator.no_sync(model):
                loss = mse(model(inputs[index]), targets[index])
                accelerator.backward(loss / accumulation)
            total += loss.detach()
        torch.rand(())  # the random state moves with training
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm(settings.grad_clip))
        optimizer.step()
        for scheduler in schedulers:
            scheduler.step()
        optimizer.zero_grad()
        dist.all_reduce(total)
        losses[step + 1] = float(total) / (accumulation * world)
        if args.save is not None and step + 1 == args.save_at:
            accelerator.save_state(args.save)
            report["after_save"] = gathered(torch.rand(()))
    report["losses"] = losses
    if rank == 0:
        print(json.dumps(report), flush=True)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
    exit_without_teardown(0)  # gloo's threads and interpreter teardown (see tiny_train)
