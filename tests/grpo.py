"""The GRPO recipe the plan's rollout tests and the TRL emitter's tests share: a 7.6B model
(Qwen2.5-7B's shape) on one node of 8 H100s, ZeRO-3, 16 prompts × 8 generations a step,
vLLM colocated at 0.3 of each GPU, started by Accelerate's DeepSpeed plugin as `trl` is."""

from __future__ import annotations

GRPO = """recipe: 1
name: grpo-7b-8gpu
model: {params: 7.6e9, hidden_size: 3584, layers: 28, heads: 28, kv_heads: 4, vocab: 152064}
cluster: {nodes: 1, gpus_per_node: 8, gpu: h100}
strategy: zero
stage: 3
batch: {micro: 4, global: 128, seq_len: 2048}
precision: bf16
optimizer: {name: adamw, lr: 1.0e-6}
rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}
launch: {backend: accelerate-deepspeed}
"""
