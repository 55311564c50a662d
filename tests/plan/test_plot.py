"""`plan --plot`: the bars are the table's numbers (no matplotlib needed for `stacks`)."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.plot import stacks
from distrecipe.plan.report import compare
from tests.conftest import RECIPES


def test_each_bar_is_the_tables_need_and_crosses_the_line_exactly_when_it_does_not_fit() -> None:
    plan = load_plan(RECIPES / "seed-8b-32gpu-zero2.yaml")
    rows = compare(plan)
    bars = stacks(rows)
    assert plan.gpu_memory is not None
    for i, row in enumerate(rows):
        height = sum(values[i] for values in bars.values())
        assert height * 1e9 == pytest.approx(row.training_need)
        assert (height * 1e9 <= plan.gpu_memory) == (row.need <= plan.gpu_memory), row.label
        assert row.fits or height * 1e9 > plan.gpu_memory, row.label  # a bar under the line is never refused
    assert {row.fits for row in rows} == {True, False}  # the seed's DDP does not fit; ZeRO-1 is tight
