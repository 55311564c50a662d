"""`fits?` as a verdict with its error band: *fits*, *tight* or *does not fit*.

An analytical plan always errs, so one number and yes/no blocks jobs that would train.
Each engine family × kernel choice carries the band of relative errors the memory model
showed on published runs, else its family's, else the wide one (`bands.json`, written by
`scripts/plan_bands.py` from `tests/corpus/gpu/published.csv`; how a band is derived is in
docs/plan.md, "Fits?").
`needed` at the band's two ends against the usable memory (`cluster.gpu_memory` less
`cluster.headroom`) decides: *fits* when even the pessimistic end fits, *does not fit*
when even the optimistic end does not, *tight* in between. `launch` and `compile` refuse
only *does not fit*; what distrecipe chooses for the user (`batch.micro: auto`, `plan
--search`, `init`) must *fit*.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from distrecipe.job import Plan
from distrecipe.plan.activations import kernel_choice
from distrecipe.plan.efficiency import engine_family
from distrecipe.plan.units import gb

Word = Literal["fits", "tight", "does not fit"]
BANDS = Path(__file__).with_name("bands.json")
"""The bands, per family × kernel choice and the wide one (`scripts/plan_bands.py`)."""
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Band:
    """Relative error of the truth against the plan (measured ÷ predicted − 1), low to high."""

    family: str
    kernels: str
    low: float
    high: float
    rows: int
    sources: tuple[str, ...]
    wide: bool
    """The wide band: too few published rows of this family (or an `unknown` kernel choice)."""
    pooled: bool = False
    """The family's band over all its kernel choices: too few rows or sources of this one."""

    @property
    def cell(self) -> str:
        """Whose band it is, in words: `deepspeed × eager-hf`, the family's, or the wide band and why."""
        own = f"{self.family} × {self.kernels}"
        if self.wide:
            return f"wide (no band of its own for {own})"
        return f"{self.family}, any kernels (no band of its own for {self.kernels})" if self.pooled else own


@dataclass(frozen=True, slots=True)
class Verdict:
    word: Word
    need: float
    """The plan's `needed` (reserved + CUDA context; verl: the worse phase)."""
    band: Band
    gpu_memory: float
    headroom: float
    """Bytes the user keeps free (`cluster.headroom`)."""
    exact: float = 0.0
    """Bytes of `need` known exactly, outside the band: verl's rollout engine share, which
    vLLM takes as `gpu_memory_utilization` × the GPU whatever the model says."""

    @property
    def usable(self) -> float:
        return self.gpu_memory - self.headroom

    @property
    def low(self) -> float:
        """`need` at the band's optimistic end."""
        return self.exact + (self.need - self.exact) * (1 + self.band.low)

    @property
    def high(self) -> float:
        """`need` at the band's pessimistic end."""
        return self.exact + (self.need - self.exact) * (1 + self.band.high)

    @property
    def refused(self) -> bool:
        """launch and compile refuse only this."""
        return self.word == "does not fit"


def _band(data: dict[str, Any], family: str, kernels: str, wide: bool, pooled: bool = False) -> Band:
    return Band(family, kernels, float(data["low"]), float(data["high"]), int(data["rows"]),
                tuple(data["sources"]), wide, pooled)


@cache
def _table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(BANDS.read_text(encoding="utf-8"))
    return data


def band_of(family: str, kernels: str) -> Band:
    """The cell's band, else its family's over every kernel choice, else the wide one, which an
    `unknown` kernel choice always gets (docs/plan.md says when a cell has none of its own)."""
    table = _table()
    found = table["bands"].get(family, {}).get(kernels)
    if found is not None and kernels != UNKNOWN:
        return _band(found, family, kernels, False)
    pooled = table.get("families", {}).get(family)
    if pooled is not None and kernels != UNKNOWN:
        return _band(pooled, family, kernels, False, True)
    return _band(table[UNKNOWN], family, kernels, True)


def band(plan: Plan) -> Band:
    return band_of(engine_family(plan), kernel_choice(plan))


def headroom(plan: Plan) -> float:
    """Bytes `cluster.headroom` keeps free: a share (a float) of the GPU, or a size (an int)."""
    kept = plan.recipe.cluster.headroom
    if kept is None or plan.gpu_memory is None:
        return 0.0
    return plan.gpu_memory * kept if isinstance(kept, float) else float(kept)


def word(need: float, usable: float, band: Band, exact: float = 0.0) -> Word:
    """The three-way verdict: the pessimistic end within `usable` fits, the optimistic end
    beyond it does not, anything between is tight; `exact` bytes of `need` carry no band."""
    if exact + (need - exact) * (1 + band.high) <= usable:
        return "fits"
    return "does not fit" if exact + (need - exact) * (1 + band.low) > usable else "tight"


def verdict(plan: Plan, need: float, *, exact: float = 0.0, starved: bool = False) -> Verdict | None:
    """`need` judged against the plan's GPU; None without `cluster.gpu_memory`. A verl rollout
    share below its engine's floor (`starved`) does not fit whatever the band: vLLM refuses."""
    if plan.gpu_memory is None:
        return None
    kept, judged = headroom(plan), band(plan)
    said: Word = "does not fit" if starved else word(need, plan.gpu_memory - kept, judged, exact)
    return Verdict(said, need, judged, float(plan.gpu_memory), kept, exact)


def _percent(value: float) -> str:
    return f"{value * 100:+.1f} %".replace("-", "−")


def band_text(said: Verdict) -> str:
    """`−6.8 % … +7.8 %: 63.3 GB–73.2 GB, deepspeed × eager-hf`: the band, where it puts `needed`, whose."""
    return (f"{_percent(said.band.low)} … {_percent(said.band.high)}: {gb(said.low)}–{gb(said.high)}, "
            f"{said.band.cell}")
