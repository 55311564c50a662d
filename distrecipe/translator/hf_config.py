"""A Hugging Face `config.json` → the recipe's model fields, family by family, with provenance.

transformers builds each family from its own keys: GPT-2 names the width `n_embd`,
Mixtral its experts `num_local_experts`, Qwen-MoE `num_experts`, DeepSeek
`n_routed_experts`; Gemma's and Qwen3's head is 256 and 128 wide whatever the hidden
size; a key the file leaves out takes the config class's default (Mistral's 8 KV heads,
Gemma's tied embeddings). This module reads every key that changes a family's tensors
(`distrecipe.model_shapes.LAYOUTS`) as transformers 5.10's config classes and modelling
code read them (`tests/translator/test_hf_config.py` checks each default against the
class, and each count against the model built on the meta device), and records for each
value where it came from. A config it cannot read is refused naming the keys: an unknown
`model_type`, a shape key missing or not a positive integer, a layout transformers and
the checkpoint's own code disagree on. Nothing is guessed.

A multimodal config keeps the language model under `text_config`; that is what is read,
and the provenance of `model.params` says the other towers are not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distrecipe.recipe import Bias, Family

HEADS = object()
"""A default that is the config's attention heads (`num_key_value_heads` → MHA)."""
HEAD_WIDTH = object()
"""A default that is hidden_size // num_attention_heads."""

FAMILY_OF_TYPE: dict[str, Family] = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2",
    "qwen2_moe": "qwen2_moe", "qwen3": "qwen3", "qwen3_moe": "qwen3_moe", "gemma": "gemma",
    "gemma2": "gemma2", "gemma3_text": "gemma3_text", "phi3": "phi3", "olmo2": "olmo2",
    "granite": "granite", "deepseek_v2": "deepseek_v2", "deepseek_v3": "deepseek_v3",
    "gpt2": "gpt2", "gpt_neox": "gpt_neox", "falcon": "falcon", "bloom": "bloom",
    "RefinedWeb": "falcon", "RefinedWebModel": "falcon",  # Falcon's remote-code configs
}
"""`model_type` → family."""

FAMILY_OF_ARCHITECTURE: dict[str, Family] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text", "Phi3ForCausalLM": "phi3", "Olmo2ForCausalLM": "olmo2",
    "GraniteForCausalLM": "granite", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3", "GPT2LMHeadModel": "gpt2", "GPTNeoXForCausalLM": "gpt_neox",
    "FalconForCausalLM": "falcon", "RWForCausalLM": "falcon", "BloomForCausalLM": "bloom",
}
"""`architectures[0]` → family, for a config without `model_type`."""

CONFIG_CLASS: dict[Family, str] = {
    "llama": "LlamaConfig", "mistral": "MistralConfig", "mixtral": "MixtralConfig", "qwen2": "Qwen2Config",
    "qwen2_moe": "Qwen2MoeConfig", "qwen3": "Qwen3Config", "qwen3_moe": "Qwen3MoeConfig",
    "gemma": "GemmaConfig", "gemma2": "Gemma2Config", "gemma3_text": "Gemma3TextConfig", "phi3": "Phi3Config",
    "olmo2": "Olmo2Config", "granite": "GraniteConfig", "deepseek_v2": "DeepseekV2Config",
    "deepseek_v3": "DeepseekV3Config", "gpt2": "GPT2Config", "gpt_neox": "GPTNeoXConfig",
    "falcon": "FalconConfig", "bloom": "BloomConfig",
}
"""The transformers class whose defaults apply to a key the file leaves out."""

KV_HEADS: dict[Family, object] = {
    "mistral": 8, "mixtral": 8, "qwen2": 32, "qwen3": 32, "qwen2_moe": 16, "qwen3_moe": 4, "gemma": 16,
    "gemma2": 4, "gemma3_text": 4,
}
"""`num_key_value_heads` where the class fixes a number; every other family: the heads (MHA)."""
HEAD_DIM: dict[Family, object] = {"qwen3": 128, "gemma": 256, "gemma2": 256, "gemma3_text": 256}
"""`head_dim` where the class fixes a number; every other family: hidden // heads."""
TIED: dict[Family, bool] = {"gemma": True, "gemma2": True, "gemma3_text": True, "gpt2": True, "falcon": True,
                            "bloom": True}
"""`tie_word_embeddings` by class default; every other family: untied."""
MOE_DEFAULTS: dict[Family, dict[str, object]] = {
    "qwen2_moe": {"decoder_sparse_step": 1, "mlp_only_layers": [], "qkv_bias": True},
    "qwen3_moe": {"decoder_sparse_step": 1, "mlp_only_layers": []},
    "deepseek_v2": {"n_shared_experts": 2, "first_k_dense_replace": 0, "q_lora_rank": 1536,
                    "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128},
    "deepseek_v3": {"n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536,
                    "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128},
}
"""The class defaults of the layout keys a mixture-of-experts family reads."""
EXPERTS_KEYS: dict[Family, tuple[str, ...]] = {
    "mixtral": ("num_local_experts", "num_experts"), "qwen2_moe": ("num_experts",),
    "qwen3_moe": ("num_experts", "num_local_experts"), "deepseek_v2": ("n_routed_experts",),
    "deepseek_v3": ("n_routed_experts", "num_local_experts"),
}
"""The routed-expert count's key, then the class's `attribute_map` aliases for it: a config
transformers 5 saved names Qwen3-MoE's `num_local_experts` (held-out data showed it)."""
ATTENTION_BIAS = frozenset({"llama", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "olmo2",
                            "granite", "deepseek_v2", "deepseek_v3"})
"""Families whose attention has a bias when `attention_bias` says so."""
MLP_BIAS = frozenset({"llama", "granite", "deepseek_v2"})
"""Families whose MLP has a bias when `mlp_bias` says so."""


class Unreadable(ValueError):
    """A config distrecipe refuses; the message names the keys."""


@dataclass(slots=True)
class Read:
    """The model fields a config gives, and for each where it came from."""

    family: Family
    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    """`model.<field>` → provenance."""


def family_of(data: dict[str, Any]) -> tuple[Family, str]:
    """The config's family and the key that says so."""
    model_type = data.get("model_type")
    if model_type is not None:
        if isinstance(model_type, str) and model_type in FAMILY_OF_TYPE:
            return FAMILY_OF_TYPE[model_type], f"model_type {model_type}"
        raise Unreadable(f"model_type {_shown(model_type)} is not a decoder family distrecipe reads "
                         f"({', '.join(sorted(set(FAMILY_OF_TYPE.values())))}); write the model's shape in "
                         "the recipe (model.params, hidden_size, layers, heads, intermediate_size, vocab)")
    archs = data.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else None
    if isinstance(arch, str) and arch in FAMILY_OF_ARCHITECTURE:
        return FAMILY_OF_ARCHITECTURE[arch], f"architectures[0] {arch}"
    raise Unreadable("it names no model_type (nor an architectures[0] distrecipe knows), so its family, "
                     "and which keys give its shape, is unknown; add model_type, or write the shape in "
                     "the recipe")


def read(data: dict[str, Any], name: str) -> Read:
    """The model fields of config `data` (already `text_config`-merged), named `name` in provenance."""
    family, said = family_of(data)
    reader = _Reader(data, name, family)
    reader.origin["model.family"] = f"model.hf_config {name}: {said}"
    READERS.get(family, _decoder)(reader)
    reader.finish()
    return Read(family, reader.values, reader.origin)


class _Reader:
    def __init__(self, data: dict[str, Any], name: str, family: Family) -> None:
        self.data, self.name, self.family, self.cls = data, name, family, CONFIG_CLASS[family]
        self.values: dict[str, Any] = {"family": family}
        self.origin: dict[str, str] = {}
        self.missing: list[str] = []
        self.wrong: list[str] = []

    def say(self, field_name: str, value: Any, how: str) -> None:
        self.values[field_name] = value
        self.origin[f"model.{field_name}"] = f"model.hf_config {self.name}: {how}"

    def present(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, *, least: int = 1) -> int | None:
        """`key`'s value as an integer ≥ `least`; a wrong one is noted (refused at `finish`)."""
        value = self.data.get(key)
        if type(value) is int and value >= least:
            return value
        if value is not None:
            self.wrong.append(f"{key} is {_shown(value)}, not an integer ≥ {least}")
        return None

    def required(self, field_name: str, *keys: str) -> int | None:
        """The first of `keys` the file has (aliases: `n_embd` before `hidden_size` in GPT-2)."""
        for key in keys:
            if self.present(key):
                value = self.integer(key)
                if value is not None:
                    self.say(field_name, value, key)
                return value
        self.missing.append(keys[0])
        return None

    def default(self, key: str, default: object, *, least: int = 1) -> tuple[Any, str]:
        """`key`'s value, or the class's default, and the provenance either way."""
        if self.present(key):
            value = self.data[key]
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    self.wrong.append(f"{key} is {_shown(value)}, not true or false")
                return value is True, key
            if isinstance(default, list):
                if not (isinstance(value, list) and all(type(v) is int for v in value)):
                    self.wrong.append(f"{key} is {_shown(value)}, not a list of layer indices")
                    return [], key
                return value, key
            return self.integer(key, least=least), key
        shown = "null" if default is None else default
        return default, f"no {key}, {self.cls}'s default {_shown(shown)}"

    def flag(self, key: str, default: bool) -> bool:
        value, _ = self.default(key, default)
        return bool(value)

    def finish(self) -> None:
        if self.missing or self.wrong:
            problems = ([f"it has no {', '.join(self.missing)}"] if self.missing else []) + self.wrong
            raise Unreadable(f"({self.family}) {'; '.join(problems)}: distrecipe reads a {self.family} "
                             f"config's shape from these keys; fix the file or write the shape in the recipe")


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def _shape(r: _Reader) -> tuple[int | None, int | None]:
    """hidden, heads, layers, vocab; (hidden, heads) for what depends on them."""
    hidden = r.required("hidden_size", "hidden_size")
    r.required("layers", "num_hidden_layers")
    heads = r.required("heads", "num_attention_heads")
    r.required("vocab", "vocab_size")
    return hidden, heads


def _tied(r: _Reader) -> None:
    value, how = r.default("tie_word_embeddings", TIED.get(r.family, False))
    r.say("tied_embeddings", bool(value), how)


def _kv_heads(r: _Reader, heads: int | None) -> None:
    default = KV_HEADS.get(r.family, HEADS)
    if r.present("num_key_value_heads") or default is not HEADS:
        value, how = r.default("num_key_value_heads", default)
        if value is not None:
            r.say("kv_heads", value, how)
    elif heads is not None:
        r.say("kv_heads", heads, f"no num_key_value_heads: {r.cls} takes the heads ({heads})")


def _head_dim(r: _Reader, hidden: int | None, heads: int | None) -> None:
    default = HEAD_DIM.get(r.family, HEAD_WIDTH)
    if r.present("head_dim"):
        r.say("head_dim", r.integer("head_dim"), "head_dim")
    elif default is not HEAD_WIDTH:
        r.say("head_dim", default, f"no head_dim, {r.cls}'s default {default}")
    elif hidden is not None and heads is not None and hidden % heads:
        r.wrong.append(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads} and there is "
                       "no head_dim")


def _bias(r: _Reader, attention: bool, mlp: bool, keys: str) -> None:
    bias: Bias = "all" if attention and mlp else "attention" if attention else "mlp" if mlp else "none"
    r.say("bias", bias, keys)


def _biases(r: _Reader) -> None:
    keys = [k for k, fams in (("attention_bias", ATTENTION_BIAS), ("mlp_bias", MLP_BIAS))
            if r.family in fams and r.present(k)]
    if keys:
        _bias(r, r.flag("attention_bias", False) and r.family in ATTENTION_BIAS,
              r.flag("mlp_bias", False) and r.family in MLP_BIAS, ", ".join(keys))


def _decoder(r: _Reader) -> None:
    """Llama and the families that share its keys (Mistral, Qwen, Gemma, Phi-3, OLMo 2, Granite)."""
    hidden, heads = _shape(r)
    _kv_heads(r, heads)
    _head_dim(r, hidden, heads)
    _tied(r)
    _biases(r)
    if r.family in EXPERTS_KEYS:
        _experts(r)
    else:
        r.required("intermediate_size", "intermediate_size")


def _experts(r: _Reader) -> None:
    keys = EXPERTS_KEYS[r.family]
    key = next((k for k in keys if r.present(k)), keys[0])
    experts = r.integer(key, least=0) if r.present(key) else None
    if experts is None and not r.present(key):
        r.missing.append(" or ".join(keys))
    if r.present("intermediate_size"):
        r.required("intermediate_size", "intermediate_size")
    if experts == 0:  # Qwen-MoE with num_experts 0 builds every layer dense
        r.required("intermediate_size", "intermediate_size")
        return
    if experts is not None:
        r.say("experts", experts, key)
    r.required("experts_per_token", "num_experts_per_tok")
    if r.family == "mixtral":
        if "intermediate_size" in r.values:
            r.say("expert_intermediate_size", r.values["intermediate_size"],
                  "intermediate_size (Mixtral's experts)")
        else:
            r.missing.append("intermediate_size")
        return
    r.required("expert_intermediate_size", "moe_intermediate_size")
    if r.family in ("qwen2_moe", "qwen3_moe"):
        _qwen_sparse_layers(r)
    if r.family == "qwen2_moe":
        if r.present("qkv_bias") and not r.flag("qkv_bias", True):
            _bias(r, False, False, "qkv_bias false")
        width = r.integer("shared_expert_intermediate_size") if r.present("shared_expert_intermediate_size") \
            else 5632
        how = ("shared_expert_intermediate_size" if r.present("shared_expert_intermediate_size")
               else "no shared_expert_intermediate_size, Qwen2MoeConfig's default 5632")
        r.say("shared_experts", 1, "Qwen2MoeSparseMoeBlock's one shared expert")
        r.say("shared_expert_size", width, how)


def _qwen_sparse_layers(r: _Reader) -> None:
    """Layer i is sparse unless it is in `mlp_only_layers` or (i + 1) % `decoder_sparse_step` ≠ 0."""
    defaults = MOE_DEFAULTS[r.family]
    step, step_how = r.default("decoder_sparse_step", defaults["decoder_sparse_step"])
    only, only_how = r.default("mlp_only_layers", defaults["mlp_only_layers"])
    layers = r.values.get("layers")
    if not isinstance(step, int) or layers is None:
        return
    dense = sum(1 for i in range(layers) if i in only or (i + 1) % step)
    r.say("dense_layers", dense, f"{step_how}, {only_how}: {dense} of {layers} layers dense")
    if dense and "intermediate_size" not in r.values:
        r.missing.append("intermediate_size")


def _deepseek(r: _Reader) -> None:
    """DeepSeek-V2/V3: multi-latent attention, routed + shared experts after the first k layers."""
    _shape(r)
    _tied(r)
    _biases(r)
    d = MOE_DEFAULTS[r.family]
    r.required("intermediate_size", "intermediate_size")
    r.required("experts", *EXPERTS_KEYS[r.family])
    r.required("experts_per_token", "num_experts_per_tok")
    r.required("expert_intermediate_size", "moe_intermediate_size")
    shared, how = r.default("n_shared_experts", d["n_shared_experts"], least=0)
    if shared is not None:
        r.say("shared_experts", shared, how)
    first, how = r.default("first_k_dense_replace", d["first_k_dense_replace"], least=0)
    layers = r.values.get("layers")
    if first is not None and layers is not None:
        r.say("dense_layers", min(first, layers), how)
    if r.present("moe_layer_freq") and r.data["moe_layer_freq"] != 1:
        r.wrong.append(f"moe_layer_freq is {_shown(r.data['moe_layer_freq'])}: DeepSeek's own code puts "
                       "experts in every that-many layers, transformers in every layer after "
                       "first_k_dense_replace")
    if r.present("q_lora_rank") or "q_lora_rank" not in r.data:
        rank, how = r.default("q_lora_rank", d["q_lora_rank"])
        if rank is not None:
            r.say("q_lora_rank", rank, how)
    else:
        r.origin["model.q_lora_rank"] = f"model.hf_config {r.name}: q_lora_rank null (queries at full rank)"
    for ours, theirs in (("kv_lora_rank", "kv_lora_rank"), ("rope_head_dim", "qk_rope_head_dim"),
                         ("v_head_dim", "v_head_dim")):
        value, how = r.default(theirs, d[theirs])
        if value is not None:
            r.say(ours, value, how)
    nope, how = r.default("qk_nope_head_dim", d["qk_nope_head_dim"])
    rope = r.values.get("rope_head_dim")
    if nope is not None and rope is not None:
        r.say("head_dim", nope + rope, f"qk_nope_head_dim + qk_rope_head_dim = {nope} + {rope}")


def _gpt2(r: _Reader) -> None:
    hidden = r.required("hidden_size", "n_embd", "hidden_size")
    r.required("layers", "n_layer", "num_hidden_layers")
    r.required("heads", "n_head", "num_attention_heads")
    r.required("vocab", "vocab_size")
    if r.present("n_inner"):
        r.required("intermediate_size", "n_inner")
    elif hidden is not None:
        r.say("intermediate_size", 4 * hidden, f"4 × n_embd = 4 × {hidden} (n_inner null: GPT2Block's MLP)")
    positions, how = r.default("n_positions", 1024)
    if positions is not None:
        r.say("position_embeddings", positions, how)
    _tied(r)


def _gpt_neox(r: _Reader) -> None:
    _shape(r)
    r.required("intermediate_size", "intermediate_size")
    _tied(r)
    attention, how = r.default("attention_bias", True)
    _bias(r, bool(attention), True, f"{how}; GPTNeoXMLP's layers always have a bias")


def _falcon(r: _Reader) -> None:
    hidden = r.required("hidden_size", "hidden_size", "n_embed")
    r.required("layers", "num_hidden_layers", "n_layer")
    heads = r.required("heads", "num_attention_heads", "n_head")
    r.required("vocab", "vocab_size")
    new, _ = r.default("new_decoder_architecture", False)
    multi_query, _ = r.default("multi_query", True)
    parallel, _ = r.default("parallel_attn", True)
    if new:
        kv_key = "num_kv_heads" if r.present("num_kv_heads") or not r.present("n_head_kv") else "n_head_kv"
        if r.present(kv_key):
            r.required("kv_heads", kv_key)
        elif heads is not None:
            r.say("kv_heads", heads, "no num_kv_heads: FalconConfig takes the heads")
    elif multi_query:
        r.say("kv_heads", 1, "multi_query true (one key/value head)")
    elif heads is not None:
        r.say("kv_heads", heads, "multi_query false, new_decoder_architecture false (multi-head)")
    if r.present("ffn_hidden_size"):
        r.required("intermediate_size", "ffn_hidden_size")
    elif hidden is not None:
        r.say("intermediate_size", 4 * hidden,
              f"no ffn_hidden_size: FalconConfig's 4 × hidden_size = {4 * hidden}")
    lns, _ = r.default("num_ln_in_parallel_attn", None)
    two = not parallel or lns == 2 or (lns is None and new)
    r.say("block_norms", 2 if two else 1, "parallel_attn, new_decoder_architecture, num_ln_in_parallel_attn "
          f"({'two LayerNorms' if two else 'one LayerNorm'} per block, as FalconDecoderLayer builds)")
    if r.flag("bias", False):
        _bias(r, True, True, "bias true")
    _tied(r)


def _bloom(r: _Reader) -> None:
    """BLOOM: BloomConfig's own keys (`n_embed` before `hidden_size`, as its __post_init__;
    `num_hidden_layers` / `num_attention_heads` before `n_layer` / `n_head`, as its
    attribute_map). Every layer has a bias, the MLP is 4 × hidden wide and attention is
    multi-head, whatever the file says: a width key that says otherwise is refused, not dropped."""
    hidden = r.required("hidden_size", "n_embed", "hidden_size")
    r.required("layers", "num_hidden_layers", "n_layer")
    heads = r.required("heads", "num_attention_heads", "n_head")
    r.required("vocab", "vocab_size")
    if hidden is not None and heads is not None and hidden % heads:
        r.wrong.append(f"hidden_size {hidden} is not a multiple of n_head {heads} "
                       "(BloomAttention refuses it)")
    width = 4 * hidden if hidden is not None else None
    if width is not None:
        r.say("intermediate_size", width, f"BloomMLP's 4 × hidden_size = {width} (no width key)")
    built = {"n_inner": (width, "BloomMLP is 4 × hidden_size wide"),
             "intermediate_size": (width, "BloomMLP is 4 × hidden_size wide"),
             "num_key_value_heads": (heads, "BloomAttention has a key/value head per head")}
    for key, (value, what) in built.items():
        if r.present(key) and value is not None and r.data[key] != value:
            r.wrong.append(f"{key} is {_shown(r.data[key])}, but {what} ({value}) and transformers "
                           f"reads no {key}")
    _bias(r, True, True, "BloomAttention's and BloomMLP's layers always have a bias")
    _tied(r)


READERS: dict[Family, Callable[[_Reader], None]] = {
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gpt2": _gpt2, "gpt_neox": _gpt_neox,
    "falcon": _falcon, "bloom": _bloom,
}
"""Families read by their own function; the rest by `_decoder`."""
