"""A quick yes/no check of a document against the recipe schema.

Importing jsonschema and building a 2020-12 validator costs more than everything
else `distrecipe compile` does (about 80 ms of a 200 ms run), and on the happy path
only the answer "valid" is needed. This interprets the same schema file, for the
keywords it uses; the full validator still runs whenever the answer is "invalid", to
produce the message. A keyword this module does not know is an error, so the schema
cannot outgrow it silently, and a property test checks both always agree.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "number": (int, float), "integer": (int, float), "null": (type(None),),
}
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "default", "examples"})


def conforms(instance: Any, schema: dict[str, Any]) -> bool:
    """True when `instance` satisfies `schema` (JSON Schema 2020-12, the subset in use)."""
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword in ("properties", "additionalProperties"):
            continue
        check = _CHECKS.get(keyword)
        if check is None:
            raise NotImplementedError(f"schema keyword {keyword!r} is not supported by conforms()")
        if not check(instance, value, schema):
            return False
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        for key, item in instance.items():
            if key in properties:
                if not conforms(item, properties[key]):
                    return False
            elif schema.get("additionalProperties", True) is False:
                return False
    return True


def _type(instance: Any, kind: str, _: dict[str, Any]) -> bool:
    if isinstance(instance, bool) and kind not in ("boolean",):
        return False
    if kind == "integer":
        return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())
    return isinstance(instance, _TYPES[kind])


def _number(instance: Any) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


_CHECKS: dict[str, Any] = {
    "type": _type,
    "const": lambda i, v, _: _same(i, v),
    "enum": lambda i, v, _: any(_same(i, option) for option in v),
    "required": lambda i, v, _: not isinstance(i, dict) or all(k in i for k in v),
    "minimum": lambda i, v, _: not _number(i) or i >= v,
    "maximum": lambda i, v, _: not _number(i) or i <= v,
    "exclusiveMinimum": lambda i, v, _: not _number(i) or i > v,
    "exclusiveMaximum": lambda i, v, _: not _number(i) or i < v,
    "minLength": lambda i, v, _: not isinstance(i, str) or len(i) >= v,
    "maxLength": lambda i, v, _: not isinstance(i, str) or len(i) <= v,
    "pattern": lambda i, v, _: not isinstance(i, str) or re.search(v, i) is not None,
    "minItems": lambda i, v, _: not isinstance(i, list) or len(i) >= v,
    "maxItems": lambda i, v, _: not isinstance(i, list) or len(i) <= v,
    "items": lambda i, v, _: not isinstance(i, list) or all(conforms(x, v) for x in i),
    "oneOf": lambda i, v, _: sum(conforms(i, s) for s in v) == 1,
    "anyOf": lambda i, v, _: any(conforms(i, s) for s in v),
}
