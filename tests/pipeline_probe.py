"""Measure what a DeepSpeed pipeline stage holds beyond its layers' checkpoints.

Run under ``torchrun --nproc_per_node 2 tests/pipeline_probe.py JOB.json OUT.json`` on CPU
(gloo). A tiny GPT built as Megatron-DeepSpeed's `GPTModelPipe` is (an embedding with
dropout, then blocks named `ParallelTransformerLayerPipe` that DeepSpeed checkpoints, then a
head and the loss; the class names are what `PipelineModule._is_checkpointable` reads) trains
one step of `accumulation` micro-batches in DeepSpeed's `PipelineEngine` (with `embed_norm`,
BLOOM's LayerNorm after the embedding), bf16 with the
`BF16_Optimizer` accumulating in fp32 (what BigScience ran; 0.19.8 needs `grad_accum_dtype:
fp32` and ZeRO stage 1 for it, where 2022's took stage 0), on 2 pipeline stages. On each rank, at the first backward:

* ``in_flight``: forwards run, none yet backwarded;
* ``saved_bool`` / ``saved_other``: bytes autograd saved outside the checkpoints during one
  micro-batch's forward (saved-tensor hooks: DeepSpeed's `CheckpointFunction` keeps its
  inputs on `ctx`, not through them), parameters left out: the dropout masks, and the rest;
* ``outputs``: bytes in `pipe_buffers['outputs']` (each in-flight micro-batch's stage output),
  ``grad_layer``: the gradient receive buffer, ``recv``: the activation receive buffer;
* ``largest_copy``: the largest new tensor `Tensor.to` makes inside the first
  `update_hp_grads` (its `lp.grad.to(fp32)`).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.nn.functional as F

from distrecipe.launch.tiny_train import exit_without_teardown
from tests.probes import gather_to, start


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.untyped_storage().nbytes() if value.numel() > 1 else 0
    if isinstance(value, (tuple, list)):
        return sum(_bytes(v) for v in value)
    return 0


def build(job: dict[str, int]) -> Any:
    from deepspeed.pipe import PipelineModule

    h, vocab, s = job["hidden"], job["vocab"], job["seq"]

    class EmbeddingPipe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = torch.nn.Embedding(vocab, h)
            self.norm = torch.nn.LayerNorm(h) if job.get("embed_norm") else torch.nn.Identity()
            self.embedding_dropout = torch.nn.Dropout(0.1)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            # Megatron's Embedding: words, BLOOM's norm (`VocabParallelEmbedding.norm`), then
            # dropout; GPTModelPipe then goes to [s, b, h]
            embeddings = self.norm(self.word_embeddings(ids))
            return self.embedding_dropout(embeddings).transpose(0, 1).contiguous()

    class ParallelTransformerLayerPipe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(h)
            self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + F.dropout(self.fc2(F.gelu(self.fc1(self.norm(x)))), 0.1, self.training)

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.out = torch.nn.LayerNorm(h), torch.nn.Linear(h, vocab, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.norm(x.transpose(0, 1).contiguous())).float()

    class GPTModelPipe(PipelineModule):
        pass

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.view(-1, vocab), labels.reshape(-1))

    torch.manual_seed(0)
    layers = [EmbeddingPipe(), *[ParallelTransformerLayerPipe() for _ in range(job["layers"])], Head()]
    assert s > 0
    return GPTModelPipe(layers=layers, num_stages=2, loss_fn=loss, activation_checkpoint_interval=1,
                        partition_method="type:ParallelTransformerLayerPipe")


def main(job_path: str, out_path: str) -> None:
    deepspeed, job = start(job_path)
    module = build(job)
    config = {"train_micro_batch_size_per_gpu": job["micro"], "gradient_accumulation_steps": job["accumulation"],
              "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"},
              "zero_optimization": {"stage": 1}, "steps_per_print": 10**9,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}}}
    engine, *_ = deepspeed.initialize(model=module, model_parameters=module.parameters(), config=config)
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[str, Any] = {"forwards": 0, "saved": []}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.untyped_storage().data_ptr() not in params:
            seen["saved"][-1].setdefault(str(tensor.dtype), {})[tensor.untyped_storage().data_ptr()] = \
                tensor.untyped_storage().nbytes()
        return tensor

    forward, backward = engine._exec_forward_pass, engine._exec_backward_pass  # bound: `_INSTRUCTION_MAP` rebinds

    def counted_forward(_: Any, buffer_id: int) -> None:
        seen["forwards"] += 1
        seen["saved"].append({})
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            forward(buffer_id)

    def measured_backward(_: Any, buffer_id: int) -> None:
        if "first_backward" not in seen:
            one = seen["saved"][0]
            seen["first_backward"] = {
                "in_flight": seen["forwards"],
                "saved_bool": sum(one.get(str(torch.bool), {}).values()),
                "saved_other": sum(sum(v.values()) for k, v in one.items() if k != str(torch.bool)),
                "outputs": sum(_bytes(o) for o in engine.pipe_buffers["outputs"] if o is not None),
                "grad_layer": _bytes(engine.grad_layer),
                "recv": _bytes(engine.pipe_recv_buf),
            }
        backward(buffer_id)

    from deepspeed.runtime.pipe import schedule

    update = engine.optimizer.update_hp_grads

    def profiled_update(*args: Any, **kwargs: Any) -> None:
        """The largest tensor `Tensor.to` makes inside the first `update_hp_grads`."""
        if "copy" in seen:
            return update(*args, **kwargs)
        to, made = torch.Tensor.to, [0]

        def counted_to(self: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
            out = to(self, *a, **k)
            if out.untyped_storage().data_ptr() != self.untyped_storage().data_ptr():
                made[0] = max(made[0], out.untyped_storage().nbytes())
            return out

        torch.Tensor.to = counted_to  # type: ignore[method-assign]
        try:
            update(*args, **kwargs)
        finally:
            torch.Tensor.to = to  # type: ignore[method-assign]
        seen["copy"] = made[0]
        return None

    engine.optimizer.update_hp_grads = profiled_update

    engine._INSTRUCTION_MAP[schedule.ForwardPass] = counted_forward
    engine._INSTRUCTION_MAP[schedule.BackwardPass] = measured_backward
    generator = torch.Generator().manual_seed(0)
    batches = [(ids, ids) for ids in (torch.randint(0, job["vocab"], (job["micro"], job["seq"]), generator=generator)
                                      for _ in range(job["accumulation"]))]
    engine.train_batch(data_iter=iter(batches))
    gather_to(out_path, {**seen["first_backward"], "largest_copy": seen.get("copy", 0)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    exit_without_teardown(0)
