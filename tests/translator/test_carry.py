"""The carry table covers every recipe field, and its `exact` cells are what the emitters write
(TRL's config and OpenRLHF's command line too)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distrecipe.recipe import (
    RL,
    Batch,
    Checkpoint,
    Cluster,
    Model,
    Optimizer,
    Recipe,
    Schedule,
    recipe_values,
)
from distrecipe.translator import accelerate, carry, deepspeed, hf, openrlhf, trl, verl
from tests.emit_strategies import plan_of


def test_every_recipe_field_has_a_row() -> None:
    """A field added to `Recipe` without saying what each file does with it fails here."""
    full = Recipe(name="x", model=Model(), cluster=Cluster(), strategy="zero", batch=Batch(),
                  optimizer=Optimizer(), schedule=Schedule(), checkpoint=Checkpoint(),
                  rl=RL(rollout_n=1, prompts_per_step=1))
    assert {key for key in recipe_values(full) if not key.startswith("native.")} == set(carry.FIELDS)


BASE: dict[str, Any] = {
    "recipe": 1, "name": "t", "model": {"hidden_size": 1024, "layer_cls": "LlamaDecoderLayer"},
    "cluster": {"nodes": 1, "gpus_per_node": 8}, "strategy": "fsdp", "stage": 3,
    "batch": {"micro": 2, "accumulation": 4, "global": 64}, "precision": "bf16",
    "rl": {"rollout_n": 4, "prompts_per_step": 32},
}
CHANGES: dict[str, tuple[Any, Any]] = {
    "optimizer.lr": (1e-4, 3e-4), "optimizer.weight_decay": (0.0, 0.1), "optimizer.eps": (1e-8, 1e-6),
    "optimizer.betas": ([0.9, 0.95], [0.8, 0.9]), "optimizer.name": ("adamw", "sgd"),
    "schedule.warmup_steps": (10, 20), "schedule.total_steps": (100, 200), "schedule.warmup_ratio": (0.1, 0.2),
    "grad_clip": (0.5, 2.0), "checkpoint.every": (100, 200), "checkpoint.dir": ("ckpt/a", "ckpt/b"),
    "checkpoint.keep": (2, 3), "batch.micro": (2, 1), "batch.global": (64, 128), "stage": (2, 3),
    "batch.accumulation": (4, 8), "batch.micro_tokens": (4096, 8192),
    "model.layer_cls": ("LlamaDecoderLayer", "Qwen3DecoderLayer"), "cluster.nodes": (1, 2),
    "cluster.gpus_per_node": (8, 4), "cluster.device": ("gpu", "cpu"), "offload.pin_memory": (True, False),
    "precision": ("bf16", "fp16"), "activation_checkpointing": ("none", "full"),
    "rl.rollout_n": (4, 8), "rl.prompts_per_step": (32, 64), "rl.rollout_memory": (0.5, 0.6),
    "rl.free_rollout_memory": (True, False), "offload.optimizer": ("none", "cpu"), "offload.params": ("none", "cpu"),
    "launch.master_addr": ("10.0.0.1", "10.0.0.2"), "launch.master_port": (29501, 29502),
}
"""Two values for each field an `exact` cell names, both valid beside `BASE`."""
WRITTEN: dict[tuple[str, str], Any] = {
    ("optimizer.name", "deepspeed"): "SGD", ("optimizer.name", "verl"): "SGD",
    ("activation_checkpointing", "verl"): True, ("cluster.device", "hf"): True,
    ("model.layer_cls", "hf"): ["Qwen3DecoderLayer"]}
"""Where the file spells the new value otherwise (a class name, a switch, a list)."""


def files(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each file kind's output for `doc`, as key → value (dotted)."""
    plan = plan_of(doc)
    flat = {"deepspeed": deepspeed.emit(plan), "accelerate": accelerate.emit(plan), "hf": hf.emit(plan),
            "verl": dict(verl.overrides(plan)), "trl": trl.emit(plan)}
    out = {kind: dict(_leaves(data)) for kind, data in flat.items()}
    out["openrlhf"] = {name: _word(value) for name, value in openrlhf.arguments(plan)}
    return out


def _word(value: str | None) -> Any:
    """A command line's word as OpenRLHF's argparse types it (a switch given alone: true)."""
    if value is None:
        return True
    for number in (int, float):
        try:
            return number(value)
        except ValueError:
            pass
    return value


def _leaves(node: Any, path: str = "") -> Any:
    if isinstance(node, dict) and node and not path.endswith("override_optimizer_config"):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}".lstrip(".").lstrip("+"))
    else:
        yield path, node


def _set(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    *parents, leaf = key.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    if key.startswith("schedule.warmup_ratio") or key == "schedule.warmup_steps":
        out.setdefault("schedule", {}).setdefault("total_steps", 1000)
    if key in ("cluster.nodes", "cluster.gpus_per_node"):
        out["batch"] = {"micro": 2, "accumulation": 4}  # the global batch follows the world
    if key == "batch.micro":
        out["batch"] = {"micro": value, "accumulation": 4}
    if key == "batch.accumulation":
        out["batch"] = {"micro": 2, "accumulation": value}
    if key == "batch.global":
        out["batch"] = {"micro": 2, "global": value}
    if key == "batch.micro_tokens":
        out["batch"] = {"global": 64, "micro_tokens": value}
    if key.startswith("offload.") and key != "offload.pin_memory":
        out["strategy"] = "zero"
    if key == "launch.master_addr":
        out["cluster"], out["batch"] = {"nodes": 2, "gpus_per_node": 8}, {"micro": 2, "accumulation": 4}
    if key == "offload.pin_memory":
        out["strategy"], out["offload"] = "zero", {"optimizer": "cpu", "pin_memory": value}
    return out


EXACT = [(key, kind) for key, row in carry.FIELDS.items() for kind in carry.COLUMN_ORDER
         if row.cell(kind).how == "exact"]


@pytest.mark.parametrize(("key", "kind"), EXACT, ids=[f"{k}-{e}" for k, e in EXACT])
def test_an_exact_cell_names_the_key_the_emitter_writes(key: str, kind: str) -> None:
    """Changing the field changes the named key of that file, to the field's new value."""
    if key not in CHANGES:
        pytest.fail(f"{key}: give two values in CHANGES so its exact cells are checked")
    native = carry.FIELDS[key].cell(kind).native  # type: ignore[arg-type]
    old, new = CHANGES[key]
    before, after = files(_set(BASE, key, old))[kind], files(_set(BASE, key, new))[kind]
    assert native in after, f"{kind} writes no {native} ({sorted(after)[:8]}...)"
    assert before.get(native) != after[native]
    written = after[native]
    # TRL's config spells the Trainer's kwargs as TrainingArguments does.
    spelt = WRITTEN.get((key, kind), WRITTEN.get((key, "hf"), new) if kind == "trl" else new)
    assert written == spelt or (isinstance(written, tuple) and list(written) == new), (
        native, written, new)


def test_openrlhf_s_decided_options_are_its_column_s_keys() -> None:
    """`translator.openrlhf.decided` names the recipe field behind each option `launch` checks;
    the carry table's OpenRLHF cell of that field spells the same option."""
    plan = plan_of({**BASE, "strategy": "zero", "optimizer": {"lr": 1e-4}, "grad_clip": 1.0,
                    "rl": {**BASE["rl"], "rollout_memory": 0.5, "free_rollout_memory": True}})
    checked = 0
    for option, _value, key in openrlhf.decided(plan):
        if key in carry.FIELDS:
            assert option in carry.FIELDS[key].cell("openrlhf").keys, (option, key)
            checked += 1
    assert checked >= 12
