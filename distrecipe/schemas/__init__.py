"""The JSON Schema is the single source of truth for the recipe format.

Editors read `recipe.schema.json` through yaml-language-server; distrecipe reads the
same file here and turns the validator's errors into one-line messages with a
position, the allowed values and a did-you-mean.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from distrecipe.errors import RecipeError
from distrecipe.keys import did_you_mean, dotted
from distrecipe.schemas.conforms import conforms
from distrecipe.source import Document, KeyPath


@cache
def recipe_schema() -> dict[str, Any]:
    text = (Path(__file__).parent / "recipe.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def recipe_fields() -> dict[str, dict[str, Any]]:
    """Every key a recipe writes, dotted (`batch.micro`, `launch.slurm.time`, sections and the
    `recipe:` version included) → its schema, in the schema's order; a key written inside a
    field's mapping form (`activation_checkpointing.every`) too."""
    out: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, sub in node.get("properties", {}).items():
            key = f"{prefix}{name}"
            out[key] = sub
            walk(sub, f"{key}.")
            for form in (*sub.get("oneOf", ()), *sub.get("anyOf", ())):
                walk(form, f"{key}.")

    walk(recipe_schema(), "")
    return out


def required(key: str) -> bool:
    """Whether a recipe must state the field at dotted `key` (its section, when it has one)."""
    parent, _, name = key.rpartition(".")
    node = recipe_schema() if not parent else recipe_fields().get(parent, {})
    return name in node.get("required", ())


def describe(schema: dict[str, Any]) -> str:
    """What a schema accepts, in words a user reads in an error message."""
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) if v is not None else "null" for v in schema["enum"])
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return " or ".join(describe(s) for s in schema[combinator])
    kind = schema.get("type")
    if kind == "string" and "pattern" in schema:
        return str(schema.get("title") or f"a string like {schema['examples'][0]}")
    words = {"integer": "an integer", "number": "a number", "string": "a string",
             "boolean": "true or false", "null": "null", "array": "a list", "object": "a mapping"}
    text = words.get(str(kind), str(kind))
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{text} from {low:,} to {high:,}"
    if low is not None:
        text += f" ≥ {low:,}"
    if "exclusiveMinimum" in schema:
        text += f" > {schema['exclusiveMinimum']:,}"
    if high is not None:
        text += f" ≤ {high:,}"
    return text


_SHAPE_CHECKS = frozenset({
    "oneOf", "anyOf", "type", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems", "minLength", "maxLength",
})


def validate_recipe(doc: Document) -> None:
    """Raise a `RecipeError` for the first schema violation in document order.

    Non-finite numbers are refused first: JSON Schema's bounds cannot catch NaN (every
    comparison with it is false), and `1e400` reads as infinity.
    """
    _finite(doc, doc.data, ())
    if conforms(doc.data, recipe_schema()):
        return
    import jsonschema  # deferred: the full validator is only needed to explain a failure

    validator = jsonschema.Draft202012Validator(recipe_schema())
    errors = list(validator.iter_errors(doc.data))
    if not errors:
        return

    def order(err: jsonschema.ValidationError) -> tuple[int, int]:
        pos = doc.where(tuple(err.absolute_path))
        return (pos.line, pos.col)

    errors.sort(key=order)
    first = errors[0]
    message, path, at_key = _message(first)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    raise RecipeError(message + more, doc.where(path, key=at_key), keys=_keys(first, path))


def _keys(err: Any, path: KeyPath) -> tuple[str, ...]:
    """The dotted key a schema refusal is about: the value's (a list item's: its list's),
    a missing required key's own, or nothing for the document as a whole."""
    named = [part for part in path if isinstance(part, str)]
    if err is not None and err.validator == "required" and "'" in err.message:
        named.append(err.message.split("'")[1])
    return (".".join(named),) if named else ()


def _finite(doc: Document, data: Any, path: KeyPath) -> None:
    if isinstance(data, float) and not math.isfinite(data):
        raise RecipeError(f"{dotted(path)} must be a finite number, got {data}", doc.where(path),
                          keys=_keys(None, path))
    if isinstance(data, dict):
        for key, value in data.items():
            _finite(doc, value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _finite(doc, value, (*path, i))


def shown(value: Any) -> str:
    """`repr(value)` cut to a readable length: a message never echoes 100,000 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"… ({len(text):,} characters)"


def _message(err: Any) -> tuple[str, KeyPath, bool]:
    path: KeyPath = tuple(err.absolute_path)
    where = dotted(path)
    schema = err.schema
    if err.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        key = extra[0]
        section = f" in {where}" if path else ""
        return (
            f"unknown key {shown(key)}{section}{did_you_mean(key, allowed)} "
            f"(allowed: {', '.join(allowed)})",
            (*path, key),
            True,
        )
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return f"{where} is missing required key {missing!r}", path, False
    if err.validator in ("enum", "const"):
        hint = did_you_mean(str(err.instance), [str(v) for v in schema.get("enum", [])])
        return f"{where} must be {describe(schema)}, got {shown(err.instance)}{hint}", path, False
    if err.validator in _SHAPE_CHECKS:
        return f"{where} must be {describe(schema)}, got {shown(err.instance)}", path, False
    return f"{where}: {err.message}", path, False


def coerce_integers(data: Any, schema: dict[str, Any]) -> Any:
    """`2.0` → `2` wherever the schema wants an integer and no other number.

    JSON Schema counts 2.0 as an integer, so it validates; the rest of distrecipe then
    must not see a float where it counts ranks, samples or bytes (`"train_batch_size":
    8.0` is not what anyone meant to emit).
    """
    if isinstance(data, float) and data.is_integer() and _wants_integer(schema):
        return int(data)
    if isinstance(data, dict):
        properties = schema.get("properties", {})
        return {k: coerce_integers(v, properties.get(k, {})) for k, v in data.items()}
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [coerce_integers(v, schema["items"]) for v in data]
    return data


def _wants_integer(schema: dict[str, Any]) -> bool:
    kinds: set[str] = set()
    for branch in [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]:
        kind = branch.get("type")
        kinds.update([kind] if isinstance(kind, str) else kind or [])
    return "integer" in kinds and "number" not in kinds
