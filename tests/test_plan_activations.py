"""Activation formulas: the seed's numbers, and the measured one against a real HF Llama.

The Hugging Face formula `plan` uses for its verdict is checked here the way it was
found: a forward pass of a random bf16 Llama under `saved_tensors_hooks`, summing each
saved storage once, plus the 16-bit logits the caller holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.job import Plan
from distrecipe.plan.activations import (
    hf_llama,
    korthikanti,
    pipeline_in_flight,
    plan_activations,
    ring_attention,
    ring_context_parallel,
)
from tests.conftest import RECIPES

SHAPE = {"h": 256, "a": 4, "kv": 128, "inter": 688, "layers": 2, "vocab": 1024}


def test_recompute_and_flash_variants_order() -> None:
    args = {"s": 4096, "b": 1, "h": 4096, "a": 32, "layers": 32, "vocab": 128256}
    eager = korthikanti(**args, flash=False, recompute="none")
    flash = korthikanti(**args, flash=True, recompute="none")
    selective = korthikanti(**args, flash=False, recompute="selective")
    full = korthikanti(**args, flash=True, recompute="full")
    assert full.layers < flash.layers == selective.layers < eager.layers
    assert flash.layers == 34 * 4096 * 4096 * 32
    assert full.layers == 2 * 4096 * 4096 * 32
    half = korthikanti(**args, flash=True, recompute="none", tensor=2)
    assert half.layers == flash.layers / 2


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_hf_formula_matches_saved_tensors(attention: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    s, b = 128, 2
    config = transformers.LlamaConfig(
        hidden_size=SHAPE["h"], num_attention_heads=SHAPE["a"],
        num_key_value_heads=SHAPE["a"] * SHAPE["kv"] // SHAPE["h"],
        intermediate_size=SHAPE["inter"], num_hidden_layers=SHAPE["layers"],
        vocab_size=SHAPE["vocab"], max_position_embeddings=s, attn_implementation=attention,
        tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    ids = torch.randint(0, SHAPE["vocab"], (b, s))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    measured = sum(saved.values()) + out.logits.untyped_storage().nbytes() * (
        out.logits.untyped_storage().data_ptr() not in saved)
    formula = hf_llama(s=s, b=b, flash=attention != "eager", recompute="none", **SHAPE)
    print(f"{attention}: measured {measured} B, formula {formula.total:.0f} B, "
          f"error {formula.total / measured - 1:+.2%}")
    assert formula.total == pytest.approx(measured, rel=0.03)


def test_checkpointing_modes_order_and_the_recipe_forms() -> None:
    """Llama 3.1 8B, micro 2 × 8192: full < op-level selective < every 2nd layer < none."""
    from distrecipe.errors import RecipeError
    from distrecipe.plan.activations import plan_activations
    from distrecipe.translator.load import recipe_from_text
    from distrecipe.translator.resolve import resolve

    base = ("recipe: 1\nmodel: {params: 8.03e9, hidden_size: 4096, layers: 32, heads: 32, "
            "kv_heads: 8, intermediate_size: 14336, vocab: 128256}\n"
            "cluster: {nodes: 1, gpus_per_node: 8, gpu_memory: 95GiB}\nstrategy: fsdp\n"
            "batch: {micro: 2, global: 16, seq_len: 8192}\nactivation_checkpointing: ")
    saved = {}
    for form in ("full", "selective", "{mode: selective, every: 2}", "none"):
        plan = resolve(recipe_from_text(base + form + "\n"))
        saved[form] = plan_activations(plan)[0].layers
    assert list(saved.values()) == sorted(saved.values())
    assert saved["selective"] == 32 * (2 * 16384 * (4 * 4096 + 1024 + 14336) + 4 * 32 * 16384)
    with pytest.raises(RecipeError, match="does not go with mode full"):
        recipe_from_text(base + "{mode: full, every: 2}\n")


def _plan_with(**sets: object) -> Plan:
    return load_plan(RECIPES / "seed-8b-32gpu-zero2.yaml", tuple(f"{k}={v}" for k, v in sets.items()))


def test_sequence_parallel_divides_tokens_and_ring_attention_adds_its_buffers() -> None:
    """cp ranks each hold s/cp tokens: Ulysses (DeepSpeed) saves exactly what s/cp tokens
    save; torch's ring attention (FSDP2 under torchrun) saves the same and holds the
    gathered K/V and its fp32 backward buffers in one layer's attention."""
    whole = plan_activations(_plan_with(**{"batch.seq_len": 2048}))[0]
    ulysses = plan_activations(_plan_with(**{"parallel.sequence": 4}))[0]
    assert ulysses.total == pytest.approx(whole.total) and ulysses.peak == pytest.approx(whole.peak)
    ring = _plan_with(**{"parallel.sequence": 4, "strategy": "fsdp", "activation_checkpointing": "full"})
    assert ring_context_parallel(ring)
    split = plan_activations(ring)[0]
    short = plan_activations(_plan_with(**{"batch.seq_len": 2048, "strategy": "fsdp",
                                           "activation_checkpointing": "full"}))[0]
    assert split.total == pytest.approx(short.total)
    assert ring_attention(s=8192, b=2, h=4096, cp=4) == 4 * 8192 * 2 * 4096 + 34 * 2048 * 2 * 4096
    assert split.peak >= short.peak


def test_first_pipeline_stage_holds_min_p_m_micro_batches() -> None:
    """1F1B: the first stage keeps min(p, m) micro-batches of L/p layers (no head); here,
    without checkpointing, it is the stage with the highest peak."""
    base = {"strategy": "fsdp", "activation_checkpointing": "none", "batch.micro": 2}
    plan = _plan_with(**base, **{"parallel.pipeline": 4, "batch.accumulation": 16})
    assert pipeline_in_flight(plan) == 4
    assert pipeline_in_flight(_plan_with(**{**base, "parallel.pipeline": 4, "batch.micro": 16,
                                            "batch.accumulation": 2})) == 2
    whole = plan_activations(_plan_with(**base))[0]
    stage = plan_activations(plan)[0]
    assert stage.head == 0 and stage.layers == pytest.approx(whole.layers / 36 * 9 * 4)


def test_megatron_gpt_block_is_korthikantis() -> None:
    """Korthikanti et al. 2022's per-layer terms: sbh·(34/t + 5as/(ht)) with sequence
    parallelism, sbh·(10 + 24/t + 5as/(ht)) without, 34·sbh/t under selective (core
    attention) recompute, 2·sbh/t per layer under full recompute."""
    from distrecipe.plan.activations import megatron, megatron_layer

    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    core = 5 * a * s / h
    sp = megatron_layer(s=s, b=b, h=h, a=a, kv=h, inter=None, t=t, sequence_parallel=True, flash=False)
    assert sp == pytest.approx(sbh * (34 / t + core / t))
    plain = megatron_layer(s=s, b=b, h=h, a=a, kv=h, inter=None, t=t, sequence_parallel=False, flash=False)
    assert plain == pytest.approx(sbh * (10 + 24 / t + core / t))
    kwargs: dict[str, Any] = {"s": s, "b": b, "h": h, "a": a, "kv": h, "inter": None, "layers": 10,
                              "vocab": 51200, "flash": False, "tensor": t, "sequence_parallel": True}
    assert megatron(**kwargs, recompute="selective").layers == pytest.approx(10 * 34 * sbh / t)
    full = megatron(**kwargs, recompute="full")
    assert full.layers == pytest.approx(10 * 2 * sbh / t) and full.backward == pytest.approx(sp)


def test_megatron_keeps_less_than_hugging_faces_llama() -> None:
    """Transformer Engine's layers save sbh·(12 + 4·h_kv/h + 6·i/h) per Llama block (no
    dropout), where Hugging Face's Llama saves sbh·(20 + 4·h_kv/h + 8·i/h)."""
    from distrecipe.plan.activations import llama_layer, megatron_layer

    s, b, h, a, kv, i = 4096, 1, 4096, 32, 1024, 14336
    mcore = megatron_layer(s=s, b=b, h=h, a=a, kv=kv, inter=i, t=1, sequence_parallel=True, flash=True)
    assert mcore == pytest.approx(s * b * h * (12 + 4 * kv / h + 6 * i / h) + 4 * a * s * b)
    assert mcore < llama_layer(s=s, b=b, h=h, a=a, kv=kv, inter=i, flash=True)


def test_cpu_held_checkpoints_leave_two_layers_on_the_gpu() -> None:
    full = _plan_with(**{"activation_checkpointing": "full"})
    held = _plan_with(**{"activation_checkpointing": "full", "offload.activations": "cpu"})
    layers = full.recipe.model.layers
    assert layers is not None
    assert plan_activations(held)[0].layers == pytest.approx(2 * plan_activations(full)[0].layers / layers)
