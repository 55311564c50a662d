"""A Hugging Face Trainer script as users write them: every setting from the command line.

A 2-layer Llama built from a config (no download) trains for `--max_steps` on a fixed
in-memory set of token sequences. Rank 0 prints one JSON line with what the Trainer
and its DeepSpeed engine ended up using, for test_launch_programs.py to compare
with the Plan.
"""

from __future__ import annotations

import json

import torch
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from distrecipe.launch.tiny_train import exit_without_teardown


def main() -> None:
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    if args.deepspeed and args.use_cpu:
        import deepspeed.ops

        # DeepSpeed on CPU would JIT-build a shared-memory all-reduce (minutes); gloo suffices.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=128, max_position_embeddings=64)
    tokens = torch.randint(0, 128, (64, 16), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": row, "labels": row} for row in tokens]
    trainer = Trainer(model=LlamaForCausalLM(config), args=args, train_dataset=data)
    # As transformers' example scripts do: the flag `launch` passes for checkpoint.resume.
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    engine = trainer.model_wrapped
    if args.process_index == 0:
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        print(json.dumps({
            "world": args.world_size,
            "micro": args.per_device_train_batch_size,
            "accumulation": args.gradient_accumulation_steps,
            "engine_batch": [engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps(),
                             engine.train_batch_size()] if args.deepspeed else None,
            "steps": result.global_step,
            "losses": losses,
            "logged": {entry["step"]: entry["loss"] for entry in trainer.state.log_history if "loss" in entry},
        }), flush=True)


if __name__ == "__main__":
    main()
    # gloo's threads can abort a finished rank in interpreter teardown (a torch issue: see
    # distrecipe.launch.tiny_train.exit_without_teardown); a user's script may hit it too,
    # this test must not.
    exit_without_teardown(0)
