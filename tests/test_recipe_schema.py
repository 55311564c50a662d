"""The JSON schema (what editors and validation read) and the `Recipe` dataclasses agree.

Each closed vocabulary is a `Literal` in `distrecipe.recipe`; the schema spells the
same words again for editors. These tests walk both, so a value added to one and not
the other fails here instead of being rejected (or accepted) by only one of them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from distrecipe import recipe
from distrecipe.schemas import recipe_schema

WRITTEN_INSIDE = {"recompute_every": ("activation_checkpointing", "every")}
"""`Recipe` fields written as a key of another one's mapping form
(`activation_checkpointing: {mode: selective, every: 2}`)."""
NOT_WRITTEN = {"source", "where", "derived", *WRITTEN_INSIDE}
"""`Recipe` fields filled by the loader, never written at the top level of a recipe."""


def literal_words(hint: Any) -> set[Any]:
    """Every value a type annotation spells as a `Literal`, through unions and aliases."""
    if typing.get_origin(hint) is typing.Literal:
        return set(typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set().union(*(literal_words(arg) for arg in typing.get_args(hint)))
    return set()


def schema_words(schema: dict[str, Any]) -> set[Any]:
    """Every string the schema accepts by name (`enum` and `const`), through oneOf/anyOf."""
    words = {v for v in schema.get("enum", ()) if isinstance(v, str)}
    if isinstance(schema.get("const"), str):
        words.add(schema["const"])
    for combinator in ("oneOf", "anyOf"):
        for option in schema.get(combinator, ()):
            words |= schema_words(option)
    return words


def key(field: dataclasses.Field[Any]) -> str:
    """The recipe key a field is written as (`global_` avoids a Python keyword)."""
    return field.name.removesuffix("_")


def sections() -> Iterator[tuple[str, type[Any], dict[str, Any]]]:
    """(dotted prefix, dataclass, schema properties) for the recipe and each section."""
    properties = recipe_schema()["properties"]
    yield "", recipe.Recipe, properties
    hints = typing.get_type_hints(recipe.Recipe)
    for field in dataclasses.fields(recipe.Recipe):
        if field.name in NOT_WRITTEN:
            continue
        section = hints[field.name]
        section = next((a for a in typing.get_args(section) if dataclasses.is_dataclass(a)), section)
        if dataclasses.is_dataclass(section):
            yield f"{key(field)}.", typing.cast(type[Any], section), properties[key(field)]["properties"]


SECTIONS = list(sections())


@pytest.mark.parametrize(("prefix", "cls", "properties"), SECTIONS, ids=[s[1].__name__ for s in SECTIONS])
def test_every_field_is_a_schema_key_and_back(prefix: str, cls: type[Any],
                                              properties: dict[str, Any]) -> None:
    fields = {key(f) for f in dataclasses.fields(cls)} - NOT_WRITTEN
    written = set(properties) - ({"recipe"} if cls is recipe.Recipe else set())  # the format version
    assert fields == written, f"{prefix or 'top level'}: dataclass {sorted(fields - written)}, " \
                              f"schema {sorted(written - fields)}"


@pytest.mark.parametrize(("prefix", "cls", "properties"), SECTIONS, ids=[s[1].__name__ for s in SECTIONS])
def test_schema_enums_are_the_literals(prefix: str, cls: type[Any], properties: dict[str, Any]) -> None:
    hints = typing.get_type_hints(cls)
    checked = 0
    for field in dataclasses.fields(cls):
        if field.name in NOT_WRITTEN:
            continue
        words = literal_words(hints[field.name])
        assert schema_words(properties[key(field)]) == words, f"{prefix}{key(field)}"
        checked += bool(words)
    assert checked or cls in (recipe.RL, recipe.Native), f"{cls.__name__} has no closed vocabulary to compare"


def test_every_precision_has_a_width() -> None:
    assert set(recipe.PRECISION_BYTES) == set(typing.get_args(recipe.Precision))


def test_required_keys_are_the_fields_without_a_default() -> None:
    """A schema-required key has no dataclass default, and the other way round."""
    schema = recipe_schema()
    for prefix, cls, _ in SECTIONS:
        no_default = {key(f) for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                      and f.default_factory is dataclasses.MISSING} - NOT_WRITTEN
        required = set((schema if not prefix else schema["properties"][prefix[:-1]]).get("required", ()))
        if cls is recipe.Recipe:
            required -= {"recipe"}
            no_default -= {"name"}  # the file's stem when absent, not a constant default
        assert no_default == required, f"{prefix or 'top level'}"


def test_fields_written_inside_another_key_are_in_its_mapping_form() -> None:
    properties = recipe_schema()["properties"]
    for name, (outer, inner) in WRITTEN_INSIDE.items():
        assert name in {f.name for f in dataclasses.fields(recipe.Recipe)}
        forms = [o for o in properties[outer]["oneOf"] if o.get("type") == "object"]
        assert any(inner in form["properties"] for form in forms), (name, outer, inner)


def test_every_pattern_says_in_words_what_it_accepts() -> None:
    """An error message names a patterned string by its `title` or first example; a pattern
    with neither made `describe` raise KeyError (found by the hostile suite on native.verl)."""
    missing: list[str] = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            if "pattern" in node and not (node.get("title") or node.get("examples")):
                missing.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(recipe_schema(), "#")
    assert not missing


def test_the_schema_file_is_generated_from_the_dataclasses() -> None:
    """`recipe.schema.json` is what `schemas.generate` writes from `Recipe`: a field, bound or
    docstring changed in `recipe.py` without regenerating fails here, naming the command."""
    from distrecipe.schemas import generate

    assert generate.FILE.read_text("utf-8") == generate.text(), "run: python -m distrecipe.schemas.generate"
