"""A TRL SFT script as users write them (TrlParser over ScriptArguments, SFTConfig and
ModelConfig, as `trl sft` parses): every setting from the command line.

A 2-layer Llama built from a config and a word-level tokenizer built in memory (no download)
train on token sequences given as `input_ids` for `--max_steps`. Rank 0 prints one JSON line with what
SFTTrainer and its DeepSpeed engine ended up using, for test_launch_programs.py.
"""

from __future__ import annotations

import json

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser

from distrecipe.launch.tiny_train import exit_without_teardown


def tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the model's 128 ids (`t0` … `t127`), built in memory."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"t{i}": i for i in range(128)}
    words = Tokenizer(models.WordLevel(vocab, unk_token="t3"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=words, pad_token="t0", eos_token="t2", unk_token="t3")


def main() -> None:
    _script, args, _model = TrlParser((ScriptArguments, SFTConfig, ModelConfig)).parse_args_and_config()
    if args.deepspeed and args.use_cpu:
        import deepspeed.ops

        # DeepSpeed on CPU would JIT-build a shared-memory all-reduce (minutes); gloo suffices.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=128, max_position_embeddings=64, pad_token_id=0)
    from datasets import Dataset

    tokens = torch.randint(1, 128, (64, 16), generator=torch.Generator().manual_seed(1)).tolist()
    data = Dataset.from_dict({"input_ids": tokens})
    trainer = SFTTrainer(model=LlamaForCausalLM(config), args=args, train_dataset=data, processing_class=tokenizer())
    result = trainer.train()
    engine = trainer.model_wrapped
    if args.process_index == 0:
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        print(json.dumps({
            "trainer": type(trainer).__name__,
            "world": args.world_size,
            "micro": args.per_device_train_batch_size,
            "accumulation": args.gradient_accumulation_steps,
            "engine_batch": [engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps(),
                             engine.train_batch_size()] if args.deepspeed else None,
            "steps": result.global_step,
            "losses": losses,
        }), flush=True)


if __name__ == "__main__":
    main()
    exit_without_teardown(0)
