"""`recipe.schema.json` generated from the `Recipe` dataclasses, the one authority on the format.

    python -m distrecipe.schemas.generate           # write distrecipe/schemas/recipe.schema.json
    python -m distrecipe.schemas.generate --check   # exit 1 when the file is not what this writes

Each field's type gives its JSON type (a `Literal` an enum, `int | Literal["auto"]` a oneOf,
a section an object that refuses unknown keys), its docstring the description, and its
`recipe.spec` metadata the rest (bounds, patterns, the form a size or count is written in).
A field without a default is required unless `spec(optional=True)` says the loader fills it.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import types
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from distrecipe import recipe
from distrecipe.recipe import Recipe, field_key

FILE = Path(__file__).parent / "recipe.schema.json"
HEADER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://distrecipe.dev/schemas/recipe-1.json",
    "title": "distrecipe recipe, format version 1",
    "description": "One declarative description of a distributed training job.",
}
VERSION = {"const": 1, "description": "Format version; only 1 exists."}
"""The `recipe:` key every recipe starts with; not a field: the loader checks it."""


def schema() -> dict[str, Any]:
    """The whole schema: the header, then `Recipe` as the top-level object."""
    top = _object(Recipe)
    top["properties"] = {"recipe": VERSION, **top["properties"]}
    top["required"] = ["recipe", *top["required"]]
    return {**HEADER, **top}


def text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def _object(cls: Any) -> dict[str, Any]:
    hints, docs = get_type_hints(cls), _docstrings(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    nested: list[tuple[str, dict[str, Any]]] = []
    section = _section_key(cls)
    for item in fields(cls):
        key = field_key(section, item)
        if key is None:
            continue
        value = _field(item, hints[item.name], _section_doc(hints[item.name]) or docs.get(item.name))
        name = key.removeprefix(f"{section}.") if section else key
        if "." in name:  # written inside another field's mapping form
            nested.append((name, value))
            continue
        properties[name] = value
        if item.default is MISSING and item.default_factory is MISSING and not item.metadata.get("optional"):
            required.append(name)
    for name, value in nested:
        owner, _, leaf = name.partition(".")
        mapping = next(b for b in properties[owner]["oneOf"] if b.get("type") == "object")
        mapping["properties"][leaf] = value
    out: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        out["required"] = required
    out["properties"] = properties
    return out


def _section_key(cls: Any) -> str:
    """The dotted prefix of a section's keys: its field name in `Recipe` ('' for `Recipe`)."""
    if cls is Recipe:
        return ""
    owners = {_bare(hint): name for name, hint in get_type_hints(Recipe).items()}
    if cls in owners:
        return owners[cls]
    launch = {_bare(hint): name for name, hint in get_type_hints(recipe.Launch).items()}
    return f"launch.{launch[cls]}"


def _field(item: Field[Any], hint: Any, doc: str | None) -> dict[str, Any]:
    meta = item.metadata
    out: dict[str, Any]
    if meta.get("written") is not None:
        out = json.loads(json.dumps(meta["written"]))  # a copy: the form is shared by fields
    else:
        out = _type(hint, dict(meta.get("json", {})))
        if meta.get("nullable"):
            out = {"oneOf": [out, {"type": "null"}]}
    if doc:
        out["description"] = " ".join(doc.split())
    return out


def _type(hint: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of one annotation, with the field's own keywords merged in."""
    args = [a for a in get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    words = [a for a in args if get_origin(a) is Literal]
    others = [a for a in args if get_origin(a) is not Literal]
    if not others:
        return {"enum": [w for a in words for w in get_args(a)], **_clean(extra)}
    base = _plain(others[0], extra)
    if not words:
        return base
    return {"oneOf": [base, *({"const": w} for a in words for w in get_args(a))]}


def _plain(hint: Any, extra: dict[str, Any]) -> dict[str, Any]:
    if is_dataclass(hint):
        return _object(hint)
    if get_origin(hint) is tuple:
        items = get_args(hint)
        item_schema = {"type": _json_type(items[0]), **_default_keywords(items[0])}
        item_schema.update(extra.pop("items", {}))
        out: dict[str, Any] = {"type": "array"}
        if Ellipsis not in items:
            out.update(minItems=len(items), maxItems=len(items))
        out["items"] = _clean(item_schema)
        return {**out, **_clean(extra)}
    out = {"type": _json_type(hint), **_default_keywords(hint)}
    out.update(extra)
    return _clean(out)


def _json_type(hint: Any) -> str:
    if get_origin(hint) is dict:
        return "object"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}[hint]


def _default_keywords(hint: Any) -> dict[str, Any]:
    """What a bare `str` means in a recipe: written, so not empty."""
    return {"minLength": 1} if hint is str else {}


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop keywords a field set to None (a pattern replaces the non-empty rule)."""
    return {key: value for key, value in schema.items() if value is not None}


def _section_doc(hint: Any) -> str | None:
    """A section's description: its class's docstring, which says what the section is for."""
    cls = _bare(hint)
    return inspect.cleandoc(cls.__doc__) if is_dataclass(cls) and cls.__doc__ else None


def _is_union(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) or str(get_origin(hint)) == "typing.Union"


def _bare(hint: Any) -> Any:
    args = [a for a in get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    return args[0]


@cache
def _docstrings(cls: Any) -> dict[str, str]:
    """Each field's attribute docstring (the string literal after it in the class body)."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        if FILE.read_text("utf-8") != text():
            print(f"{FILE} is not what the Recipe dataclasses give: "
                  "run python -m distrecipe.schemas.generate", file=sys.stderr)
            return 1
        return 0
    FILE.write_text(text(), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
