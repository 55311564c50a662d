"""A tiny Llama trained under FSDP2 the way verl's FSDP engine wraps it, saved and loaded
with verl's own `FSDPCheckpointManager`: what the verl checkpoint tests run.

Started by torchrun on gloo CPU ranks. The wrapping is verl's
(`verl.utils.fsdp_utils.apply_fsdp2` on a CPU mesh, as `workers/engine/fsdp/transformer_impl.py`
does; its next call, `fsdp2_load_full_state_dict`, moves the model to `get_device_id()`,
which verl's platform answers with `torch.cuda.current_device()` on a host without GPUs,
so here every rank builds the same seeded weights instead), the learning-rate schedule is verl's
(`get_cosine_schedule_with_warmup`) and the checkpoint manager is verl's, which on a host
without CUDA keeps its state dicts on CPU (`offload_to_cpu=is_cuda_available`) and saves
no accelerator RNG (`get_rng_state`). Step s trains on the same `GLOBAL` sequences whatever
the world (rank r takes its slice), so a resumed run sees what the uninterrupted one saw.

`--save` writes `global_step_{N}/actor` the way verl's trainer lays it out; `--load` reads
one; `--dump` also writes the whole weights saved (torch's full state dict). Rank 0 prints
one JSON line: the per-step losses, mean over the global batch.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from distrecipe.launch.tiny_train import exit_without_teardown

GLOBAL, SEQUENCE, VOCAB = 4, 16, 128
CONFIG = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 4, "vocab_size": VOCAB, "max_position_embeddings": 64,
          "architectures": ["LlamaForCausalLM"]}


def tokens(step: int, rank: int, world: int) -> torch.Tensor:
    """Rank `rank`'s slice of step `step`'s global batch: counting on from a random token per
    sample, which the model learns within a few steps."""
    per_rank = GLOBAL // world
    samples = range(step * GLOBAL + rank * per_rank, step * GLOBAL + (rank + 1) * per_rank)
    starts = [int(torch.randint(VOCAB, (), generator=torch.Generator().manual_seed(1 + index))) for index in samples]
    return torch.stack([(start + torch.arange(SEQUENCE)) % VOCAB for start in starts])


def tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the model's vocabulary, built here (no download): verl
    saves the run's tokenizer beside the model config, and its model_merger loads it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="t0", pad_token="t0")


def main() -> None:
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.fsdp_utils import apply_fsdp2
    from verl.utils.torch_functional import get_cosine_schedule_with_warmup

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--save", type=Path, help="save into this folder's global_step_{--save-at}/actor")
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--load", type=Path, help="an actor folder saved after --save-at steps")
    parser.add_argument("--dump", type=Path, help="with --save: torch.save the full fp32 weights there too")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG))
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
    apply_fsdp2(model, {"mesh": mesh, "reshard_after_forward": True}, {})  # shards the seeded weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=args.steps)
    manager = FSDPCheckpointManager(model=model, optimizer=optimizer, lr_scheduler=scheduler,
                                    processing_class=tokenizer())
    start = 0
    if args.load is not None:
        manager.load_checkpoint(str(args.load))
        start = args.save_at
    losses = {}
    for step in range(start, args.steps):
        batch = tokens(step, rank, world)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # verl's own moves the norm to CUDA
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses[step + 1] = float(total) / world
        if args.save is not None and step + 1 == args.save_at:
            manager.save_checkpoint(str(args.save / f"global_step_{step + 1}" / "actor"), global_step=step + 1)
            if args.dump is not None:
                from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

                whole = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
                if rank == 0:
                    torch.save(whole, args.dump)
    if rank == 0:
        print(json.dumps({"world": world, "losses": losses}), flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
    exit_without_teardown(0)  # gloo's threads and interpreter teardown (see tiny_train)
