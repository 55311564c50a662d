"""Write `distrecipe/plan/bands.json`: the memory error band of each engine family × kernel choice.

    python scripts/plan_bands.py            # write it and docs/plan.md's table (`make bands`), after a
                                            # planner or corpus change
    python scripts/plan_bands.py --check    # exit 1 when either is not what this computes now
    python scripts/plan_bands.py --table    # print the table docs/plan.md holds

Every published row with a memory figure the model describes (`tests.calibration.judged`)
gives the truth against the plan, measured ÷ predicted − 1, for the statistic it states. A
cell's band is the smallest and largest of its rows' errors, rounded outward to 0.01 %; a
cell needs `MIN_ROWS` rows from `MIN_SOURCES` sources, else `plan` uses its family's band
(every row of the family, whatever its kernels, with as many rows and sources; widened to
hold 0, since it is borrowed from other kernels: it never puts the verdict past the plan's
own figure), else the wide band (every row of every cell), as it does for an `unknown`
kernel choice. Leave-one-source-out (`tests.calibration.held_out`) records for each source
the band the others give (its cell's other sources, or the wide band without it when it is
its cell's only source) and how many of its rows fall outside: a source whose rows the band
without it misses is a band that will widen with the next source. The file also counts the
published verdicts (runs that ran, OOMs) a yes/no gets wrong, and the bands in sample and
held out (`wrong_verdicts`).
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distrecipe.plan import verdict  # noqa: E402
from distrecipe.plan.verdict import BANDS, UNKNOWN  # noqa: E402
from tests.calibration import Judged, held_out, judge, judged  # noqa: E402

DOCS = ROOT / "docs" / "plan.md"
BEGIN, END = "<!-- bands: written by scripts/plan_bands.py", "<!-- /bands -->"
"""The markers around docs/plan.md's table: the line that opens it, the line that closes it."""
MIN_ROWS = 3
"""Rows a family × kernel choice needs for a band of its own."""
MIN_SOURCES = 2
"""Sources a band of its own needs: one source's rows cannot say how another source's err
(leave-one-source-out leaves nothing), so such a cell takes the wide band."""
STEP = 1e-4


def _envelope(items: list[Judged]) -> dict[str, Any]:
    errors = [i.truth for i in items if i.truth is not None]
    return {"low": round(math.floor(min(errors) / STEP) * STEP, 4),
            "high": round(math.ceil(max(errors) / STEP) * STEP, 4),
            "rows": len(errors), "sources": sorted({i.source for i in items})}


def _held_out(items: list[Judged], everything: list[Judged]) -> list[dict[str, Any]]:
    out = []
    for source, rest, own in held_out(items):
        wide = not rest
        band = _envelope(rest or [i for i in everything if i.source != source])
        outside = sum(not band["low"] <= (i.truth or 0.0) <= band["high"] for i in own)
        out.append({"source": source, "rows": len(own), "outside": outside,
                    "without": [band["low"], band["high"]], "wide": wide})
    return out


@contextmanager
def bands_as(data: dict[str, Any]) -> Iterator[None]:
    """`verdict` reading `data` instead of bands.json (as `tests.calibration.table` swaps the
    efficiency table)."""
    saved = verdict._table
    verdict._table = lambda: data  # type: ignore[assignment]
    try:
        yield
    finally:
        verdict._table = saved


NO_BAND = {"bands": {}, "families": {}, UNKNOWN: {"low": 0.0, "high": 0.0, "rows": 0, "sources": []}}
"""Every band zero wide: the verdict as a yes/no."""


def wrong_verdicts(results: list[Judged], data: dict[str, Any]) -> dict[str, int]:
    """Published verdicts (a run that ran, a `trained`, an `oom`) the plan gets wrong: as a
    yes/no, with `data`'s bands (in sample: each row's own source helped make its band), and
    held out (each source's rows judged with the bands computed without it); and how many of
    each kind of verdict the bands judge *tight*."""
    stated = [i for i in results if i.reason is None and i.verdict is not None]
    with bands_as(NO_BAND):
        yes_no = sum(judge(i.row).verdict_wrong for i in stated)
    with bands_as(data):
        stated = [judge(i.row) for i in stated]
    held: list[Judged] = []
    for source, _, own in held_out(stated):
        with bands_as(compute([i for i in results if i.source != source], counts=False)):
            held += [judge(i.row) for i in own]
    return {"verdicts": len(stated), "wrong as yes/no": yes_no,
            "wrong with the bands, in sample": sum(i.verdict_wrong for i in stated),
            "wrong with the bands, held out": sum(i.verdict_wrong for i in held),
            "tight, in sample": sum(i.said == "tight" for i in stated),
            "tight, held out": sum(i.said == "tight" for i in held)}


def compute(results: list[Judged], *, counts: bool = True) -> dict[str, Any]:
    """The file's contents for `results` (the judged corpus); `counts` adds what the bands do
    to the published verdicts (`wrong_verdicts`)."""
    rows = [i for i in results if i.reason is None and i.truth is not None]
    cells: dict[tuple[str, str], list[Judged]] = defaultdict(list)
    for item in rows:
        cells[(item.family, item.kernels)].append(item)
    bands: dict[str, dict[str, Any]] = defaultdict(dict)
    few: list[dict[str, Any]] = []
    for (family, kernels), items in sorted(cells.items()):
        entry = {**_envelope(items), "held_out": _held_out(items, rows)}
        if len(items) >= MIN_ROWS and len(entry["sources"]) >= MIN_SOURCES:
            bands[family][kernels] = entry
        else:
            few.append({"family": family, "kernels": kernels, **entry})
    families: dict[str, Any] = {}
    for family in sorted({f for f, _ in cells}):
        items = [i for (f, _), found in sorted(cells.items()) if f == family for i in found]
        pooled = _envelope(items)
        if len(items) >= MIN_ROWS and len(pooled["sources"]) >= MIN_SOURCES:
            # borrowed by another kernel choice: never past the plan's own figure
            pooled.update(low=min(pooled["low"], 0.0), high=max(pooled["high"], 0.0))
            families[family] = {**pooled, "held_out": _held_out(items, rows)}
    data = {
        "about": "Measured ÷ predicted − 1 of the memory statistic published runs state, per engine family "
                 "× kernel choice: written by scripts/plan_bands.py from tests/corpus/gpu/published.csv "
                 "(docs/plan.md, Fits?). Do not edit by hand.",
        "min_rows": MIN_ROWS,
        "min_sources": MIN_SOURCES,
        "bands": dict(bands),
        "families": families,
        "too_few_rows": few,
        UNKNOWN: {**_envelope(rows), "held_out": _held_out(rows, rows)},
    }
    if counts:
        data["published_verdicts"] = wrong_verdicts(results, data)
    return data


def text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _pct(value: float) -> str:
    return f"{value:+.1%}".replace("-", "−")


def _few(entry: dict[str, Any]) -> str:
    """Why a cell has no band of its own."""
    return "too few rows" if entry["rows"] < MIN_ROWS else "one source"


def table(data: dict[str, Any]) -> str:
    """The markdown table of docs/plan.md: each band, its rows and sources, and the wide one."""
    lines = ["| engine family × kernels | band | rows | sources | held out: rows outside the band "
             "without them |", "|---|---|---|---|---|"]
    entries = [(f"{family} × {kernels}", entry) for family, cells in data["bands"].items()
               for kernels, entry in cells.items()]
    entries += [(f"{family} × any other kernels", entry) for family, entry in data["families"].items()]
    entries += [(f"{e['family']} × {e['kernels']} ({_few(e)}: "
                 f"{'the family' if e['family'] in data['families'] else 'the wide band'})", e)
                for e in data["too_few_rows"]]
    entries.append(("wide: any other family, or unknown kernels", data[UNKNOWN]))
    for name, entry in entries:
        held = ", ".join(f"{h['source']} {h['outside']} of {h['rows']}" for h in entry["held_out"])
        lines.append(f"| {name} | {_pct(entry['low'])} … {_pct(entry['high'])} | {entry['rows']} | "
                     f"{', '.join(entry['sources'])} | {held} |")
    c = data.get("published_verdicts")
    if c:
        lines += ["", " ".join((
            f"Of {c['verdicts']} published verdicts (runs that ran or trained, out-of-memory runs),",
            f"a yes/no gets {c['wrong as yes/no']} wrong; with the bands",
            f"{c['wrong with the bands, in sample']} in sample (each row's source helped make its band)",
            f"and {c['wrong with the bands, held out']} held out (each source judged with the bands",
            f"made without it); {c['tight, in sample']} are *tight* in sample,",
            f"{c['tight, held out']} held out."))]
    return "\n".join(lines) + "\n"


def with_table(docs: str, data: dict[str, Any]) -> str:
    """`docs` with the table between its markers replaced by `data`'s."""
    start = docs.index("\n", docs.index(BEGIN)) + 1
    return docs[:start] + table(data) + docs[docs.index(END, start):]


def main(argv: list[str]) -> int:
    data = compute(judged())
    if "--table" in argv:
        sys.stdout.write(table(data))
        return 0
    docs = DOCS.read_text(encoding="utf-8")
    if "--check" in argv:
        stale = [path for path, now, want in ((BANDS, BANDS.read_text(encoding="utf-8"), text(data)),
                                              (DOCS, docs, with_table(docs, data))) if now != want]
        for path in stale:
            sys.stderr.write(f"{path.relative_to(ROOT)} is stale: run python scripts/plan_bands.py\n")
        return 1 if stale else 0
    BANDS.write_text(text(data), encoding="utf-8")
    DOCS.write_text(with_table(docs, data), encoding="utf-8")
    sys.stdout.write(f"wrote {BANDS.relative_to(ROOT)} and the table in {DOCS.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
