"""A job carried from one engine to another and back loses nothing without a word.

`tests/roundtrip.py` runs the trips (import, compile for an engine, the same or another,
import that, compile for the first again) and compares the first and last file as
`distrecipe diff` does; a key that changed is silent unless a finding or note along the way
names it as the user wrote it (`gradient_clipping`, not the recipe's `grad_clip`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.roundtrip import (
    RL_TARGETS,
    TARGETS,
    generated_trip,
    in_process,
    report,
    rl_files,
    trip,
    trip_files,
    trips,
)
from tests.strategies import NONE, Only, journey_documents, recipe_documents

PAIRS = [(a, b) for a in TARGETS for b in TARGETS]
"""Every pair, an engine with itself too: a file imported and compiled back."""


@pytest.mark.slow
def test_no_corpus_file_loses_a_setting_without_a_word() -> None:
    """Every corpus file import reads (Axolotl's, LLaMA-Factory's and launch scripts too,
    each with the ds_config it names), through every engine and back."""
    results = trips(in_process, list(trip_files()))
    print("\n" + report(results))
    silent = [f"{r.source} ({r.start} → {r.via}): {', '.join(r.silent)}" for r in results if r.silent]
    assert silent == []
    assert sum(r.outcome in ("same", "named") for r in results) >= 380, "the trips must really run"


DONE: dict[tuple[str, str], list[str]] = {pair: [] for pair in PAIRS}


@pytest.mark.slow
@pytest.mark.parametrize(("start", "via"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_generated_recipe_loses_a_setting_without_a_word(start: str, via: str, data: Any) -> None:
    """200 generated recipes a pair, each compiled for `start` and carried through `via` and back."""
    doc = data.draw(journey_documents(rl="verl" in (start, via)))
    with tempfile.TemporaryDirectory() as tmp:
        result = generated_trip(in_process, doc, start, via, Path(tmp))
    DONE[(start, via)].append(result.outcome)
    assert not result.silent, (doc, result.silent)


def test_no_rl_corpus_file_loses_a_setting_without_a_word() -> None:
    """Each TRL config and OpenRLHF train_ppo_ray line of tests/corpus/rl, through TRL,
    OpenRLHF and the four other targets and back: compared key by key as the trainer reads
    them (`native_changes`), every difference named or the trip refused."""
    results = trips(in_process, list(rl_files()), (*RL_TARGETS, *TARGETS))
    silent = [f"{r.source} ({r.start} → {r.via}): {', '.join(r.silent)}" for r in results if r.silent]
    assert silent == []
    assert sum(r.outcome == "named" for r in results) >= 20, "the trips must really run"


TRL_CONFIG = """model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
dataset_name: trl-lib/tldr
reward_funcs: [accuracy]
beta: 0.04
max_completion_length: 256
temperature: 0.9
env: {TOKENIZERS_PARALLELISM: "false"}
learning_rate: 1.0e-06
per_device_train_batch_size: 4
gradient_accumulation_steps: 2
steps_per_generation: 4
num_generations: 8
use_vllm: true
vllm_mode: server
vllm_gpu_memory_utilization: 0.5
bf16: true
seed: 7
logging_steps: 5
"""


@pytest.mark.parametrize("via", [*RL_TARGETS, *TARGETS])
def test_a_trl_config_comes_back_or_says_what_it_lost(via: str, tmp_path: Path) -> None:
    """A GRPO config TRL's parser takes (its model, data and loss keys, a generation of
    several steps, a vLLM server's memory): TRL's own keys travel in `native.trl`, so the
    trip through TRL gives the file back, and every other target names what it drops."""
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL_CONFIG, encoding="utf-8")
    (tmp_path / "work").mkdir()
    result = trip(in_process, path, "trl", via, tmp_path / "work", ["--world", "8"])
    assert not result.silent, result
    if via == "trl":
        assert result.outcome == "same", result
    elif via in ("openrlhf", "verl"):  # DDP, which OpenRLHF's ZeRO refuses; a vLLM server verl cannot place
        assert result.outcome == f"refused at compile --target {via}", result
    else:
        assert result.outcome == "named" and "beta" in result.named, result


@pytest.mark.slow
@pytest.mark.parametrize("target", RL_TARGETS)
@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_generated_rl_recipe_loses_a_setting_through_its_trainer(target: str, data: Any) -> None:
    """Generated recipes with `rl`, compiled for TRL or OpenRLHF, imported and compiled back:
    the two files are compared key by key as the trainer reads them."""
    strategies = ("zero",) if target == "openrlhf" else ("ddp", "zero", "fsdp")
    only = Only(shard_group=NONE, adam=NONE, fp32=NONE) if target == "openrlhf" else Only()
    doc = data.draw(recipe_documents(strategies=strategies, only=only, rl=True))
    with tempfile.TemporaryDirectory() as tmp:
        result = generated_trip(in_process, doc, target, target, Path(tmp))
    assert not result.silent, (doc, result.silent)
