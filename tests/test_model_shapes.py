"""The tensor inventory per family: what the count, memory and FLOPs read.

The counts themselves are checked against the models transformers builds
(`tests/translator/test_hf_config.py`); here, what the plan takes from them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from distrecipe.errors import RecipeError
from distrecipe.model_shapes import active_params, inventory, mlp_width, shape_missing
from distrecipe.plan.memory import held_params, plan_model_state
from distrecipe.plan.report import estimate
from distrecipe.plan.steptime import model_flops_per_token
from distrecipe.recipe import Model
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve

MIXTRAL = Model(hidden_size=4096, layers=32, heads=32, kv_heads=8, intermediate_size=14336, vocab=32000,
                family="mixtral", experts=8, experts_per_token=2)
"""Mixtral-8x7B's shape: 46.7B parameters, 12.9B active (the meta-device model's)."""


def moe_plan(expert: int = 1, strategy: str = "megatron", gpu: str = "h100") -> object:
    text = f"""recipe: 1
model: {{hidden_size: 4096, layers: 32, heads: 32, kv_heads: 8, intermediate_size: 14336, vocab: 32000,
        family: mixtral, experts: 8, experts_per_token: 2}}
cluster: {{nodes: 1, gpus_per_node: 8, gpu: {gpu}}}
strategy: {strategy}
parallel: {{expert: {expert}}}
batch: {{micro: 1, accumulation: 4, global: 32, seq_len: 4096}}
activation_checkpointing: full
"""
    return resolve(recipe_from_text(text, "moe.yaml"))


def test_a_mixture_of_experts_counts_every_expert_and_activates_k() -> None:
    found = inventory(MIXTRAL)
    assert found is not None
    assert found.params == 46_702_792_704
    params = replace(MIXTRAL, params=found.params)
    assert active_params(params) == 12_879_925_248
    assert found.routed == 32 * 8 * 3 * 4096 * 14336
    assert mlp_width(MIXTRAL) == 2 * 14336  # a token passes through two experts


def test_memory_counts_every_parameter_flops_the_active_ones() -> None:
    plan = moe_plan()
    assert plan.recipe.model.params == 46_702_792_704  # type: ignore[attr-defined]
    flops = model_flops_per_token(plan)  # type: ignore[arg-type]
    assert flops == 6 * (12_879_925_248 - 32000 * 4096) + 12 * 32 * 4096 * 4096
    state = plan_model_state(plan)  # type: ignore[arg-type]
    assert state.gpu["parameters"] == 2 * 46_702_792_704  # Megatron's 6Ψ + 12Ψ/N covers every expert


def test_expert_parallelism_divides_the_routed_experts_not_the_sharded_state() -> None:
    whole, split = moe_plan(1), moe_plan(4)
    routed = 32 * 8 * 3 * 4096 * 14336
    assert held_params(split) == pytest.approx(46_702_792_704 - routed * 3 / 4)  # type: ignore[arg-type]
    a, b = plan_model_state(whole), plan_model_state(split)  # type: ignore[arg-type]
    assert b.gpu["parameters"] == pytest.approx(2 * held_params(split))  # type: ignore[arg-type]
    assert b.gpu["optimizer"] == a.gpu["optimizer"]  # 12Ψ/N either way: each rank's experts over N/ep
    assert estimate(split).need < estimate(whole).need  # type: ignore[arg-type]


def test_engine_views_that_do_not_model_expert_parallelism_say_so() -> None:
    est = estimate(moe_plan(2, strategy="zero"))  # type: ignore[arg-type]
    assert any("expert parallelism (2) is not modelled in this engine view" in n for n in est.engine.notes)


@pytest.mark.parametrize(("changes", "message"), [
    ({"parallel": "{expert: 3}"}, "parallel.expert 3 must divide model.experts 8; valid: 1, 2, 4, 8"),
    ({"parallel": "{expert: 16}"}, "parallel.expert 16 must divide model.experts 8"),
    ({"experts": ""}, "parallel.expert 2 divides a mixture of experts, but model.experts is not set"),
])
def test_expert_parallel_degree_is_checked(changes: dict[str, str], message: str) -> None:
    text = """recipe: 1
model: {hidden_size: 64, layers: 2, heads: 4, intermediate_size: 128, vocab: 256, experts: 8,
        experts_per_token: 2}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: zero
parallel: {expert: 2}
batch: {micro: 1, accumulation: 1, global: 8}
"""
    if "parallel" in changes:
        text = text.replace("parallel: {expert: 2}", f"parallel: {changes['parallel']}")
    if "experts" in changes:
        text = text.replace(", experts: 8,\n        experts_per_token: 2", "")
    with pytest.raises(RecipeError, match=message):
        resolve(recipe_from_text(text, "r.yaml"))


def test_ddp_cannot_divide_experts_and_stray_moe_keys_are_refused() -> None:
    text = """recipe: 1
model: {hidden_size: 64, layers: 2, heads: 4, intermediate_size: 128, vocab: 256, experts: 8, experts_per_token: 2}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: ddp
parallel: {expert: 2}
batch: {micro: 1, accumulation: 1, global: 8}
"""
    with pytest.raises(RecipeError, match="DDP keeps a whole copy of every expert"):
        resolve(recipe_from_text(text, "r.yaml"))
    stray = text.replace("experts: 8, experts_per_token: 2", "experts_per_token: 2").replace(
        "parallel: {expert: 2}\n", "")
    with pytest.raises(RecipeError, match=r"model\.experts_per_token describes a mixture of experts, but "
                                          r"model\.experts is not set"):
        resolve(recipe_from_text(stray, "r.yaml"))


def test_an_incomplete_moe_shape_has_no_active_count_and_no_step_time() -> None:
    model = Model(params=10**9, experts=8, experts_per_token=2, hidden_size=64)
    assert active_params(model) is None
    assert "model.layers" in shape_missing(model)
    assert active_params(Model(params=10**9)) == 10**9  # dense: Ψ


def test_every_family_s_small_tensors_are_in_the_blocks() -> None:
    base = Model(hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128, vocab=256)
    llama = inventory(base)
    gpt2 = inventory(replace(base, family="gpt2", kv_heads=None, position_embeddings=1024, tied_embeddings=True))
    qwen3 = inventory(replace(base, family="qwen3"))
    assert llama is not None and gpt2 is not None and qwen3 is not None
    assert qwen3.block_params == llama.block_params + 2 * 16  # q_norm, k_norm of one head
    # GPT-2: c_attn 3h² + 3h, c_proj h² + h, c_fc/c_proj 2·h·i + i + h, two LayerNorms (4h)
    assert gpt2.block_params == 4 * 64 * 64 + 4 * 64 + 2 * 64 * 128 + 128 + 64 + 4 * 64
    assert gpt2.outer == (256 * 64, 1024 * 64, 2 * 64)
    assert gpt2.tensors()[0] == 256 * 64 and len(gpt2.tensors()) == 3 + 2 * len(gpt2.block)


def test_only_bloom_has_an_embedding_norm_and_it_follows_the_embedding() -> None:
    """BLOOM's word_embeddings_layernorm (weight and bias, 2h) is an outer tensor, second in
    model order (ZeRO-3's sub-groups take tensors in that order); no other family has one."""
    from distrecipe.model_shapes import LAYOUTS, embedding_norm

    base = Model(hidden_size=64, layers=2, heads=4, intermediate_size=256, vocab=256, tied_embeddings=True)
    bloom = inventory(replace(base, family="bloom"))
    gpt_neox = inventory(replace(base, family="gpt_neox"))  # the same block without the embedding norm
    assert bloom is not None and gpt_neox is not None
    assert bloom.outer == (256 * 64, 2 * 64, 2 * 64) and bloom.leading == 2
    assert bloom.params == gpt_neox.params + 2 * 64 and bloom.block == gpt_neox.block
    tensors = bloom.tensors()
    assert tensors[:2] == [256 * 64, 2 * 64] and tensors[-1] == 2 * 64 and sum(tensors) == bloom.params
    assert [family for family, fam in LAYOUTS.items() if fam.embedding_norm] == ["bloom"]
    assert embedding_norm(replace(base, family="bloom")) and not embedding_norm(base)
