"""Hydra's override grammar both ways (`engines/hydra.py`), with Hydra's own parser and
OmegaConf as the judges: a launch script's value is the whole shell word, and a value
written as an override is read back by Hydra (and resolved by OmegaConf) as the same."""

from __future__ import annotations

from typing import Any

import pytest

from distrecipe.engines.hydra import format_value, literal_text, parse_value, read_overrides

overrides_parser = pytest.importorskip("hydra.core.override_parser.overrides_parser")
config_loader = pytest.importorskip("hydra._internal.config_loader_impl")
omegaconf = pytest.importorskip("omegaconf")


def hydra_reads(line: str, resolve: bool = False) -> Any:
    """What verl's config holds at `a.b` after Hydra applies the override `line`."""
    cfg = omegaconf.OmegaConf.create({"a": {"b": 0}})
    parsed = overrides_parser.OverridesParser.create().parse_overrides([line])
    config_loader.ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    return omegaconf.OmegaConf.to_container(cfg, resolve=resolve)["a"]["b"]


def test_a_script_value_is_the_whole_shell_word() -> None:
    doc = read_overrides("python3 -m verl.trainer.main_ppo \\\n"
                         "  data.max_response_length=$((512 + 512)) \\\n"
                         "  data.max_prompt_length=$(((A + B) / C)) trainer.experiment_name=\"qwen run\"x \\\n"
                         "  trainer.nnodes=1\n", "run.sh")
    assert doc.data["data"] == {"max_response_length": "$((512 + 512))", "max_prompt_length": "$(((A + B) / C))"}
    assert doc.data["trainer"] == {"experiment_name": "qwen runx", "nnodes": 1}  # bash removes the quotes


@pytest.mark.parametrize("value", [
    "a b", "8", "1_000", "true", "null", "none", "", "x,y", "[a]", "{a:1}", "k=v", "it's", "a\\", "a\\'b",
    "Qwen/Qwen2.5-0.5B", "$HOME/data", "$((512 + 512))", "${oc.env:HOME}/x", 8, 0.5, True, None,
    ["a b", 1], {"k": "x,y"},
])
def test_hydra_reads_a_written_value_back_as_it_was(value: Any) -> None:
    assert hydra_reads(f"a.b={format_value(value)}") == value
    assert parse_value(format_value(value)) == value


@pytest.mark.parametrize("text", ["${HOME}/verl", "x\\${HOME}", "${A}${B}", "plain"])
def test_literal_text_is_not_an_interpolation(text: str) -> None:
    assert hydra_reads(f"a.b={format_value(literal_text(text))}", resolve=True) == text
