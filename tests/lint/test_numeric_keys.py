"""Zero, negative and huge numbers in every numeric key of every kind: a finding or one clean
error, never a crash. Every rule divides somewhere (DP = world / model parallel, micro-batches
per rank, rollout replicas per node), so each divisor must meet the values that break it.

The keys are every number the engines' own tables know: DeepSpeed's typed keys, verl's
composed config, Accelerate's counts and sizes, TrainingArguments' numeric fields (as JSON
and as a launch script's flags), and the recipe's own numeric fields; several at once, with
and without a world size, through lint, import and (recipes) plan.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrecipe.api import plan_of_document
from distrecipe.engines.tables import training_flags, verl_tree
from distrecipe.errors import DistrecipeError
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.source import parse_text
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native
from tests.hostile.inputs import FULL, LEAVES, _deepspeed_numeric, _numeric_leaves

NUMBERS = st.sampled_from([0, -1, -2, -(2**63), 2**63, 2**64 + 1, 10**30, 1e308, -1e308, 0.5, -0.0, 3, 7])
WORLDS = st.sampled_from([None, 1, 3, 8, 2**31])

DEEPSPEED = sorted(_deepspeed_numeric())
VERL = sorted(_numeric_leaves(verl_tree("ppo_trainer")))
HF = sorted(field for field, entry in training_flags().items() if entry["type"] in ("int", "float"))
ACCELERATE = [("num_processes",), ("num_machines",), ("machine_rank",), ("fsdp_config", "fsdp_min_num_params"),
              ("parallelism_config", "parallelism_config_dp_shard_size"),
              ("parallelism_config", "parallelism_config_tp_size"), ("deepspeed_config", "zero_stage"),
              ("deepspeed_config", "gradient_accumulation_steps")]
RECIPE = [path for path in LEAVES if path[0] in ("model", "cluster", "parallel", "batch", "stage", "grad_clip")
          and path[-1] not in ("gpu_memory", "cpu_memory", "device", "layer_cls", "attention", "tied_embeddings",
                               "hf_config", "shard_group")]


def _nested(pairs: list[tuple[tuple[str, ...], Any]], base: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    for path, value in pairs:
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[path[-1]] = value
    return data


def _survives(tmp: Path, name: str, text: str, world: int | None) -> None:
    """lint and import the file: findings or a DistrecipeError, nothing else."""
    path = tmp / name
    path.write_text(text)
    lint([path], config=LintConfig(), world=world)
    with contextlib.suppress(DistrecipeError):
        kind, doc = read_native(path)
        import_document(kind, doc, World.of(world) if world else None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["deepspeed", "verl", "hf", "hf-script", "accelerate"]), data=st.data(),
       world=WORLDS)
def test_numbers_in_native_keys_never_crash(tmp_path: Path, kind: str, data: st.DataObject, world: int | None) -> None:
    keys = {"deepspeed": DEEPSPEED, "verl": VERL, "hf": [(f,) for f in HF], "hf-script": [(f,) for f in HF],
            "accelerate": ACCELERATE}[kind]
    chosen = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4, unique=True))
    pairs = [(path, data.draw(NUMBERS)) for path in chosen]
    if kind == "deepspeed":
        base = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
        _survives(tmp_path, "ds_config.json", json.dumps(_nested(pairs, base)), world)
    elif kind == "verl":
        lines = ["data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
                 "trainer.n_gpus_per_node=8", *(f"{'.'.join(p)}={json.dumps(v)}" for p, v in pairs)]
        _survives(tmp_path, "verl_overrides.txt", "\n".join(lines) + "\n", world)
    elif kind == "hf":
        (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}')
        args = _nested(pairs, {"output_dir": "out", "per_device_train_batch_size": 2, "deepspeed": "ds.json"})
        _survives(tmp_path, "args.json", json.dumps(args), world)
    elif kind == "hf-script":
        flags = " ".join(f"--{p[0]} {json.dumps(v)}" for p, v in pairs)
        _survives(tmp_path, "run.sh", f"torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 {flags}\n",
                  world)
    else:
        base = {"distributed_type": "FSDP", "num_processes": 8, "fsdp_config": {"fsdp_version": 2}}
        _survives(tmp_path, "accelerate.yaml", json.dumps(_nested(pairs, base)), world)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), world=WORLDS)
def test_numbers_in_recipe_keys_never_crash(tmp_path: Path, data: st.DataObject, world: int | None) -> None:
    chosen = data.draw(st.lists(st.sampled_from(RECIPE), min_size=1, max_size=3, unique=True))
    recipe = json.loads(json.dumps({key: value for key, value in FULL.items() if key != "launch"}))
    for path in chosen:
        node = recipe
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = str(data.draw(NUMBERS))
    text = "\n".join(f"{key}: {_flow(value)}" for key, value in recipe.items()) + "\n"
    doc = parse_text(text, str(tmp_path / "recipe.yaml"))
    with contextlib.suppress(DistrecipeError):
        plan_of_document(doc, tmp_path, world=world)
    (tmp_path / "recipe.yaml").write_text(text)
    lint([tmp_path / "recipe.yaml"], config=LintConfig(), world=world)


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)
