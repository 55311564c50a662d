"""The parameter tensors of a Llama-shaped decoder, from the recipe's model shape.

Engines do not treat all parameters alike: DeepSpeed ZeRO-3 keeps every tensor of at
most `stage3_param_persistence_threshold` elements gathered on every rank, and FSDP
gathers one transformer block at a time. Both need tensor sizes, not just Ψ; the
recipe's shape (hidden, layers, heads, kv heads, intermediate, vocab) gives them for
the Llama / Qwen / Mistral family that the recipes describe. `load` counts Ψ from
the same inventory when a recipe gives the shape but not `model.params`.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.recipe import Model


@dataclass(frozen=True, slots=True)
class Inventory:
    """Tensor sizes (elements) of one model: the embeddings and head, and one block."""

    outer: tuple[int, ...]
    """Embedding, final norm, output head (absent when tied)."""
    block: tuple[int, ...]
    """One decoder block: q, k, v, o, gate, up, down projections and two norms."""
    layers: int

    @property
    def params(self) -> int:
        return sum(self.outer) + self.layers * sum(self.block)

    @property
    def block_params(self) -> int:
        return sum(self.block)

    def persistent(self, threshold: int) -> int:
        """Elements in tensors of at most `threshold` elements (ZeRO-3 keeps them whole)."""
        small = [n for n in self.block if n <= threshold]
        return sum(n for n in self.outer if n <= threshold) + self.layers * sum(small)


def llama(model: Model) -> Inventory | None:
    """The inventory of a Llama-shaped model, or None when the shape is incomplete."""
    h, layers, heads, vocab, inter = (
        model.hidden_size, model.layers, model.heads, model.vocab, model.intermediate_size,
    )
    if h is None or layers is None or heads is None or vocab is None or inter is None:
        return None
    kv = kv_width(h, heads, model.kv_heads)
    block = (h * h, h * kv, h * kv, h * h, h * inter, h * inter, inter * h, h, h)
    outer = (vocab * h, h) if model.tied_embeddings else (vocab * h, h, vocab * h)
    return Inventory(outer=outer, block=block, layers=layers)


def kv_width(hidden: int, heads: int, kv_heads: int | None) -> int:
    """Width of the K (and V) projection: kv heads (every head without GQA) × head dim."""
    return (kv_heads or heads) * (hidden // heads)
