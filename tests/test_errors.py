"""One refusal type: every refusal names the recipe keys it is about, as data (issue 17 §1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrecipe.errors import DistrecipeError, Position, RecipeError, Refusal
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import offload_refusal, resolve
from tests import diff_sweep
from tests.strategies import recipe_documents, to_yaml

FIELDS = dict(diff_sweep.schema_fields())
SCHEMA_KEYS = {".".join(key.split(".")[:n]) for key in FIELDS for n in range(1, key.count(".") + 2)}
"""Every dotted key the schema has, fields and the sections above them."""


BASE = {"recipe": 1, "name": "r", "model": {"params": 1e9}, "cluster": {"nodes": 1, "gpus_per_node": 8},
        "strategy": "zero", "stage": 3}


def in_schema(key: str) -> bool:
    """A schema key, or a key inside one the schema leaves open (`native.deepspeed.fp16`)."""
    parts = key.split(".")
    return any(".".join(parts[:n]) in SCHEMA_KEYS for n in range(1, len(parts) + 1))


def test_a_position_carries_the_keys_it_was_asked_for_without_changing_equality() -> None:
    recipe = recipe_from_text(to_yaml(BASE) + "batch: {micro: 2, global: 16}\n", "r.yaml")
    where = recipe.at("batch.accumulation", "batch.micro", "batch")
    assert (str(where), where.keys) == ("r.yaml:10:16", ("batch.accumulation", "batch.micro", "batch"))
    assert where == Position("r.yaml", 10, 16)
    assert recipe.at("rl").keys == ("rl",) and str(recipe.at("rl")) == "r.yaml:1:1"
    error = RecipeError("no", where)
    assert error.keys == where.keys and RecipeError("no", where, keys=("batch.micro",)).keys == ("batch.micro",)
    assert Refusal is RecipeError and DistrecipeError("plain").keys == ()


def test_a_schema_refusal_names_its_key() -> None:
    with pytest.raises(RecipeError) as caught:
        recipe_from_text(to_yaml({**BASE, "batch": {"micro": 0}}), "r.yaml")
    assert caught.value.keys == ("batch.micro",)
    with pytest.raises(RecipeError) as missing:
        recipe_from_text("recipe: 1\nname: r\n", "r.yaml")
    assert missing.value.keys and all(in_schema(k) for k in missing.value.keys)


def test_the_ad_hoc_refusals_are_the_one_type() -> None:
    from distrecipe.recipe import Offload

    refused = offload_refusal(Offload(params="cpu"), 2, "zero")
    assert isinstance(refused, Refusal) and refused.keys == ("offload.params",)
    assert "needs stage 3" in refused.message and refused.where is None
    assert offload_refusal(Offload(), 0, "ddp") is None


@st.composite
def broken(draw: st.DrawFn) -> tuple[dict[str, Any], str, Any]:
    """A valid recipe with one field given another value its schema allows: often one
    the rest of the recipe does not go with."""
    doc = draw(recipe_documents(strategies=("ddp", "zero", "fsdp", "megatron"), rl=draw(st.booleans())))
    key = draw(st.sampled_from(sorted(k for k in FIELDS if k not in ("recipe", "name", "model.hf_config"))))
    options = diff_sweep.candidates(key, FIELDS[key], diff_sweep.get_key(doc, key))
    value = draw(st.sampled_from(options)) if options else None
    return diff_sweep.set_key(doc, key, value), key, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken())
def test_every_refusal_of_resolve_names_a_schema_key(case: tuple[dict[str, Any], str, Any]) -> None:
    doc, key, value = case
    try:
        recipe = recipe_from_text(to_yaml(doc), "r.yaml")
    except DistrecipeError:
        return  # the schema's refusal, not resolve's
    try:
        resolve(recipe)
    except RecipeError as exc:
        assert exc.keys, f"{key}={value!r}: {exc}"
        assert all(in_schema(k) for k in exc.keys), f"{key}={value!r}: {exc.keys}"
        assert exc.where is not None and exc.where.file == "r.yaml"


@pytest.mark.parametrize(("sets", "keys"), [
    ({"offload": {"params": "cpu"}, "stage": 2}, ("offload.params",)),
    ({"batch": {"micro": 3, "accumulation": 1, "global": 16}}, ("batch.global", "batch")),
])
def test_resolve_refusals_name_their_keys(sets: dict[str, Any], keys: tuple[str, ...]) -> None:
    with pytest.raises(RecipeError) as caught:
        resolve(recipe_from_text(to_yaml({**BASE, "batch": {"micro": 2, "accumulation": 1, "global": 16}, **sets}),
                                 "r.yaml"))
    assert caught.value.keys[:len(keys)] == keys
