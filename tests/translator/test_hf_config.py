"""`model.hf_config` read family by family: transformers is the oracle, the meta device the judge.

`tests/corpus/hf_configs/` holds config.json files with their provenance (`PROVENANCE.csv`:
real files byte-for-byte, dicts vendored in a repository converted to JSON, and configs
reconstructed from class defaults, script arguments or quoted text, each labelled), split
into the configs the reader was developed on and a held-out set read only afterwards
(docs/plan.md, "Model families", reports both). `meta_params` and `meta_active` are what
transformers 5.10 builds from each file on the meta device; the fast tests compare
distrecipe's count with them, the slow ones rebuild the models (nothing is downloaded) and
check each config value and class default against transformers' own config classes.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrecipe.errors import RecipeError
from distrecipe.model_shapes import active_params, inventory
from distrecipe.recipe import Model
from distrecipe.translator import hf_config
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve
from tests.conftest import ROOT, Result

CORPUS = ROOT / "tests" / "corpus" / "hf_configs"
ROWS = list(csv.DictReader((CORPUS / "PROVENANCE.csv").open(encoding="utf-8")))
READ = [row for row in ROWS if json.loads((CORPUS / row["file"]).read_text()).get("model_type") != "olmo3"]
RECIPE = ("recipe: 1\nmodel: {{hf_config: {config}}}\ncluster: {{nodes: 1, gpus_per_node: 8}}\n"
          "strategy: fsdp\nbatch: {{micro: 1, global: 64, seq_len: 4096}}\n")


def model_of(tmp_path: Path, config: Path | dict[str, Any], name: str = "config.json") -> Model:
    """The model a recipe reading `config` gets."""
    target = tmp_path / name
    if isinstance(config, Path):
        shutil.copyfile(config, target)
    else:
        target.write_text(json.dumps(config), encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(config=name), encoding="utf-8")
    return load_recipe(recipe).model


def test_the_corpus_is_as_its_provenance_says() -> None:
    """Every file is listed once, in its class's folder, with a source; held-out ones apart."""
    listed = {row["file"] for row in ROWS}
    assert listed == {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.json")}
    for row in ROWS:
        folder = row["file"].split("/")[0]
        assert folder in {"real", "vendored", "reconstructed", "heldout"}, row["file"]
        assert row["repo"] and row["path"] and row["notes"], row["file"]
        if folder in ("real", "vendored"):
            assert len(row["commit"]) == 40, row["file"]
        assert row["split"] == ("held-out" if folder == "heldout" else "development"), row["file"]
        if "quoted" in row["file"] or folder == "reconstructed":
            assert row["class"].startswith("reconstructed"), row["file"]
    assert {row["family"] for row in ROWS if row["split"] == "development"} >= {
        "Llama 3.1", "Mistral", "Mixtral", "Qwen2", "Qwen2.5", "Qwen3", "Qwen2-MoE", "Qwen3-MoE", "DeepSeek-V2",
        "DeepSeek-V3", "Gemma", "Gemma 2", "Gemma 3 (text)", "Phi-3", "GPT-2", "GPT-NeoX", "Falcon", "OLMo 2",
        "Granite 3.x", "BLOOM"}


@pytest.mark.parametrize("row", READ, ids=[r["file"] for r in READ])
def test_the_count_is_the_meta_device_model(row: dict[str, str], tmp_path: Path) -> None:
    """Every parameter (memory's Ψ) and the active ones (FLOPs'), exactly."""
    model = model_of(tmp_path, CORPUS / row["file"])
    assert model.params == int(row["meta_params"])
    assert active_params(model) == int(row["meta_active"])
    found = inventory(model)
    assert found is not None and found.params == model.params  # one inventory for the count and memory


def test_a_family_it_does_not_read_is_refused_naming_it(tmp_path: Path) -> None:
    """OLMo 3 (held out) is not one of the families: refused, not read as a Llama."""
    with pytest.raises(RecipeError, match=r"config.json: model_type olmo3 is not a decoder family distrecipe "
                                          r"reads \(bloom, deepseek_v2, .*\); write the model's shape in the recipe"):
        model_of(tmp_path, CORPUS / "heldout" / "olmo-3.1-32b-instruct.json")


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 256}


def _refusal(tmp_path: Path, base: dict[str, Any], change: dict[str, Any]) -> RecipeError:
    """The refusal of `base` with `change` (a None value removes the key)."""
    config = {k: v for k, v in {**base, **change}.items() if v is not None}
    with pytest.raises(RecipeError) as caught:
        model_of(tmp_path, config)
    return caught.value


@pytest.mark.parametrize(("change", "message"), [
    ({"model_type": None}, "it names no model_type (nor an architectures[0] distrecipe knows)"),
    ({"hidden_size": None, "vocab_size": None}, "(llama) it has no hidden_size, vocab_size: distrecipe reads a "
                                                "llama config's shape from these keys"),
    ({"num_hidden_layers": "32"}, "num_hidden_layers is 32, not an integer ≥ 1"),
    ({"num_hidden_layers": True}, "num_hidden_layers is True, not an integer ≥ 1"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings is yes, not true or false"),
    ({"model_type": "mixtral"}, "(mixtral) it has no num_local_experts or num_experts, num_experts_per_tok"),
    ({"model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "moe_layer_freq": 2}, "moe_layer_freq is 2: DeepSeek's own code puts experts in every that-many layers"),
    ({"hidden_size": 2**40}, "model.hidden_size is 1.1e+12 (read from model.hf_config); it must be between 1"),
])
def test_what_it_cannot_read_is_refused_naming_the_keys(change: dict[str, Any], message: str,
                                                         tmp_path: Path) -> None:
    refused = _refusal(tmp_path, LLAMA, change)
    assert message in refused.message
    assert refused.where is not None and (refused.where.line, refused.where.col) == (2, 20)


def test_cli_refusal_is_one_positioned_line(cli: Callable[..., Result], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba", "hidden_size": 64}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(config="config.json"))
    for command in ("resolve", "plan", "compile"):
        result = cli(command, recipe, *(["-o", tmp_path / "out"] if command == "compile" else []))
        assert result.code == 2, result
        assert result.err.startswith(f"{recipe}:2:20: error: model.hf_config config.json: model_type mamba is ")
        assert result.err.count("\n") == 1 and "Traceback" not in result.err


def test_architectures_name_the_family_without_model_type(tmp_path: Path) -> None:
    model = model_of(tmp_path, {**{k: v for k, v in LLAMA.items() if k != "model_type"},
                                "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4})
    assert (model.family, model.layer_cls, model.intermediate_size) == ("gpt2", "GPT2Block", 256)


BLOOM_KEYS = [
    {"hidden_size": 64, "n_layer": 2, "n_head": 4},  # bigscience/bloom-560m's spelling
    {"n_embed": 64, "num_hidden_layers": 2, "num_attention_heads": 4},  # bloomz-560m's
    {"n_embed": 64, "hidden_size": 32, "num_hidden_layers": 2, "n_layer": 3, "num_attention_heads": 4,
     "n_head": 2},  # both: BloomConfig takes n_embed and the attribute_map's names
    {"hidden_size": 64, "n_layer": 2, "n_head": 4, "tie_word_embeddings": False, "n_inner": None},
]
"""BloomConfig's aliases, each read as the class reads it (the slow test builds each)."""
BLOOM_PARAMS = {True: 16_384 + 128 + 2 * (4 * 64 * 64 + 4 * 64 + 2 * 64 * 256 + 256 + 64 + 4 * 64) + 128}
"""vocab 256 × 64, the embedding's LayerNorm (2h), two blocks (fused QKV 3h² + 3h, dense h² + h,
4h MLP with biases, two LayerNorms), the final LayerNorm; untied adds a 256 × 64 head."""
BLOOM_PARAMS[False] = BLOOM_PARAMS[True] + 256 * 64


@pytest.mark.parametrize("keys", BLOOM_KEYS, ids=["n_layer", "n_embed", "both", "untied"])
def test_bloom_reads_its_own_keys_and_counts_the_embedding_norm(keys: dict[str, Any], tmp_path: Path) -> None:
    from distrecipe.model_shapes import embedding_norm

    model = model_of(tmp_path, {"model_type": "bloom", "vocab_size": 256, **keys})
    assert (model.family, model.layer_cls, model.hidden_size, model.layers, model.heads) == (
        "bloom", "BloomBlock", 64, 2, 4)
    assert (model.intermediate_size, model.bias, model.kv_heads, model.position_embeddings) == (256, "all", None, None)
    tied = keys.get("tie_word_embeddings", True)
    assert model.tied_embeddings is tied and model.params == BLOOM_PARAMS[tied]
    found = inventory(model)
    assert found is not None and embedding_norm(model)
    assert found.outer[:2] == (256 * 64, 2 * 64) and found.tensors()[:2] == [256 * 64, 2 * 64]
    prov = resolve(load_recipe(tmp_path / "r.yaml")).provenance
    assert prov["model.hidden_size"] == f"model.hf_config config.json: {'n_embed' if 'n_embed' in keys else 'hidden_size'}"
    assert prov["model.intermediate_size"] == "model.hf_config config.json: BloomMLP's 4 × hidden_size = 256 (no width key)"
    assert prov["model.tied_embeddings"] == ("model.hf_config config.json: tie_word_embeddings" if not tied else
                                             "model.hf_config config.json: no tie_word_embeddings, BloomConfig's "
                                             "default True")


BLOOM = {"model_type": "bloom", "hidden_size": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256}


@pytest.mark.parametrize(("change", "message"), [
    ({"n_inner": 128}, "n_inner is 128, but BloomMLP is 4 × hidden_size wide (256) and transformers reads no n_inner"),
    ({"intermediate_size": 1024}, "intermediate_size is 1024, but BloomMLP is 4 × hidden_size wide (256)"),
    ({"num_key_value_heads": 2}, "num_key_value_heads is 2, but BloomAttention has a key/value head per head (4)"),
    ({"n_head": 5}, "hidden_size 64 is not a multiple of n_head 5 (BloomAttention refuses it)"),
    ({"n_layer": None}, "(bloom) it has no num_hidden_layers"),
    ({"hidden_size": None}, "(bloom) it has no n_embed"),
])
def test_a_bloom_width_transformers_would_not_build_is_refused(change: dict[str, Any], message: str,
                                                                tmp_path: Path) -> None:
    assert message in _refusal(tmp_path, BLOOM, change).message


def test_a_bloom_width_key_that_agrees_is_read(tmp_path: Path) -> None:
    """A config that writes the 4h width (or the heads as KV heads) says what transformers builds."""
    model = model_of(tmp_path, {**BLOOM, "n_inner": 256, "intermediate_size": 256, "num_key_value_heads": 4})
    assert model.params == BLOOM_PARAMS[True]


def test_provenance_names_the_key_or_the_class_default(tmp_path: Path) -> None:
    """Derived values say where they came from, never `default`."""
    shutil.copyfile(CORPUS / "reconstructed" / "mixtral-8x7b.classdefaults.json", tmp_path / "mixtral.json")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(config="mixtral.json"))
    prov = resolve(load_recipe(recipe)).provenance
    assert prov["model.experts"] == "model.hf_config mixtral.json: num_local_experts"
    assert prov["model.experts_per_token"] == "model.hf_config mixtral.json: num_experts_per_tok"
    assert prov["model.expert_intermediate_size"] == "model.hf_config mixtral.json: intermediate_size (Mixtral's experts)"
    assert prov["model.family"] == "model.hf_config mixtral.json: model_type mixtral"
    assert prov["model.layer_cls"] == "the mixtral family's decoder block (transformers' MixtralDecoderLayer)"
    assert prov["model.params"].startswith("counted from the shape above, mixtral.json's: the mixtral family's")
    gemma = {**LLAMA, "model_type": "gemma2"}
    model_path = tmp_path / "g"
    model_path.mkdir()
    model_of(model_path, gemma)
    prov = resolve(load_recipe(model_path / "r.yaml")).provenance
    assert prov["model.head_dim"] == "model.hf_config config.json: no head_dim, Gemma2Config's default 256"
    assert prov["model.tied_embeddings"] == ("model.hf_config config.json: no tie_word_embeddings, Gemma2Config's "
                                             "default True")
    assert prov["model.kv_heads"] == "model.hf_config config.json: no num_key_value_heads, Gemma2Config's default 4"
    assert not [key for key, how in prov.items() if key.startswith("model.") and how == "default"
                and key in ("model.head_dim", "model.kv_heads", "model.tied_embeddings", "model.intermediate_size")]


def test_what_the_recipe_writes_wins_over_the_config(tmp_path: Path) -> None:
    shutil.copyfile(CORPUS / "real" / "qwen3-8b.json", tmp_path / "c.json")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(config="c.json").replace("{hf_config: c.json}", "{hf_config: c.json, layers: 2}"))
    model = load_recipe(recipe).model
    assert model.layers == 2 and model.hidden_size == 4096
    assert model.params == 151936 * 4096 * 2 + 4096 + 2 * (inventory(model).block_params)  # type: ignore[union-attr]


def test_multimodal_configs_count_the_language_model_and_say_so(tmp_path: Path) -> None:
    text = json.loads((CORPUS / "vendored" / "gemma-3-1b-it.mlc.json").read_text())
    config = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
              "vision_config": {"hidden_size": 1152}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(config="config.json"))
    plan = resolve(load_recipe(recipe))
    row = next(r for r in ROWS if r["file"].endswith("gemma-3-1b-it.mlc.json"))
    assert plan.recipe.model.params == int(row["meta_params"])
    assert "the other towers are not counted" in plan.provenance["model.params"]


def test_every_family_has_a_layout_and_a_reader() -> None:
    from distrecipe.model_shapes import LAYOUTS
    from distrecipe.recipe import Family

    families = set(Family.__args__)  # type: ignore[attr-defined]
    assert set(LAYOUTS) == families == set(hf_config.CONFIG_CLASS) == set(hf_config.FAMILY_OF_TYPE.values())


# --- the oracles: transformers' config classes and the models they build (slow: torch) ---


def _built(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = json.loads(path.read_text())
    config = AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return config, model


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_the_recorded_counts_are_what_transformers_builds(row: dict[str, str]) -> None:
    """`meta_params` / `meta_active` in PROVENANCE.csv, rebuilt on the meta device (nothing
    downloaded): every Parameter once (tied ones once); active = total − (1 − k/E) × the
    routed experts' fused tensors."""
    config, model = _built(CORPUS / row["file"])
    total = sum(p.numel() for p in model.parameters())
    text = config.get_text_config()
    experts = next((getattr(text, k) for k in ("n_routed_experts", "num_local_experts", "num_experts")
                    if isinstance(getattr(text, k, None), int) and getattr(text, k) > 0), None)
    routed = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n and "shared_expert" not in n)
    active = total if not experts else round(total - routed * (1 - text.num_experts_per_tok / experts))
    assert (total, active) == (int(row["meta_params"]), int(row["meta_active"]))
    layers = {type(m).__name__ for m in model.modules()}
    if row in READ:
        assert hf_config.read(json.loads((CORPUS / row["file"]).read_text()), "c").family
        from distrecipe.model_shapes import LAYOUTS

        family = hf_config.family_of(json.loads((CORPUS / row["file"]).read_text()))[0]
        assert LAYOUTS[family].layer_cls in layers  # FSDP's wrap class exists in the model


@pytest.mark.slow
@pytest.mark.parametrize("row", READ, ids=[r["file"] for r in READ])
def test_each_value_read_is_the_config_class_s(row: dict[str, str], tmp_path: Path) -> None:
    """What distrecipe reads equals the attribute transformers' config class holds."""
    config, _ = _built(CORPUS / row["file"])
    text = config.get_text_config()
    model = model_of(tmp_path, CORPUS / row["file"])
    assert model.hidden_size == text.hidden_size and model.layers == text.num_hidden_layers
    assert model.heads == text.num_attention_heads and model.vocab == text.vocab_size
    assert model.tied_embeddings == text.tie_word_embeddings
    if model.family == "falcon":
        assert model.kv_heads == (text.num_kv_heads if text.new_decoder_architecture
                                  else 1 if text.multi_query else text.num_attention_heads)
    elif model.kv_lora_rank is None and model.family not in ("gpt2", "gpt_neox", "bloom"):
        assert model.kv_heads == text.num_key_value_heads
    if model.experts:
        assert model.experts_per_token == text.num_experts_per_tok


@pytest.mark.slow
@pytest.mark.parametrize("keys", BLOOM_KEYS, ids=["n_layer", "n_embed", "both", "untied"])
def test_bloom_s_aliases_are_the_class_s(keys: dict[str, Any], tmp_path: Path) -> None:
    """BloomConfig's n_embed / attribute_map aliases and its tied default, on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = {"vocab_size": 256, **keys}
    built = AutoConfig.for_model("bloom", **config)
    with torch.device("meta"):
        expected = sum(p.numel() for p in AutoModelForCausalLM.from_config(built).parameters())
    model = model_of(tmp_path, {"model_type": "bloom", **config})
    assert (model.hidden_size, model.layers, model.heads) == (built.hidden_size, built.n_layer, built.n_head)
    assert model.params == expected == BLOOM_PARAMS[built.tie_word_embeddings]


DEFAULT_CASES = [(family, key) for family in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe",
                                               "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
                                               "granite")
                 for key in ("num_key_value_heads", "head_dim", "tie_word_embeddings")]


@pytest.mark.slow
@pytest.mark.parametrize(("family", "key"), DEFAULT_CASES, ids=[f"{f}-{k}" for f, k in DEFAULT_CASES])
def test_a_key_left_out_takes_the_class_default(family: str, key: str, tmp_path: Path) -> None:
    """With heads ≠ the class's, so "the heads" and a fixed default cannot be confused."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = {"hidden_size": 384, "num_hidden_layers": 1, "num_attention_heads": 6, "intermediate_size": 64,
              "vocab_size": 128, "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": False,
              "pad_token_id": 0}
    if family in ("mixtral", "qwen2_moe", "qwen3_moe"):
        config.update({"num_local_experts" if family == "mixtral" else "num_experts": 4, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48})
    del config[key]
    built = AutoConfig.for_model(family, **config)
    with torch.device("meta"):
        expected = sum(p.numel() for p in AutoModelForCausalLM.from_config(built).parameters())
    model = model_of(tmp_path, {"model_type": family, **config})
    assert model.params == expected
