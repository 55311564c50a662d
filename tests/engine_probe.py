"""Measure the bytes a rank really holds under DeepSpeed ZeRO-0..3 and torch FSDP2 (and
FSDP1, `run_fsdp1`: measured for docs/plan.md, not planned). A job's ``pure`` casts the model
to bf16 first (pure bf16, `optimizer.master_weights`: no fp32 copy anywhere).

Run under ``torchrun --nproc_per_node 2 tests/engine_probe.py JOBS.json OUT.json`` on CPU
(gloo). Every job in JOBS.json trains a tiny random Hugging Face Llama for two optimizer
steps in this one process group (one launch amortises the engines' import time), and at
each point of the second step sums the storages the rank holds:

* ``fwd``  after the last forward, ``bwd`` after the last backward,
* ``step`` inside the optimizer step (a post-hook on the torch optimizer that does the
  update: DeepSpeed's fp32 gradient partition and the Adam moments are both alive),
* ``rest`` after the step, gradients released the way the engine releases them.

What counts: every tensor reachable from the engine and its optimizer — model
parameters and their ``.grad``, DeepSpeed's ``ds_tensor`` shards, the optimizer's state,
and every tensor in the attributes of DeepSpeed's optimizer wrapper and its helper
objects (flat groups, fp32 partitions, reduce buckets). Each storage is counted once, by
``untyped_storage().data_ptr()``, with its full ``nbytes()`` so that padding and flat
buffers count as allocated. Activations are not engine state and are left out.

Traffic: the collectives every other one ends in (`all_reduce`, `all_gather_single`,
`reduce_scatter_single`, and the list forms) are wrapped, and the bytes a rank sends in a
ring are added up over the second step: (N−1)/N of the gathered or scattered buffer,
2(N−1)/N of an all-reduced one.

Two steps, not one: Adam creates its moments lazily in the first step, so only the
second step shows the steady state that a plan describes.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from distrecipe.launch.tiny_train import exit_without_teardown, skip_shm_build

SEQ = 32
"""Tokens per sample; small, activations are not what this probe measures."""


def tiny_llama(shape: dict[str, int]) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=shape["hidden_size"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate_size"],
        vocab_size=shape["vocab"],
        max_position_embeddings=SEQ,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def _tensors(obj: Any, depth: int, seen: set[int]) -> Iterator[torch.Tensor]:
    """Tensors reachable from `obj` through containers and DeepSpeed/FSDP helper objects."""
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        local = obj.to_local() if hasattr(obj, "to_local") else obj
        yield local
        if local.is_leaf and local.grad is not None:
            yield from _tensors(local.grad, depth, seen)
        shard = getattr(obj, "ds_tensor", None)
        if shard is not None:
            yield from _tensors(shard, depth, seen)
        if obj.is_leaf and obj is not local and obj.grad is not None:
            yield from _tensors(obj.grad, depth, seen)
        return
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value, depth - 1, seen)
    elif isinstance(obj, (list, tuple, set)):
        for value in obj:
            yield from _tensors(value, depth - 1, seen)
    elif type(obj).__module__.split(".")[0] in ("deepspeed", "torch") and hasattr(obj, "__dict__"):
        if isinstance(obj, (torch.nn.Module, dist.ProcessGroup)):
            return
        for value in vars(obj).values():
            yield from _tensors(value, depth - 1, seen)


def held_bytes(roots: list[Any]) -> int:
    """Bytes of distinct storages reachable from `roots`, each storage counted once."""
    storages: dict[int, int] = {}
    seen: set[int] = set()
    for root in roots:
        for tensor in _tensors(root, 8, seen):
            if tensor.device.type == "meta":  # DeepSpeed keeps shape-only copies; no bytes
                continue
            storage = tensor.untyped_storage()
            if storage.nbytes():
                storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


class Sent:
    """Bytes this rank sends through ring collectives while `counting`."""

    counting = False
    total = 0.0

    @classmethod
    def install(cls) -> None:
        from torch.distributed import distributed_c10d as c10d

        def numel_bytes(t: torch.Tensor | list[torch.Tensor]) -> int:
            tensors = t if isinstance(t, list) else [t]
            return sum(x.numel() * x.element_size() for x in tensors)

        # name → (argument holding the full buffer, share of it a rank sends)
        sizes = {
            "all_reduce": ("tensor", 0, lambda n: 2 * (n - 1) / n),
            "all_gather_single": ("output_tensor", 0, lambda n: (n - 1) / n),
            "reduce_scatter_single": ("input", 1, lambda n: (n - 1) / n),
            "all_gather": ("tensor_list", 0, lambda n: (n - 1) / n),
            "reduce_scatter": ("input_list", 1, lambda n: (n - 1) / n),
        }
        for name, (key, index, share) in sizes.items():
            original = getattr(c10d, name)

            def wrapped(*args: Any, _f: Any = original, _k: str = key, _i: int = index,
                        _s: Any = share, **kwargs: Any) -> Any:
                if cls.counting:
                    buffer = kwargs[_k] if _k in kwargs else args[_i]
                    n = dist.get_world_size(kwargs.get("group"))
                    cls.total += _s(n) * numel_bytes(buffer)
                return _f(*args, **kwargs)

            setattr(c10d, name, wrapped)
            setattr(dist, name, wrapped)


class Recorder:
    """Held bytes at named points of the measured step; a point seen twice keeps its maximum."""

    def __init__(self, roots: Any) -> None:
        self.roots = roots
        self.measuring = False
        self.points: dict[str, int] = {}

    def __call__(self, point: str) -> None:
        if self.measuring:
            self.points[point] = max(self.points.get(point, 0), held_bytes(self.roots()))


def run_deepspeed(job: dict[str, Any], model: torch.nn.Module) -> dict[str, int]:
    import deepspeed

    engine, _, _, _ = deepspeed.initialize(model=model, config=job["ds_config"])
    basic = engine.basic_optimizer
    record = Recorder(lambda: [list(engine.module.parameters()), basic.state,
                               basic.param_groups, vars(engine.optimizer)])
    free_grads = getattr(engine.optimizer, "free_grad_in_param_list", None)
    if free_grads is not None:
        # ZeRO-1/2 `step()` frees the 16-bit gradient partition only after it has made the
        # fp32 copy (stage_1_and_2.py, "Step 3"); this is the moment both exist: the peak.
        def free_grad_in_param_list(*args: Any, **kwargs: Any) -> Any:
            record("step")
            return free_grads(*args, **kwargs)

        engine.optimizer.free_grad_in_param_list = free_grad_in_param_list
    # DeepSpeed counts micro-steps itself: engine.step() is called after every backward.
    return _train(job, record, basic, forward=engine, backward=engine.backward,
                  step=lambda last: engine.step())


def run_fsdp2(job: dict[str, Any], model: torch.nn.Module) -> dict[str, int]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    compute = torch.bfloat16 if job["precision"] == "bf16" else torch.float32
    reduce = torch.bfloat16 if job["reduce"] == "bf16" else torch.float32
    policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=reduce)
    if job.get("pure"):  # pure bf16: the model cast to bf16, nothing for FSDP2 to cast
        model.to(torch.bfloat16)
        policy = MixedPrecisionPolicy()
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=job["reshard"])
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=job["reshard"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    accumulation = job["accumulation"]

    record = Recorder(lambda: [list(model.parameters()), optimizer.state,
                               [state._fsdp_param_group for state in _fsdp_states(model)]])

    def backward(loss: torch.Tensor) -> None:
        (loss / accumulation).backward()

    def step(last: bool) -> None:
        if last:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return _train(job, record, optimizer, forward=model, backward=backward, step=step)


def run_fsdp1(job: dict[str, Any], model: torch.nn.Module) -> dict[str, int]:
    """torch FSDP1 as the HF Trainer's `--fsdp "full_shard auto_wrap"` builds it through
    Accelerate: one FlatParameter per decoder layer and one for the rest, fp32 sharded,
    `MixedPrecision` casting to 16 bits, `use_orig_params=True`."""
    import functools

    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    compute = torch.bfloat16 if job["precision"] == "bf16" else torch.float32
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
    if job.get("pure"):
        model.to(torch.bfloat16)
    wrapped = FullyShardedDataParallel(
        model, auto_wrap_policy=policy, use_orig_params=True, device_id=torch.device("cpu"),
        mixed_precision=MixedPrecision(param_dtype=compute, reduce_dtype=compute, buffer_dtype=compute))
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4, foreach=False)
    accumulation = job["accumulation"]

    def flat(handle: Any) -> list[Any]:
        fp = handle.flat_param
        return [fp, fp.grad, *(getattr(fp, name, None) for name in (
            "_local_shard", "_full_param_padded", "_padded_unsharded_grad", "_mp_shard",
            "_saved_grad_shard", "_cpu_grad", "_full_prec_full_param_padded"))]

    handles = [m._handle for m in FullyShardedDataParallel.fsdp_modules(wrapped) if m._handle is not None]
    record = Recorder(lambda: [list(wrapped.parameters()), optimizer.state, [flat(h) for h in handles],
                               [vars(h) for h in handles]])

    def backward(loss: torch.Tensor) -> None:
        (loss / accumulation).backward()

    def step(last: bool) -> None:
        if last:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return _train(job, record, optimizer, forward=wrapped, backward=backward, step=step)


def _fsdp_states(model: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m._get_fsdp_state() for m in model.modules() if isinstance(m, FSDPModule)]


def _train(job: dict[str, Any], record: Recorder, optimizer: torch.optim.Optimizer, *,
           forward: Any, backward: Any, step: Any) -> dict[str, int]:
    """Two optimizer steps of `accumulation` micro-steps; measure during the second."""
    optimizer.register_step_post_hook(lambda *_: record("step"))
    generator = torch.Generator().manual_seed(dist.get_rank())
    for step_index in range(2):
        Sent.counting = record.measuring = step_index == 1
        last = job["accumulation"] - 1
        for micro in range(job["accumulation"]):
            ids = torch.randint(0, job["shape"]["vocab"], (job["micro"], SEQ), generator=generator)
            loss = forward(input_ids=ids, labels=ids).loss
            if micro == last:
                record("fwd")
            backward(loss)
            del loss
            record("bwd" if micro == last else f"bwd{micro + 1}")
            step(micro == last)
    Sent.counting = False
    gc.collect()
    record("rest")
    return record.points


def deepspeed_estimates(model: torch.nn.Module, ranks: int) -> dict[str, int]:
    """GPU bytes per rank by DeepSpeed's own estimators (no offload), for the same model."""
    from deepspeed.runtime.zero.stage3 import (
        estimate_zero3_model_states_mem_needs,
        model_to_params,
    )
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    total, largest = model_to_params(model)
    zero2 = estimate_zero2_model_states_mem_needs(total, ranks, 1, cpu_offload=False)[1]
    zero3 = estimate_zero3_model_states_mem_needs(total, largest, ranks, 1, cpu_offload=False)[1]
    return {"zero2": zero2, "zero3": zero3, "largest_layer": largest}


def main(jobs_path: str, out_path: str) -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed

    skip_shm_build()  # gloo carries the same bytes, and those bytes are what the probe counts
    Sent.install()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.set_num_threads(1)
    with open(jobs_path) as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        model = tiny_llama(job["shape"])
        psi = sum(p.numel() for p in model.parameters())
        estimates = deepspeed_estimates(model, dist.get_world_size())
        runner = {"fsdp2": run_fsdp2, "fsdp1": run_fsdp1}.get(job["engine"], run_deepspeed)
        Sent.total = 0.0
        points = runner(job, model)
        points["sent"] = round(Sent.total)
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, points)
        results.append({"name": job["name"], "psi": psi, "ranks": gathered,
                        "deepspeed_estimate": estimates})
        del model
        gc.collect()
        dist.barrier()
    if dist.get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    exit_without_teardown(0)
