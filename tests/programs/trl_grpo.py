"""A TRL GRPO script as users write them (TrlParser over ScriptArguments, GRPOConfig and
ModelConfig): every setting from the command line, generation by transformers (no vLLM).

A 2-layer Llama built from a config and a word-level tokenizer built in memory (no
download) answer fixed prompts; the toy reward counts the completion's `t5` tokens.
Rank 0 prints one JSON line with the batch arithmetic GRPOConfig derived (generation
batch, steps per generation, prompts per generation), what its DeepSpeed engine ran,
and the completions it scored, for test_launch_programs.py.
"""

from __future__ import annotations

import json

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser

from distrecipe.launch.tiny_train import exit_without_teardown
from tests.programs.trl_sft import tokenizer

SCORED: list[int] = []


def reward(completions: list[str], **_: object) -> list[float]:
    """The share of a completion's tokens that are `t5`."""
    SCORED.append(len(completions))
    return [text.split().count("t5") / max(len(text.split()), 1) for text in completions]


def main() -> None:
    _script, args, _model = TrlParser((ScriptArguments, GRPOConfig, ModelConfig)).parse_args_and_config()
    if args.deepspeed and args.use_cpu:
        import deepspeed.ops

        # DeepSpeed on CPU would JIT-build a shared-memory all-reduce (minutes); gloo suffices.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=128, max_position_embeddings=64, pad_token_id=0,
                         eos_token_id=2)
    from datasets import Dataset

    prompts = [" ".join(f"t{(i * 7 + j) % 120 + 4}" for j in range(4)) for i in range(32)]
    trainer = GRPOTrainer(model=LlamaForCausalLM(config), reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tokenizer())
    result = trainer.train()
    engine = trainer.model_wrapped
    if args.process_index == 0:
        print(json.dumps({
            "trainer": type(trainer).__name__,
            "world": args.world_size,
            "micro": args.per_device_train_batch_size,
            "accumulation": args.gradient_accumulation_steps,
            "num_generations": args.num_generations,
            "generation_batch_size": args.generation_batch_size,
            "steps_per_generation": args.steps_per_generation,
            "engine_batch": [engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps(),
                             engine.train_batch_size()] if args.deepspeed else None,
            "steps": result.global_step,
            "scored_per_call": SCORED,
            "rewards": [entry["reward"] for entry in trainer.state.log_history if "reward" in entry],
        }), flush=True)


if __name__ == "__main__":
    main()
    exit_without_teardown(0)
