"""Activation memory per GPU: what ZeRO does not shard.

Two formulas, both in bytes for one micro-batch (b sequences of s tokens, h hidden,
a heads, L layers, V vocab), 16-bit activations:

* Korthikanti et al. 2022 (arXiv 2205.05198), the seed's: per layer
  s·b·h·(34 + 5·a·s/h); FlashAttention (or selective recompute) drops the s² term,
  leaving 34·sbh; full recompute keeps only each layer's input, 2·sbh. Output layer
  4·sbh·(1 + V/h). 8B (h 4096, 36 layers), one 8K sample, flash: 41 GB.
* Hugging Face Llama-family models, measured with saved-tensor hooks to 0.05%
  (`reference/memory.md`): per layer s·b·h·(20 + 4·h_kv/h + 8·i/h) + 4·a·s·b
  (sdpa/flash; eager stores 6·a·s²·b of scores instead, and K, V repeated to all heads:
  4·sbh for the 4·h_kv/h term), head 4·s·b·V (fp32 loss input)
  + 8·s·b·h + 2·s·b·V (the 16-bit logits the caller holds). Full recompute keeps 2·sbh
  per layer plus one layer recomputed during backward.

Tensor parallelism (with sequence parallelism) divides activations by its degree.
Pipeline parallelism does not: under 1F1B the first stage holds p micro-batches of
L/p layers, L layers' worth (Korthikanti §4.2). `plan` uses the Hugging Face formula
when the model's shape has kv heads and intermediate size (that is what DeepSpeed,
Accelerate and verl train), Korthikanti's otherwise, and shows both.

The working set ZeRO-3 / FSDP gathers while computing (the current and the prefetched
block, full and 16-bit) is transient like activations and is counted here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.model_shapes import kv_width, llama
from distrecipe.recipe import Plan


@dataclass(frozen=True, slots=True)
class Activations:
    """One formula's activation bytes per GPU: all layers and the output head."""

    formula: str
    layers: float
    head: float

    @property
    def total(self) -> float:
        return self.layers + self.head


def korthikanti(*, s: int, b: int, h: int, a: int, layers: int, vocab: int, flash: bool,
                recompute: str, tensor: int = 1) -> Activations:
    """Korthikanti et al. 2022, eq. (2) with the variants of §4 and §5."""
    sbh = s * b * h
    if recompute == "full":
        per_layer = 2.0 * sbh
    elif flash or recompute == "selective":
        per_layer = 34.0 * sbh / tensor
    else:
        per_layer = sbh * (34 + 5 * a * s / h) / tensor
    head = 4.0 * sbh * (1 + vocab / h) / tensor
    name = "Korthikanti 2022" + (", flash" if flash else "") + _recompute(recompute)
    return Activations(name, layers * per_layer, head)


def hf_llama(*, s: int, b: int, h: int, a: int, kv: int, inter: int, layers: int, vocab: int,
             flash: bool, recompute: str, tensor: int = 1) -> Activations:
    """The Hugging Face Llama formula measured in `reference/memory.md`."""
    sbh = s * b * h
    fused = flash or recompute == "selective"
    attention = 4.0 * a * s * b if fused else 6.0 * a * s * s * b
    # Eager attention multiplies by K and V after `repeat_kv`: saved at all a heads.
    keys_values = 4 * kv / h if fused else 4.0
    one_layer = (sbh * (20 + keys_values + 8 * inter / h) + attention) / tensor
    per_layers = layers * 2.0 * sbh + one_layer if recompute == "full" else layers * one_layer
    head = (4.0 * s * b * vocab + 8.0 * sbh + 2.0 * s * b * vocab) / tensor
    name = "HF Llama, measured" + (", sdpa/flash" if flash else ", eager") + _recompute(recompute)
    return Activations(name, per_layers, head)


def _recompute(recompute: str) -> str:
    return "" if recompute == "none" else f", {recompute} recompute"


def plan_activations(plan: Plan) -> tuple[Activations, ...]:
    """The estimates a Plan's shape allows; the first is the one `fits?` uses. Empty if
    the shape or `seq_len` is unknown."""
    m = plan.model
    s, h, layers, a, vocab = plan.seq_len, m.hidden_size, m.layers, m.heads, m.vocab
    if s is None or h is None or layers is None or a is None or vocab is None:
        return ()
    flash, recompute, b, t = m.attention != "eager", plan.activation_checkpointing, plan.micro, plan.tensor
    seed = korthikanti(s=s, b=b, h=h, a=a, layers=layers, vocab=vocab, flash=flash,
                       recompute=recompute, tensor=t)
    if m.intermediate_size is None:
        return (seed,)
    kv = kv_width(h, a, m.kv_heads)
    measured = hf_llama(s=s, b=b, h=h, a=a, kv=kv, inter=m.intermediate_size, layers=layers,
                        vocab=vocab, flash=flash, recompute=recompute, tensor=t)
    return (measured, seed)


def working_set(plan: Plan, *, reshard: bool) -> float:
    """Bytes of full 16-bit blocks gathered while computing: current + prefetched block."""
    inventory = llama(plan.model)
    if not reshard or inventory is None:
        return 0.0
    return 2.0 * inventory.block_params * plan.precision_bytes / plan.tensor
