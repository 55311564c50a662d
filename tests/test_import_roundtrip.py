"""Round trip: recipe → emit (every target) → import → resolve gives the same Plan.

Generated recipes (`tests/strategies.py`) are compiled for each target, the files
written as a user would find them, imported back, and resolved. A target's files
cannot say everything a recipe says (a ds_config has no model size, an Accelerate
YAML has no optimizer), so those sections are taken from the original recipe, as a
user completes an imported recipe; every value the files do carry must come back
exactly. Each target is given only recipes it writes exactly (`EXACT` names what is
left out and why), drawn directly rather than drawn and discarded, and the target must
agree: it neither refuses one nor reports it inexact.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from distrecipe.job import Plan, plan_values
from distrecipe.source import Document
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native
from distrecipe.translator.load import recipe_from_document, recipe_from_text
from distrecipe.translator.resolve import resolve
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.strategies import NONE, Only, recipe_documents

MAIN_FILE = {"deepspeed": "ds_config.json", "accelerate": "accelerate_config.yaml",
             "verl": "verl_overrides.txt", "hf": "training_args.json", "openrlhf": "openrlhf_train.sh"}
NOT_IN_FILES: dict[str, tuple[str, ...]] = {
    "deepspeed": ("name", "model", "batch.seq_len", "batch.micro_policy", "cluster.gpu_memory", "launch"),
    "accelerate": ("name", "model", "batch.seq_len", "batch.micro_policy", "cluster.gpu_memory", "launch", "optimizer", "grad_clip",
                   "activation_checkpointing", "schedule", "checkpoint"),
    "verl": ("name", "model", "batch.seq_len", "batch.micro_policy", "cluster.gpu_memory", "launch"),
    "hf": ("name", "model", "batch.seq_len", "batch.micro_policy", "cluster.gpu_memory", "launch"),
    # OpenRLHF's command line has no offload or weight decay key of the recipe's, and no native section
    "openrlhf": ("name", "model", "batch.seq_len", "batch.micro_policy", "cluster.gpu_memory", "launch", "offload",
                 "optimizer.weight_decay", "native"),
}
"""What each target's files do not hold; taken from the original recipe."""
HARMLESS = frozenset({"DR211", "DR212", "DR222"})
"""Findings that do not change the job (a launch hint, clip=inf for no clipping, a setting
the file leaves to the script, which `NOT_IN_FILES` puts back). DR214 does: the Trainer's
files leave hybrid sharding to an Accelerate config."""
NAMED_NATIVE = {"openrlhf": frozenset({"DR233"})}
"""Targets whose files hold no `native` section: DR233 names each native key, which
`NOT_IN_FILES` puts back."""
STRATEGIES = {"deepspeed": ("ddp", "zero"), "accelerate": ("ddp", "zero", "fsdp"),
              "verl": ("fsdp", "megatron"), "hf": ("ddp", "zero", "fsdp"), "openrlhf": ("zero",)}
"""Strategies each target writes in its own terms (a ds_config cannot tell FSDP from ZeRO-3)."""
EXACT = {
    # ZeRO has no hybrid sharding (DR216, DR217).
    "deepspeed": Only(shard_group=NONE),
    # Sharding over a single rank is replication: Accelerate, verl and the Trainer write DDP.
    # FSDP2 offloads parameters and optimizer together (DR202); ZeRO goes through a ds_config.
    "accelerate": Only(sharded_single_rank=NONE, shard_group=frozenset({"fsdp"}),
                       optimizer_offload_alone=frozenset({"zero"})),
    # Megatron has one Adam, with decoupled decay (AdamW), so a recipe's `adam` cannot come
    # back (without decay it is the same update), and it trains in bf16 or fp16 only (DR208).
    "verl": Only(sharded_single_rank=NONE, shard_group=frozenset({"fsdp"}), optimizer_offload_alone=NONE,
                 adam=frozenset({"fsdp"}), fp32=frozenset({"fsdp"})),
    # TrainingArguments has no coupled Adam outside DeepSpeed, and leaves HSDP to an
    # Accelerate config (DR214).
    "hf": Only(sharded_single_rank=NONE, shard_group=NONE, optimizer_offload_alone=frozenset({"zero"}),
               adam=frozenset({"zero"})),
    # OpenRLHF runs ZeRO in bf16 or fp16 with its own Adam (decoupled decay), and no hybrid sharding.
    "openrlhf": Only(shard_group=NONE, adam=NONE, fp32=NONE),
}
"""The part of the valid recipes each target writes exactly."""


def plan_of(doc: dict[str, Any]) -> Plan:
    return resolve(recipe_from_text(yaml.safe_dump(doc, sort_keys=False), "original.yaml"))


def comparable(plan: Plan) -> dict[str, object]:
    """The job as resolved, key by key (the name is the file's)."""
    return {key: value for key, value in plan_values(plan).items() if key != "name"}


@st.composite
def target_documents(draw: st.DrawFn, target: str) -> dict[str, Any]:
    doc = draw(recipe_documents(strategies=STRATEGIES[target], only=EXACT[target], rl=target in ("verl", "openrlhf")))
    if target == "accelerate" and doc["strategy"] == "zero":
        doc["launch"] = {"backend": "accelerate-deepspeed"}  # Accelerate's DeepSpeed path
    return doc


def complete(imported: dict[str, Any], original: dict[str, Any], target: str) -> dict[str, Any]:
    """The imported recipe with what the target's files cannot hold put back."""
    out = dict(imported)
    for dotted in NOT_IN_FILES[target]:
        section, _, key = dotted.partition(".")
        if not key:
            if section in original:
                out[section] = original[section]
            else:
                out.pop(section, None)
        elif key in original.get(section, {}):
            out[section] = {**out.get(section, {}), key: original[section][key]}
    return out


def round_trip(doc: dict[str, Any], target: str) -> tuple[Plan, Plan]:
    plan = plan_of(doc)
    output = TARGETS[target](plan, EmitOptions())  # raises if the target refuses the recipe
    assert not {f.code for f in output.findings} - HARMLESS - NAMED_NATIVE.get(target, frozenset()), \
        output.findings
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in output.files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        kind, native = read_native(Path(tmp) / MAIN_FILE[target])
        assert kind == target
        imported = import_document(kind, native, World(plan.dims.nodes, plan.dims.gpus_per_node))
        recipe = complete(imported.recipe, doc, target)
        back = resolve(recipe_from_document(Document(recipe, "imported.yaml"), Path(tmp)))
    return plan, back


@pytest.mark.parametrize("target", sorted(MAIN_FILE))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_emit_then_import_gives_the_same_plan(target: str, data: st.DataObject) -> None:
    doc = data.draw(target_documents(target))
    plan, back = round_trip(doc, target)
    assert comparable(back) == comparable(plan)
