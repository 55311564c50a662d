"""`distrecipe diff`: semantic changes with their impact (engine-view traffic), in three formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from distrecipe.commands.diff import FORMATS
from distrecipe.diff import diff
from distrecipe.recipe import plan_values
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from tests.conftest import RECIPES, Result
from tests.strategies import recipe_documents, to_yaml

ZERO2, ZERO3 = RECIPES / "seed-8b-32gpu-zero2.yaml", RECIPES / "seed-8b-32gpu-zero3.yaml"


def test_stage_change_is_priced_as_in_the_seed(cli: Callable[..., Result]) -> None:
    result = cli("diff", ZERO2, ZERO3)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "stage: 2 → 3"
    assert "  per-GPU model state 19.5 GB → 4 GB (−15.5 GB)" in lines
    # Traffic as the engine sends it (one view everywhere; the seed's formula is `plan`'s alone):
    # DeepSpeed ZeRO-2 all-reduces on each of the 4 micro-steps, ZeRO-3 gathers and reduces on each.
    assert "  traffic per GPU per step (engine view) 139.5 GB → 178.25 GB (+38.75 GB)" in lines


def test_native_configs_diff_in_recipe_terms(cli: Callable[..., Result], tmp_path: Path) -> None:
    for name, recipe, sets in (("old", ZERO2, []), ("new", ZERO2, ["--set", "batch.global=512", "--set", "stage=3"])):
        assert cli("compile", recipe, *sets, "-o", tmp_path / name).code == 0
    old, new = tmp_path / "old" / "ds_config.json", tmp_path / "new" / "ds_config.json"
    result = cli("diff", old, new, "--world", "32", "--nodes", "4", "--format", "markdown",
                 "--set", "model.params=8e9")
    assert result.code == 0, result.err
    assert "| `stage` | 2 | 3 |" in result.out
    assert "| `batch.global` | 256 | 512 |" in result.out
    assert "| `batch.accumulation` | 4 | 8 |" in result.out
    assert "- per-GPU model state 19.5 GB → 4 GB (−15.5 GB)" in result.out


def test_mixed_kinds_borrow_what_the_native_side_cannot_say(cli: Callable[..., Result], tmp_path: Path) -> None:
    assert cli("compile", ZERO2, "-o", tmp_path).code == 0
    result = cli("diff", ZERO2, tmp_path / "ds_config.json", "--world", "32", "--nodes", "4", "--format", "json")
    data = json.loads(result.out)
    assert data["changes"] == [] and data["impact"] is None
    assert data["notes"][0].endswith(f"does not state model.params, model.layers, model.heads, model.kv_heads, "
                                     f"model.intermediate_size, model.vocab, batch.seq_len, cluster.gpu_memory: "
                                     f"taken from {ZERO2}")
    same = cli("diff", ZERO2, tmp_path / "ds_config.json", "--world", "32", "--nodes", "4")
    assert same.out.startswith(f"{ZERO2} and {tmp_path / 'ds_config.json'} describe the same job\n")


def test_json_impact_and_determinism(cli: Callable[..., Result]) -> None:
    first = cli("diff", ZERO2, ZERO3, "--format", "json")
    assert first == cli("diff", ZERO2, ZERO3, "--format", "json")
    impact = json.loads(first.out)["impact"]
    assert impact["memory_bytes"] == [19.5e9, 4e9] and impact["traffic_bytes"] == pytest.approx([139.5e9, 178.25e9])
    assert impact["label"] == ["ZeRO-2", "ZeRO-3"]


def test_bad_side_is_one_line(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    broken = write("bad.yaml", "recipe: 1\nstrategy: zero\n  stage: 2\n")
    result = cli("diff", ZERO2, broken)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and result.err.startswith(f"{broken}:3:")
    # A native side borrows the model from the other side, even when that is malformed.
    native = write("ds.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    listed = write("list.yaml", "recipe: 1\nmodel: [1]\n")
    result = cli("diff", native, listed, "--world", "8")
    assert result.code == 2 and result.err.startswith(f"{listed}:") and "internal error" not in result.err


@settings(max_examples=40, deadline=None)
@given(a=recipe_documents(), b=recipe_documents())
def test_any_two_recipes_diff_in_every_format(a: dict[str, Any], b: dict[str, Any]) -> None:
    plans = [resolve(recipe_from_text(to_yaml(doc), f"{name}.yaml")) for name, doc in (("a", a), ("b", b))]
    result = diff(*plans)
    before, after = plan_values(plans[0]), plan_values(plans[1])
    assert {c.key for c in result.changes} == {k for k in before if k != "name" and before[k] != after.get(k)}
    assert (result.impact is None) == (not result.changes)
    for render in FORMATS.values():
        assert render(result, "a.yaml", "b.yaml").endswith("\n")
    assert diff(plans[0], plans[0]).changes == []
