"""Every published row `plan` can state, judged: memory, verdict and throughput.

`judge(row)` writes the row as a recipe (`published.plan_for_row`), estimates it and
compares what the row states: memory against the statistic it names (reserved,
allocated; an unstated measure against reserved, the corpus's convention, with
`needed` beside it), a `trained` / `oom` verdict against `fits?`, and tokens/s/GPU
(derived from model TFLOP/s through the source's own FLOPs count where only those are
given). `python -m tests.calibration [CSV ...]` prints the tables of `docs/plan.md`.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from distrecipe.plan.report import estimate
from distrecipe.plan.units import GiB
from tests.published import CSV, Row, plan_for_row, rows, unstatable


@dataclass(frozen=True)
class Judged:
    row: Row
    reason: str | None
    """Why the row is not judged (None: judged)."""
    family: str = ""
    """The engine family that runs it, as the plan reads it (`efficiency.engine_family`)."""
    generation: str = ""
    memory: float | None = None
    """Relative error of the predicted statistic the row states (reserved, allocated)."""
    needed: float | None = None
    """Relative error of `needed` (reserved + CUDA context), what nvidia-smi would show."""
    verdict: str | None = None
    """`trained` or `oom` for rows that state only that; `ran` for a row with a memory figure."""
    fits: bool | None = None
    throughput: float | None = None
    """Relative error of tokens/s/GPU."""

    @property
    def source(self) -> str:
        return self.row.data["source_id"]

    @property
    def verdict_wrong(self) -> bool:
        """'does not fit' for a run that ran, or 'fits' for a published out-of-memory."""
        if self.verdict in ("trained", "ran"):
            return self.fits is False
        return self.verdict == "oom" and self.fits is True


STATISTIC = {"max_reserved": "reserved", "peak reserved": "reserved", "reported": "reserved",
             "unstated": "reserved", "max_allocated": "allocated"}
"""What each `memory_kind` compares with (its first word or words)."""


def _family_and_generation(plan: object) -> tuple[str, str]:
    try:
        from distrecipe.plan.efficiency import engine_family, generation
    except ImportError:  # before engine families: one efficiency per GPU
        from distrecipe.plan.hardware import hardware
        hw = hardware(plan)  # type: ignore[arg-type]
        return "one per GPU", hw.name if hw else "?"
    return engine_family(plan), generation(plan)  # type: ignore[arg-type]


def megatron_tokens(row: Row) -> float | None:
    """Tokens/s/GPU from a Megatron row's model TFLOP/s, through Megatron's count of a GPT
    layer's model FLOPs per token (Narayanan et al. 2021, Eq. 3 without the recomputed
    forward): 72·l·h²·(1 + s/6h + V/12lh)."""
    d = row.data
    if not d["tflops_per_gpu"] or d["tokens_per_s_per_gpu"]:
        return None
    layers, h, s, vocab = int(d["layers"]), int(d["hidden"]), int(d["seq_len"]), int(d["vocab"])
    per_token = 72 * layers * h * h * (1 + s / (6 * h) + vocab / (12 * layers * h))
    return float(d["tflops_per_gpu"]) * 1e12 / per_token


def judge(row: Row) -> Judged:
    reason = unstatable(row)
    d = row.data
    if reason is None and d["memory_kind"] not in ("trained", "oom") and not d["memory_GiB"] \
            and not (d["tokens_per_s_per_gpu"] or megatron_tokens(row)):
        reason = "states neither memory, a verdict nor throughput"
    if reason is not None:
        return Judged(row, reason)
    plan = plan_for_row(row)
    est = estimate(plan)
    family, gen = _family_and_generation(plan)
    memory = needed = None
    verdict = d["memory_kind"] if d["memory_kind"] in ("trained", "oom") else None
    if d["memory_GiB"]:
        measured = float(d["memory_GiB"]) * GiB
        kind = next(v for k, v in STATISTIC.items() if d["memory_kind"].startswith(k))
        predicted = est.memory.reserved if kind == "reserved" else est.memory.allocated
        memory, needed = predicted / measured - 1, est.memory.needed / measured - 1
        verdict = "ran"
    throughput = None
    measured_tokens = float(d["tokens_per_s_per_gpu"]) if d["tokens_per_s_per_gpu"] else megatron_tokens(row)
    if measured_tokens and est.step is not None and "fp8" not in d["precision"].lower():
        throughput = est.step.tokens_per_s_per_gpu / measured_tokens - 1
    return Judged(row, None, family, gen, memory, needed, verdict, est.fits, throughput)


def judged(paths: Iterable[Path] = (CSV,)) -> list[Judged]:
    return [judge(row) for path in paths for row in rows(path)]


def _summary(errors: list[float]) -> str:
    if not errors:
        return "-"
    worst = max(errors, key=abs)
    within = sum(abs(e) <= 0.10 for e in errors)
    return (f"{len(errors)} rows, median {statistics.median(errors):+.1%}, median |e| "
            f"{statistics.median(abs(e) for e in errors):.1%}, worst {worst:+.1%}, ≤10 %: {within}")


def report(results: list[Judged]) -> str:
    """Per source and per engine family × GPU generation: memory and throughput errors,
    verdicts, and the rows not judged with their reasons."""
    lines = ["| source | family × generation | memory | throughput |", "|---|---|---|---|"]
    by_source: dict[str, list[Judged]] = defaultdict(list)
    for item in results:
        by_source[item.source].append(item)
    for source, items in by_source.items():
        used = [i for i in items if i.reason is None]
        if not used:
            continue
        cells = sorted({f"{i.family} × {i.generation}" for i in used})
        lines.append(f"| {source} | {', '.join(cells)} | "
                     f"{_summary([i.memory for i in used if i.memory is not None])} | "
                     f"{_summary([i.throughput for i in used if i.throughput is not None])} |")
    lines += ["", "| family × generation | memory | throughput |", "|---|---|---|"]
    cells_of: dict[str, list[Judged]] = defaultdict(list)
    for item in results:
        if item.reason is None:
            cells_of[f"{item.family} × {item.generation}"].append(item)
    for cell, items in sorted(cells_of.items()):
        lines.append(f"| {cell} | {_summary([i.memory for i in items if i.memory is not None])} | "
                     f"{_summary([i.throughput for i in items if i.throughput is not None])} |")
    lines += ["", "verdicts (published trained / oom, and rows with a memory figure that fail):"]
    for item in results:
        if item.reason is None and (item.verdict in ("trained", "oom") or item.verdict_wrong):
            mark = "WRONG" if item.verdict_wrong else "ok"
            lines.append(f"  {mark:5} {item.verdict:7} plan fits={item.fits}  {item.row.name}")
    lines += ["", "not judged:"]
    reasons: dict[str, list[str]] = defaultdict(list)
    for item in results:
        if item.reason is not None:
            reasons[item.reason].append(item.source)
    for reason, sources in sorted(reasons.items()):
        counted = ", ".join(f"{s} ({sources.count(s)})" for s in dict.fromkeys(sources))
        lines.append(f"  {reason}: {counted}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or [CSV]
    sys.stdout.write(report(judged(paths)))
