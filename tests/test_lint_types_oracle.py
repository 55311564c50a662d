"""DeepSpeed judges lint's wrong-type verdict (DR316).

For values of every JSON type, and the ones pydantic's lax mode coerces or not (`2.0`
and `"8"` for an integer, `1.5`, `"yes"`, `"x"`), put in each typed key of every
section DeepSpeed validates with pydantic, `DeepSpeedConfig` refuses the value (a
pydantic error located at that key, other than a bound such as "greater than 0") exactly
when lint reports DR316 for it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distrecipe.engines.tables import table
from distrecipe.judges import deepspeed as deepspeed_judge
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = pytest.mark.slow  # imports DeepSpeed

BATCH = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
VALUES: list[Any] = [5, 2.0, 1.5, True, "8", "8.", "2.5", "yes", " yes ", "x", None, [1], {"a": 1}]
BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "extra_forbidden"})
"""pydantic errors about a value's size, not its type, and unknown keys (DR313): not DR316's."""


def nested(path: str, leaf: dict[str, Any]) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: nested(rest, leaf) if rest else leaf} if path else leaf


def cases() -> Iterator[tuple[str, str, Any]]:
    for path, section in sorted(table("deepspeed")["sections"].items()):
        for key, entry in sorted(section["keys"].items()):
            if "types" in entry and "alias_of" not in entry and not entry.get("deprecated"):
                for value in VALUES:
                    yield path, key, value


def refuses_type(config: dict[str, Any], key: str) -> bool:
    """Whether DeepSpeed refuses `config` for the type of `key`'s value."""
    from pydantic import ValidationError

    try:
        deepspeed_judge.parse(config, world=1)
    except ValidationError as exc:
        # An item of a list (`compile.passes[0]`) is not judged: the tables record no item types.
        return any(key in error["loc"] and error["type"] not in BOUNDS
                   and not isinstance(error["loc"][-1], int) for error in exc.errors())
    except Exception:  # refused for another reason (a rule across keys): not a type
        return False
    return False


@pytest.mark.parametrize(("section", "key", "value"), list(cases()))
def test_deepspeed_refuses_type_iff_lint_errs(section: str, key: str, value: Any) -> None:
    config = {**BATCH, **nested(section, {key: value})}
    refused = refuses_type(config, key)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds_config.json"
        path.write_text(json.dumps(config))
        found = [f for f in lint([path], config=LintConfig(), world=1).findings if f.code == "DR316"]
    assert refused == bool(found), (config, [f.message for f in found])
