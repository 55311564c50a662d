"""Hostile input never produces a traceback: exit 0 or 2, one clear message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Result
from tests.strategies import recipe_documents, to_yaml

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def check(cli: Callable[..., Result], path: Path) -> Result:
    result = cli("resolve", path)
    assert result.code in (0, 2), result
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    if result.code == 2:
        assert len(result.err.strip().splitlines()) == 1, result.err
    return result


@FUZZ
@given(text=st.text(max_size=300))
def test_random_text(cli: Callable[..., Result], tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check(cli, path)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["auto", "all", "cpu", "80GiB", "1e-5"]))


@st.composite
def broken_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid recipe with one value replaced, removed or a key added, anywhere in it."""
    doc = draw(recipe_documents(strategies=("ddp", "zero", "fsdp", "megatron")))
    section = draw(st.sampled_from(sorted(doc)))
    target = doc
    key: str = section
    if isinstance(doc[section], dict) and doc[section] and draw(st.booleans()):
        target = doc[section]
        key = draw(st.sampled_from(sorted(target)))
    action = draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "replace":
        target[key] = draw(st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                                     st.dictionaries(st.text(max_size=5), SCALARS, max_size=2)))
    elif action == "delete":
        del target[key]
    else:
        target[draw(st.text(min_size=1, max_size=10))] = draw(SCALARS)
    return doc


@FUZZ
@given(doc=broken_documents())
def test_schema_violating_documents(cli: Callable[..., Result], tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(to_yaml(doc), encoding="utf-8")
    check(cli, path)


@FUZZ
@given(doc=recipe_documents(strategies=("ddp", "zero", "fsdp", "megatron")))
def test_valid_documents_resolve(cli: Callable[..., Result], tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert check(cli, path).code == 0


@FUZZ
@given(doc=st.one_of(broken_documents(), recipe_documents()))
def test_quick_check_agrees_with_jsonschema(doc: dict[str, Any]) -> None:
    """`conforms` answers the happy path alone, so it must never disagree with jsonschema."""
    import jsonschema

    from distrecipe.schemas import recipe_schema
    from distrecipe.schemas.conforms import conforms

    schema = recipe_schema()
    assert conforms(doc, schema) == jsonschema.Draft202012Validator(schema).is_valid(doc)
