"""The recipe's `native` section: merged into each engine's output, refused where it contradicts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distrecipe.errors import RecipeError
from distrecipe.source import Document
from distrecipe.translator import deepspeed, verl
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve

BASE = """recipe: 1
model: {}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: zero
stage: 2
batch: {micro: 2, accumulation: 4}
"""
REAL = Path(__file__).parent / "corpus" / "real" / "accelerate"


def test_native_wins_and_null_removes_the_emitted_key() -> None:
    plan = resolve(recipe_from_text(BASE + "native:\n  deepspeed:\n    zero_optimization: {overlap_comm: false}\n"
                                    "    steps_per_print: null\n    optimizer: {type: Lamb}\n"))
    config = deepspeed.emit(plan)
    assert config["zero_optimization"]["overlap_comm"] is False
    assert config["zero_optimization"]["stage"] == 2 and "steps_per_print" not in config
    assert config["optimizer"]["type"] == "Lamb"


@pytest.mark.parametrize(("native", "words"), [
    ("deepspeed: {zero_optimization: {stage: 3}}", "contradicts the recipe's stage"),
    ("deepspeed: {train_micro_batch_size_per_gpu: 4}", "contradicts the recipe's batch.micro"),
    ("accelerate: {mixed_precision: fp16}", "contradicts the recipe's precision"),
    ("accelerate: {distributed_type: MEGATRON_LM}", "contradicts the recipe's strategy"),
])
def test_a_native_key_contradicting_a_decided_value_is_refused(native: str, words: str) -> None:
    with pytest.raises(RecipeError, match=words) as caught:
        resolve(recipe_from_text(BASE + f"native:\n  {native}\n"))
    assert caught.value.where is not None and caught.value.where.line == 8


def test_auto_restates_a_decided_value() -> None:
    plan = resolve(recipe_from_text(BASE + "native:\n  deepspeed: {train_micro_batch_size_per_gpu: auto}\n"))
    assert deepspeed.emit(plan)["train_micro_batch_size_per_gpu"] == "auto"


def test_verl_native_override_replaces_the_same_key() -> None:
    text = BASE.replace("strategy: zero\nstage: 2", "strategy: fsdp") + (
        "rl: {rollout_n: 4, prompts_per_step: 16}\n"
        "native:\n  verl: ['actor_rollout_ref.actor.fsdp_config.param_offload=true', 'algorithm.adv_estimator=grpo']\n")
    overrides = dict(verl.overrides(resolve(recipe_from_text(text))))
    assert overrides["actor_rollout_ref.actor.fsdp_config.param_offload"] is True
    assert overrides["algorithm.adv_estimator"] == "grpo"


@pytest.mark.parametrize(("strategy", "stage", "shard_group"), [
    ("FULL_SHARD", 3, None), ("SHARD_GRAD_OP", 2, None), ("NO_SHARD", 0, None),
    ("HYBRID_SHARD", 3, 4), ("_HYBRID_SHARD_ZERO2", 2, 4), (2, 2, None), ("4", 3, 4),
])
def test_fsdp1_sharding_strategies_map_as_accelerate_reads_them(strategy: object, stage: int,
                                                                shard_group: int | None) -> None:
    data = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_machines": 2,
            "num_processes": 8, "fsdp_config": {"fsdp_sharding_strategy": strategy}}
    imported = import_document("accelerate", Document(data, "a.yaml"), None, ["batch.micro=1"])
    assert imported.recipe["stage"] == stage
    assert imported.recipe.get("parallel", {}).get("shard_group") == shard_group
    # FSDP1 by Accelerate's default (the file says no fsdp_version): stated, never left to 2
    assert imported.recipe.get("fsdp_version") == (1 if stage else None)
    native = imported.recipe.get("native", {}).get("accelerate", {}).get("fsdp_config", {})
    # the emitter writes the strategy by name: only another spelling is carried as written
    named = strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
    assert native.get("fsdp_sharding_strategy") == (None if named else strategy)
    assert "fsdp_version" not in native


def test_accelerate_deepspeed_with_inline_settings_imports() -> None:
    path = REAL / "huggingface__open-r1__recipes__accelerate_configs__traffic.yaml"
    doc = Document(yaml.safe_load(path.read_text()), str(path))
    imported = import_document("accelerate", doc, World(1, 8), ["batch.micro=1"])
    assert (imported.recipe["stage"], imported.recipe["offload"]) == (3, {"optimizer": "cpu"})
    assert imported.recipe["batch"]["accumulation"] == 4
    assert imported.recipe["native"]["accelerate"]["deepspeed_config"]["deepspeed_config_file"] is None


def test_a_contradicting_verl_override_is_refused_at_its_own_line() -> None:
    """The message points at the offending list item (`native.verl[1]`), not at `native`."""
    text = BASE.replace("strategy: zero\nstage: 2", "strategy: fsdp") + (
        "native:\n  verl:\n    - algorithm.adv_estimator=grpo\n    - trainer.n_gpus_per_node=4\n")
    with pytest.raises(RecipeError, match=r"contradicts the recipe's cluster\.gpus_per_node") as caught:
        resolve(recipe_from_text(text, "r.yaml"))
    assert str(caught.value).startswith("r.yaml:9:7: native.verl[1]: trainer.n_gpus_per_node = 4 ")


FSDP = BASE.replace("strategy: zero\nstage: 2", "strategy: fsdp")


@pytest.mark.parametrize(("written", "native", "words"), [
    # the field and an engine's key disagree: the key's line, naming the field's value
    ("fsdp_version: 2\n", "hf: {fsdp_config: {version: 1}}", "contradicts the recipe's fsdp_version (fsdp_version = 2)"),
    ("fsdp_version: 1\n", "accelerate: {fsdp_config: {fsdp_version: 2}}",
     "contradicts the recipe's fsdp_version (fsdp_version = 1)"),
    ("fsdp_version: 1\n", "verl: ['actor_rollout_ref.actor.strategy=fsdp2']",
     "contradicts the recipe's fsdp_version (fsdp_version = 1)"),
    # two engines' keys disagree with each other: the Trainer's is read first, the second refused
    ("", "hf: {fsdp_config: {version: 1}}\n  accelerate: {fsdp_config: {fsdp_version: 2}}",
     "native.accelerate.fsdp_config.fsdp_version: fsdp_config.fsdp_version = 2 contradicts"),
])
def test_which_fsdp_is_one_fact(written: str, native: str, words: str) -> None:
    """`fsdp_version` and the engines' keys that spell it never disagree silently."""
    with pytest.raises(RecipeError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        resolve(recipe_from_text(FSDP + written + f"native:\n  {native}\n"))
    assert caught.value.where is not None and caught.value.where.line == 8


@pytest.mark.parametrize(("written", "native", "version", "said"), [
    ("", "", 2, "default: FSDP2 (fully_shard), what every target writes"),
    ("fsdp_version: 1\n", "", 1, "recipe"),
    ("", "native:\n  hf: {fsdp_config: {version: '1'}}\n", 1, "native.hf.fsdp_config.version: 1"),
    ("", "native:\n  accelerate: {fsdp_config: {fsdp_version: 2}}\n", 2,
     "native.accelerate.fsdp_config.fsdp_version: 2"),
    ("fsdp_version: 1\n", "native:\n  hf: {fsdp_config: {version: 1}}\n", 1, "recipe"),  # restating agrees
])
def test_native_keys_resolve_into_the_field(written: str, native: str, version: int, said: str) -> None:
    plan = resolve(recipe_from_text(FSDP + written + native))
    assert plan.fsdp_version == version
    assert dict((key, how) for key, _, how in plan.explain())["fsdp_version"] == said
