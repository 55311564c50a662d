"""A job carried from one engine to another and back loses nothing without a word.

`tests/roundtrip.py` runs the trips (import, compile for the other engine, import that,
compile for the first again) and compares the first and last file as `distrecipe diff`
does; a key that changed and that no finding or note along the way names is silent.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.roundtrip import TARGETS, corpus_files, generated_trip, in_process, report, trips
from tests.strategies import journey_documents

PAIRS = [(a, b) for a in TARGETS for b in TARGETS if a != b]


@pytest.mark.slow
def test_no_corpus_file_loses_a_setting_without_a_word() -> None:
    results = trips(in_process, list(corpus_files()))
    print("\n" + report(results))
    silent = [f"{r.source} ({r.start} → {r.via}): {', '.join(r.silent)}" for r in results if r.silent]
    assert silent == []
    assert sum(r.outcome in ("same", "named") for r in results) >= 150, "the trips must really run"


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
