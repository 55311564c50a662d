"""The engines judge what `diff` calls "no change" between two native files.

A key `diff` says is at the engine's default can be left out without changing what
the engine reads: DeepSpeed parses every real-world ds_config it accepts to the same
`DeepSpeedConfig` with all such keys removed; and the defaults `diff` reads for an
unstated verl key are what OmegaConf resolves in the composed config, with a real
script's overrides merged in (interpolations follow the file's own values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distrecipe.diff import native_changes
from distrecipe.engines.defaults import lookup
from distrecipe.engines.native import read_file
from distrecipe.engines.tables import verl_tree
from distrecipe.engines.verl import verl_config
from distrecipe.errors import DistrecipeError
from distrecipe.source import Document
from tests import deepspeed_judge

pytestmark = pytest.mark.slow  # imports DeepSpeed and OmegaConf

REAL = Path(__file__).parent / "corpus" / "real"
BATCH = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}


def _without_auto(node: Any) -> Any:
    """The file as the Trainer leaves it for DeepSpeed, minus the fill: "auto" keys dropped."""
    return {k: _without_auto(v) for k, v in node.items() if v != "auto"} if isinstance(node, dict) else node


def _without(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    if len(path) == 1:
        return {k: v for k, v in data.items() if k != path[0]}
    return {**data, path[0]: _without(data[path[0]], path[1:])}


def _leaf_paths(node: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for key, value in node.items():
        out += _leaf_paths(value, (*path, key)) if isinstance(value, dict) and value else [(*path, key)]
    return out


def _unchanged_without(data: dict[str, Any]) -> dict[str, Any]:
    """`data` minus every key diff reports no change for when that key alone is left out."""
    doc = Document(data, "a.json")
    stripped = data
    for path in _leaf_paths(data):
        if path[0] not in BATCH and not native_changes("deepspeed", doc, Document(_without(data, path), "b"))[0]:
            stripped = _without(stripped, path)
    return stripped


def _view(value: Any) -> Any:
    """What DeepSpeed derived, as plain data: pydantic models dumped, objects by their fields;
    an offload block with device `none` is no offload (DeepSpeed's engine asks the device)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        value = {k: v for k, v in vars(value).items() if not k.startswith("_")}
    if isinstance(value, dict):
        if set(value) >= {"device", "pin_memory"} and str(value["device"]).endswith("none"):
            return None
        return {k: _view(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_view(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def test_deepspeed_reads_a_file_the_same_without_the_keys_diff_calls_default() -> None:
    compared = 0
    for path in sorted((REAL / "deepspeed").glob("*.json")):
        try:
            data = {**_without_auto(read_file(path).data), **BATCH}
        except DistrecipeError:
            continue  # not JSON the engine could read either
        if not deepspeed_judge.accepts(data, world=1):
            continue
        stripped = _unchanged_without(data)
        assert native_changes("deepspeed", Document(data, "a"), Document(stripped, "b"))[0] == []
        assert _view(deepspeed_judge.parse(stripped, 1)) == _view(deepspeed_judge.parse(data, 1)), path.name
        compared += stripped != data
    assert compared >= 30


def test_verl_defaults_are_what_omegaconf_resolves_with_the_scripts_overrides() -> None:
    omegaconf = pytest.importorskip("omegaconf")
    checked = 0
    for path in sorted((REAL / "verl").glob("*.sh")):
        doc = read_file(path)
        tree = verl_tree(verl_config(doc.data, doc.lines))
        data = _scalars_only(doc.data)
        merged = omegaconf.OmegaConf.merge(omegaconf.OmegaConf.create(tree), data)
        resolved = omegaconf.OmegaConf.to_container(merged, resolve=True)
        default = lookup("verl", data, doc.lines)
        for leaf in _leaf_paths(tree):
            if _stated(data, leaf):
                continue
            node: Any = resolved
            for part in leaf:
                node = node[part]
            found = default(leaf)
            assert (None if found is None else found.value) == node, (path.name, leaf)
            checked += 1
    assert checked > 10_000


def _stated(data: Any, path: tuple[str, ...]) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _scalars_only(data: dict[str, Any]) -> dict[str, Any]:
    """The script's overrides without shell variables (`$x` is the shell's, not a value)."""
    return {k: _scalars_only(v) if isinstance(v, dict) else v for k, v in data.items()
            if not (isinstance(v, str) and "$" in v)}
