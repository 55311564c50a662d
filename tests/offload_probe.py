"""The host bytes DeepSpeed keeps for ZeRO offload, measured on one CPU rank.

Run as ``DS_ACCELERATOR=cpu python tests/offload_probe.py STAGE ACCUMULATION`` (one rank,
gloo): a tiny random Llama trains two optimizer steps with `offload_optimizer` (pinned),
and the probe prints, as JSON, the bytes of every tensor DeepSpeed pins (the accelerator's
`pin_memory` is wrapped; the CPU accelerator pins nothing but passes each through), Adam's
moments (torch's AdamW, held on the host by the offloaded optimizer) and ZeRO-3's fp32
partitions (`fp32_partitioned_groups_flat`, on the host unpinned), and the largest
parameter tensor's elements (ZeRO-1/2's `temp_grad_buffer_for_cpu_offload`).
"""

from __future__ import annotations

import json
import os
import sys

import torch


def main(stage: int, accumulation: int) -> dict[str, int]:
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29533"), ("RANK", "0"),
                       ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from transformers import LlamaConfig, LlamaForCausalLM

    pinned: dict[int, int] = {}
    accelerator = get_accelerator()
    pin = accelerator.pin_memory

    def counted(tensor: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        out = pin(tensor, *args, **kwargs)
        pinned[out.untyped_storage().data_ptr()] = out.untyped_storage().nbytes()
        return out

    accelerator.pin_memory = counted  # type: ignore[method-assign]
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=384, vocab_size=1024, max_position_embeddings=32,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    largest = max(p.numel() for p in model.parameters())
    ds = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": accumulation,
          "bf16": {"enabled": True}, "zero_force_ds_cpu_optimizer": False,
          "zero_optimization": {"stage": stage, "offload_optimizer": {"device": "cpu", "pin_memory": True}},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True, "foreach": False}}}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds)
    for _ in range(2 * accumulation):  # two optimizer steps: Adam's moments exist after the first
        ids = torch.randint(0, 1024, (2, 32))
        engine.backward(engine(input_ids=ids, labels=ids).loss)
        engine.step()
    optimizer = engine.optimizer
    adam = sum(t.untyped_storage().nbytes() for state in optimizer.optimizer.state.values()
               for t in state.values() if torch.is_tensor(t) and t.numel() > 1)
    unpinned = sum(t.untyped_storage().nbytes() for t in getattr(optimizer, "fp32_partitioned_groups_flat", [])
                   if t.untyped_storage().data_ptr() not in pinned)
    return {"pinned": sum(pinned.values()), "adam": adam, "fp32_unpinned": unpinned, "largest": largest}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))
