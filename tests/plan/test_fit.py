"""`batch.micro: auto` (distrecipe/plan/fit.py): the largest micro-batch whose verdict is *fits*,
never *tight*, within `cluster.gpu_memory` less `cluster.headroom`."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.plan.report import estimate
from tests.conftest import RECIPES

SEED = str(RECIPES / "seed-8b-32gpu-zero2.yaml")


@pytest.mark.parametrize(("headroom", "micro"), [(None, 2), ("0.05", 2), ("0.12", 1), ("20GB", 1)])
def test_auto_micro_fits_at_the_top_of_the_band_less_headroom(headroom: str | None, micro: int) -> None:
    """Micro 2 needs 67.91 GB, 73.18 GB at DeepSpeed's band's top: within 80 GB and 76 GB,
    not within 70.4 GB (12 % kept) nor 60 GB."""
    overrides = ("batch.micro=auto",) + (() if headroom is None else (f"cluster.headroom={headroom}",))
    plan = load_plan(SEED, overrides)
    assert plan.batch.micro == micro
    said = estimate(plan).verdict
    assert said is not None and said.word == "fits"
    bigger = load_plan(SEED, (*overrides[1:], f"batch.micro={micro * 2}"))
    assert estimate(bigger).verdict.word != "fits"  # type: ignore[union-attr]
    if headroom is not None:
        assert "less headroom" in plan.provenance["batch.micro"]
