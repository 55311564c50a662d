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

from tests.roundtrip import TARGETS, generated_trip, in_process, report, trip_files, trips
from tests.strategies import journey_documents

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
