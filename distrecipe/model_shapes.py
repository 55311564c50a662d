"""The parameter tensors of a decoder, per family, from the recipe's model shape.

Engines do not treat all parameters alike: DeepSpeed ZeRO-3 keeps every tensor of at
most `stage3_param_persistence_threshold` elements gathered on every rank, and FSDP
gathers one transformer block at a time. Both need tensor sizes, not just Ψ. The
families differ in the small tensors (norms, biases, q/k norms, BLOOM's norm after the
embedding), in the MLP (gated with
three matrices, or plain with two), in attention (grouped-query, or DeepSeek's
multi-latent attention) and in whether the MLP is a mixture of experts; `LAYOUTS` says
which, as Hugging Face's modelling code builds each family (transformers 5.10, its
routed experts one fused 3-D tensor per layer). `load` counts Ψ from the same
inventory when a recipe gives the shape but not `model.params`, so the count and the
memory model cannot disagree; `tests/translator/test_hf_config.py` checks the count
against the model transformers builds on the meta device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from distrecipe.recipe import Bias, Family, Model


@dataclass(frozen=True, slots=True)
class Layout:
    """What a family's block holds beyond the shape's matrices."""

    layer_cls: str
    """The decoder block's class (FSDP's transformer auto-wrap unit)."""
    mlp: Literal["gated", "plain"] = "gated"
    """Gated (gate, up, down: SwiGLU/GeGLU) or plain (up, down: GELU)."""
    norm: Literal["rms", "layer"] = "rms"
    """RMSNorm (a weight) or LayerNorm (a weight and a bias)."""
    block_norms: int = 2
    """Norms of hidden width per block."""
    qk_norm: Literal["none", "head", "full"] = "none"
    """Norms on queries and keys: none, one head wide (Qwen3, Gemma 3), or all heads (OLMo 2)."""
    bias: Bias = "none"
    """Which linear layers have a bias when the config says nothing else."""
    shared_expert_gate: bool = False
    """Qwen-MoE gates its shared expert with a (hidden → 1) projection."""
    mla: bool = False
    """Multi-latent attention (DeepSeek-V2/V3)."""
    embedding_norm: bool = False
    """A norm right after the word embedding (BLOOM's word_embeddings_layernorm)."""


LAYOUTS: dict[Family, Layout] = {
    "llama": Layout("LlamaDecoderLayer"),
    "mistral": Layout("MistralDecoderLayer"),
    "mixtral": Layout("MixtralDecoderLayer"),
    "qwen2": Layout("Qwen2DecoderLayer", bias="qkv"),
    "qwen2_moe": Layout("Qwen2MoeDecoderLayer", bias="qkv", shared_expert_gate=True),
    "qwen3": Layout("Qwen3DecoderLayer", qk_norm="head"),
    "qwen3_moe": Layout("Qwen3MoeDecoderLayer", qk_norm="head"),
    "gemma": Layout("GemmaDecoderLayer"),
    "gemma2": Layout("Gemma2DecoderLayer", block_norms=4),
    "gemma3_text": Layout("Gemma3DecoderLayer", block_norms=4, qk_norm="head"),
    "phi3": Layout("Phi3DecoderLayer"),
    "olmo2": Layout("Olmo2DecoderLayer", qk_norm="full"),
    "granite": Layout("GraniteDecoderLayer"),
    "deepseek_v2": Layout("DeepseekV2DecoderLayer", mla=True),
    "deepseek_v3": Layout("DeepseekV3DecoderLayer", mla=True),
    "gpt2": Layout("GPT2Block", mlp="plain", norm="layer", bias="all"),
    "gpt_neox": Layout("GPTNeoXLayer", mlp="plain", norm="layer", bias="all"),
    "falcon": Layout("FalconDecoderLayer", mlp="plain", norm="layer", block_norms=1),
    "bloom": Layout("BloomBlock", mlp="plain", norm="layer", bias="all", embedding_norm=True),
}
"""Every `recipe.Family`'s block (tested against the models transformers builds)."""


@dataclass(frozen=True, slots=True)
class Inventory:
    """Tensor sizes (elements) of one model: the embeddings and head, and its blocks."""

    outer: tuple[int, ...]
    """Embedding first, then its norm (BLOOM), learned positions, the final norm, the output
    head (absent when tied)."""
    groups: tuple[tuple[tuple[int, ...], int], ...]
    """(one block's tensors, how many such blocks): dense blocks, then mixture-of-experts ones."""
    routed: int
    """Elements in routed experts, all layers together (a token visits k/E of them)."""
    head: int
    """Elements of the output projection (the embedding's when tied)."""
    leading: int = 1
    """How many of `outer` come before the blocks in model order: the embedding, and BLOOM's
    norm after it."""

    @property
    def layers(self) -> int:
        return sum(count for _, count in self.groups)

    @property
    def params(self) -> int:
        return sum(self.outer) + sum(sum(block) * count for block, count in self.groups)

    @property
    def block(self) -> tuple[int, ...]:
        """The largest block's tensors: what gathering one block at a time peaks at."""
        return max((block for block, _ in self.groups), key=sum)

    @property
    def block_params(self) -> int:
        return sum(self.block)

    def tensors(self) -> list[int]:
        """Every tensor in model order: embedding (and its norm), blocks, then the rest of `outer`."""
        out = list(self.outer[:self.leading])
        for block, count in self.groups:
            out += list(block) * count
        return out + list(self.outer[self.leading:])

    def persistent(self, threshold: int) -> int:
        """Elements in tensors of at most `threshold` elements (ZeRO-3 keeps them whole)."""
        outer = sum(n for n in self.outer if n <= threshold)
        return outer + sum(count * sum(n for n in block if n <= threshold) for block, count in self.groups)


def layout(model: Model) -> Layout:
    return LAYOUTS[model.family]


def embedding_norm(model: Model) -> bool:
    """Whether a norm follows the word embedding (BLOOM's, which Megatron-DeepSpeed builds
    under `--embed-layernorm`): its weight (and bias) are in `inventory`'s `outer`."""
    return layout(model).embedding_norm


def head_width(model: Model) -> int | None:
    """One attention head's width: `head_dim`, else hidden / heads."""
    if model.head_dim is not None:
        return model.head_dim
    if model.hidden_size is None or model.heads is None:
        return None
    return model.hidden_size // model.heads


def inventory(model: Model) -> Inventory | None:
    """The model's tensors, or None when the shape is incomplete (`shape_missing` says what)."""
    if shape_missing(model):
        return None
    h, layers, heads, vocab = model.hidden_size, model.layers, model.heads, model.vocab
    assert h is not None and layers is not None and heads is not None and vocab is not None
    fam = layout(model)
    bias = model.bias or fam.bias
    norm = h * (2 if fam.norm == "layer" else 1)
    norms = [norm] * (model.block_norms or fam.block_norms)
    attention = _attention(model, h, heads, bias)
    moe_layers = layers - model.dense_layers if model.experts else 0
    groups: list[tuple[tuple[int, ...], int]] = []
    if layers - moe_layers:
        assert model.intermediate_size is not None  # shape_missing's guard
        groups.append(((*attention, *_mlp(h, model.intermediate_size, fam.mlp, bias), *norms),
                       layers - moe_layers))
    routed = 0
    if moe_layers:
        experts, width = model.experts or 0, expert_width(model) or 0
        fused = (experts * 2 * width * h, experts * width * h) if fam.mlp == "gated" else (
            experts * width * h, experts * width * h)
        routed = moe_layers * sum(fused)
        shared: tuple[int, ...] = ()
        if model.shared_experts:
            shared = _mlp(h, model.shared_experts * (model.shared_expert_size or width), fam.mlp, bias)
            shared += (h,) if fam.shared_expert_gate else ()
        groups.append(((*attention, experts * h, *fused, *shared, *norms), moe_layers))
    leading = [vocab * h] + ([norm] if fam.embedding_norm else [])
    outer = leading + ([model.position_embeddings * h] if model.position_embeddings else []) + [norm]
    if not model.tied_embeddings:
        outer.append(vocab * h)
    return Inventory(outer=tuple(outer), groups=tuple(groups), routed=routed, head=vocab * h,
                     leading=len(leading))


def _attention(model: Model, h: int, heads: int, bias: Bias) -> tuple[int, ...]:
    """q, k, v, o (their biases), and q/k norms; or multi-latent attention's projections."""
    d = head_width(model)
    assert d is not None
    qkv_bias = bias in ("qkv", "attention", "all")
    o_bias = bias in ("attention", "all")
    if model.kv_lora_rank is not None:
        rope = model.rope_head_dim or 0
        v = model.v_head_dim or d - rope
        kv_lora = model.kv_lora_rank
        q: tuple[int, ...] = (h * heads * d,) if model.q_lora_rank is None else (
            h * model.q_lora_rank, *((model.q_lora_rank,) if o_bias else ()), model.q_lora_rank,
            model.q_lora_rank * heads * d)
        kv = (h * (kv_lora + rope), *((kv_lora + rope,) if o_bias else ()), kv_lora,
              kv_lora * heads * (d - rope + v))
        return (*q, *kv, heads * v * h, *((h,) if o_bias else ()))
    kv_heads = model.kv_heads or heads
    out: list[int] = [h * heads * d, h * kv_heads * d, h * kv_heads * d, heads * d * h]
    if qkv_bias:
        out += [heads * d, kv_heads * d, kv_heads * d]
    if o_bias:
        out.append(h)
    qk_norm = layout(model).qk_norm
    if qk_norm == "head":
        out += [d, d]
    elif qk_norm == "full":
        out += [heads * d, kv_heads * d]
    return tuple(out)


def _mlp(h: int, width: int, kind: Literal["gated", "plain"], bias: Bias) -> tuple[int, ...]:
    biased = bias in ("mlp", "all")
    matrices = (h * width,) * (3 if kind == "gated" else 2)
    biases = ((width,) * (2 if kind == "gated" else 1) + (h,)) if biased else ()
    return matrices + biases


def expert_width(model: Model) -> int | None:
    """One routed expert's MLP width: `expert_intermediate_size`, else `intermediate_size`."""
    return model.expert_intermediate_size or model.intermediate_size


def shape_missing(model: Model) -> list[str]:
    """The `model.*` keys the inventory needs and the recipe (or its config) does not give."""
    missing = [f"model.{key}" for key in ("hidden_size", "layers", "heads", "vocab")
               if getattr(model, key) is None]
    dense = not model.experts or model.dense_layers > 0
    if model.intermediate_size is None and (dense or model.expert_intermediate_size is None):
        missing.append("model.intermediate_size")
    if model.experts and model.experts_per_token is None:
        missing.append("model.experts_per_token")
    if model.kv_lora_rank is not None and model.rope_head_dim is None:
        missing.append("model.rope_head_dim")
    return missing


def active_params(model: Model) -> int | None:
    """Parameters one token's forward uses: Ψ for a dense model; for a mixture of experts,
    Ψ less the routed experts a token does not visit, (1 − k/E) of them (the router and the
    shared experts stay). What FLOPs count; memory counts every parameter. None when the
    experts' share is unknown (an incomplete shape)."""
    if not model.experts:
        return model.params
    inv = inventory(model)
    if inv is None or model.params is None or model.experts_per_token is None:
        return None
    return round(model.params - inv.routed * (1 - model.experts_per_token / model.experts))


def mlp_width(model: Model) -> int | None:
    """The MLP width one token passes through, averaged over the layers: `intermediate_size`
    for a dense model; k routed experts plus the shared ones in a mixture-of-experts layer
    (what its activations hold per token)."""
    if not model.experts:
        return model.intermediate_size
    width, layers = expert_width(model), model.layers
    if width is None or layers is None or model.experts_per_token is None:
        return None
    sparse = model.experts_per_token * width + model.shared_experts * (model.shared_expert_size or width)
    dense = model.intermediate_size or 0
    return (model.dense_layers * dense + (layers - model.dense_layers) * sparse) // layers


def kv_width(hidden: int, heads: int, kv_heads: int | None, head_dim: int | None = None) -> int:
    """Width of the K (and V) projection: kv heads (every head without GQA) × head dim."""
    return (kv_heads or heads) * (head_dim or hidden // heads)
