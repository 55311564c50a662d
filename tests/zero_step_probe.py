"""Measure the new tensors DeepSpeed ZeRO-1/2's optimizer step makes.

Run under ``torchrun --nproc_per_node 2 tests/zero_step_probe.py JOB.json OUT.json`` on CPU
(gloo). A tiny decoder-shaped model (an embedding wider than any other tensor, then plain
MLP blocks, then an untied head) trains one step under DeepSpeed's engine, bf16, at each ZeRO
stage of `job["stages"]`. Inside `engine.step()` a dispatch mode records, per rank and stage:

* ``fp64``: elements of the largest float64 tensor any op makes (`get_grad_norm_direct`'s
  `.to(get_norm_dtype())` of one gradient's piece of the partition);
* ``cast``: elements of the largest fp32 tensor `aten._to_copy` makes (the partition's
  gradient cast to the master dtype);
* ``partition``: elements of this rank's fp32 master partition.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from distrecipe.launch.tiny_train import exit_without_teardown
from tests.probes import gather_to, start


class Largest(TorchDispatchMode):
    """The largest float64 output, and the largest fp32 `_to_copy` output, of any op."""

    def __init__(self) -> None:
        super().__init__()
        self.fp64 = 0
        self.cast = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if not isinstance(tensor, torch.Tensor):
                continue
            if tensor.dtype == torch.float64:
                self.fp64 = max(self.fp64, tensor.numel())
            if func is torch.ops.aten._to_copy.default and tensor.dtype == torch.float32:
                self.cast = max(self.cast, tensor.numel())
        return out


def build(job: dict[str, int]) -> torch.nn.Module:
    h, vocab = job["hidden"], job["vocab"]

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, h)
            self.blocks = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.Linear(h, 4 * h, bias=False), torch.nn.GELU(),
                                    torch.nn.Linear(4 * h, h, bias=False)) for _ in range(job["layers"]))
            self.head = torch.nn.Linear(h, vocab, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids)
            for block in self.blocks:
                x = x + block(x)
            logits = self.head(x).float()
            return torch.nn.functional.cross_entropy(logits.view(-1, vocab), ids.view(-1))

    return Tiny()


def main(job_path: str, out_path: str) -> None:
    deepspeed, job = start(job_path)
    measured: dict[str, Any] = {}
    for stage in job["stages"]:  # one process for every stage: one import of DeepSpeed
        torch.manual_seed(0)
        module = build(job)
        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                  "bf16": {"enabled": True}, "zero_optimization": {"stage": stage},
                  "gradient_clipping": 1.0, "steps_per_print": 10**9,
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
        engine, *_ = deepspeed.initialize(model=module, model_parameters=module.parameters(), config=config)
        ids = torch.randint(0, job["vocab"], (1, job["seq"]))
        engine.backward(engine(ids))
        largest = Largest()
        with largest:
            engine.step()
        partition = sum(p.numel() for p in engine.optimizer.single_partition_of_fp32_groups)
        measured[str(stage)] = {"fp64": largest.fp64, "cast": largest.cast, "partition": partition}
    gather_to(out_path, measured)
    exit_without_teardown(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
