"""`scripts/plan_bands.py`: `distrecipe/plan/bands.json` is what the script computes from the
corpus now (a planner or corpus change that moves an error turns this red until the bands are
written again: `make bands`), and docs/plan.md's table is the script's."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from distrecipe.plan.verdict import BANDS
from tests.calibration import judged
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import plan_bands


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    """What the script computes from the corpus now (judging it is the slow part)."""
    return plan_bands.compute(judged())


def test_the_bands_are_what_the_corpus_gives_now(data: dict[str, Any]) -> None:
    assert BANDS.read_text(encoding="utf-8") == plan_bands.text(data), \
        "stale: run python scripts/plan_bands.py (make bands)"


def test_docs_hold_the_script_s_table(data: dict[str, Any]) -> None:
    docs = plan_bands.DOCS.read_text(encoding="utf-8")
    assert plan_bands.with_table(docs, data) == docs
    assert plan_bands.table(data) in docs


def test_every_band_holds_its_rows_and_the_wide_band_holds_every_band(data: dict[str, Any]) -> None:
    wide = data["unknown"]
    for cells in data["bands"].values():
        for entry in cells.values():
            assert entry["rows"] >= plan_bands.MIN_ROWS
            assert wide["low"] <= entry["low"] <= entry["high"] <= wide["high"]
    rows = [i for i in judged() if i.reason is None and i.truth is not None]
    assert wide["rows"] == len(rows) and all(wide["low"] <= i.truth <= wide["high"] for i in rows)  # type: ignore[operator]


def test_check_says_when_the_file_is_stale() -> None:
    done = subprocess.run([sys.executable, "scripts/plan_bands.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""


def test_the_counted_verdicts_are_test_plan_gpu_s(data: dict[str, Any]) -> None:
    """The documented counts and the rows tests/test_plan_gpu.py names agree; held out, the bands
    must still do no worse than a yes/no."""
    from tests.test_plan_gpu import KNOWN_WRONG_VERDICTS

    counts = data["published_verdicts"]
    assert counts["wrong with the bands, in sample"] == len(KNOWN_WRONG_VERDICTS)
    assert counts["wrong with the bands, held out"] <= counts["wrong as yes/no"]
