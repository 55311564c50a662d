"""Every published row `plan` can state, judged: memory, verdict and throughput.

`judge(row)` writes the row as a recipe (`published.plan_for_row`), estimates it and
compares what the row states: memory against the statistic it names (reserved,
allocated; an unstated measure against reserved, the corpus's convention, with
`needed` beside it), a `trained` / `oom` verdict against `fits?`, and tokens/s/GPU
(derived from model TFLOP/s through the source's own FLOPs count where only those are
given). `python -m tests.calibration [CSV ...]` prints the tables of `docs/plan.md`;
`--sources=a,b` judges only those `source_id`s; `--held-out` prints round 2026-12's
table (`published.HELD_OUT_2026_12`, the sources reported before any change).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from distrecipe.job import Plan
from distrecipe.plan import efficiency as eff
from distrecipe.plan.activations import kernel_choice
from distrecipe.plan.efficiency import Efficiency, engine_family, generation, kernel_family
from distrecipe.plan.engine import DeepSpeedZero
from distrecipe.plan.report import deepspeed_zero, estimate
from distrecipe.plan.steptime import step_time
from distrecipe.plan.traffic import Traffic
from distrecipe.plan.units import GiB
from tests.published import CSV, HELD_OUT_2026_12, Row, plan_for_row, rows, unstatable


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
    """Relative error of `shown` (reserved + CUDA context), what nvidia-smi would show."""
    verdict: str | None = None
    """`trained` or `oom` for rows that state only that; `ran` for a row with a memory figure."""
    fits: bool | None = None
    """What launch would do: not refuse (`fits` or `tight`)."""
    throughput: float | None = None
    """Relative error of tokens/s/GPU."""
    kernels: str = ""
    """The kernel choice a band is kept for (`activations.kernel_choice`)."""
    said: str | None = None
    """The plan's three-way verdict (`plan.verdict.Word`)."""

    @property
    def source(self) -> str:
        return self.row.data["source_id"]

    @property
    def verdict_wrong(self) -> bool:
        """'does not fit' for a run that ran, or 'fits' for a published out-of-memory ('tight'
        is right for either: the band holds both)."""
        if self.verdict in ("trained", "ran"):
            return self.said == "does not fit"
        return self.verdict == "oom" and self.said == "fits"

    @property
    def truth(self) -> float | None:
        """Measured ÷ predicted − 1 for the statistic the row states: the error a band holds."""
        return None if self.memory is None else 1 / (1 + self.memory) - 1


MEMORY_NOT_MODELLED = {
    "kempnerforge_mfu_scaling_202604": "KempnerForge: its one-GPU rows hold less than AdamW's state alone "
                                       "(8B in 80.7 GiB where 16 bytes a parameter is 120 GiB), and its TP plan "
                                       "is not the engines' (docs/plan.md)",
    "kempnerforge_weak_scaling_202606": "KempnerForge: as its MFU-scaling rows",
    "kempnerforge_175b_360gpu_202607": "KempnerForge: as its MFU-scaling rows",
    "torchtune_readme_mem": "torchtune's low-memory recipe (bf16 optimizer state in its step) is not stated",
    "colossalai_pl_gpt2xl": "GPT-2's fp16 (DeepSpeed) and AMP (Lightning) loss paths are not the measured "
                            "loss; its block is stated (published.GPT_SOURCES)",
}
"""Sources whose memory figures the model does not describe (tests/test_plan_gpu.py's
"not modelled"), reported apart; their throughput and verdicts are still judged."""

STATISTIC = {"max_reserved": "reserved", "peak reserved": "reserved", "reported": "reserved",
             "unstated": "reserved", "max_allocated": "allocated", "nvidia-smi": "shown"}
"""What each `memory_kind` compares with (its first word or words)."""


def _family_and_generation(plan: Plan) -> tuple[str, str]:
    return engine_family(plan), generation(plan) or "?"


HELD_OUT = ("mosaic_llmfoundry_bench_a100_40gb", "shoeybi2019_megatron_blog")
"""Scaling series (one model at several GPU counts on a stated network) that judge how step
time degrades with the data-parallel world (docs/plan.md, "Scale and the network"): never
fitted, so their error is out of sample."""

HARDWARE_FLOPS = ("narayanan2021_ptdp_secondary", "shoeybi2019_megatron_blog")
"""Sources whose TFLOP/s count the recomputed forward (Narayanan et al.'s Eq. 3)."""


def megatron_tokens(row: Row) -> float | None:
    """Tokens/s/GPU from a Megatron row's TFLOP/s, through Megatron's count of a GPT
    layer's FLOPs per token: model FLOPs 72·l·h²·(1 + s/6h + V/12lh), or with the
    recomputed forward (Narayanan et al. 2021, Eq. 3) 96·l·h²·(1 + s/6h + V/16lh)."""
    d = row.data
    if not d["tflops_per_gpu"] or d["tokens_per_s_per_gpu"] or not d["layers"]:
        return None
    layers, h, s, vocab = int(d["layers"]), int(d["hidden"]), int(d["seq_len"]), int(d["vocab"])
    if d["source_id"] in HARDWARE_FLOPS:
        per_token = 96 * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))
        return float(d["tflops_per_gpu"]) * 1e12 / per_token
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
    if d["memory_GiB"] and d["source_id"] not in MEMORY_NOT_MODELLED:
        measured = float(d["memory_GiB"]) * GiB
        kind = next(v for k, v in STATISTIC.items() if d["memory_kind"].startswith(k))
        predicted = {"reserved": est.memory.reserved, "allocated": est.memory.allocated,
                     "shown": est.memory.shown}[kind]
        memory, needed = predicted / measured - 1, est.memory.shown / measured - 1
    if d["memory_GiB"]:
        verdict = "ran"
    if verdict == "ran" and row.gpu_gib is None:
        verdict = None  # the card's memory is not stated: its size is the table's guess, no verdict
    throughput = None
    measured_tokens = float(d["tokens_per_s_per_gpu"]) if d["tokens_per_s_per_gpu"] else megatron_tokens(row)
    if measured_tokens and est.step is not None and "fp8" not in d["precision"].lower():
        throughput = est.step.tokens_per_s_per_gpu / measured_tokens - 1
    said = est.verdict
    return Judged(row, None, family, gen, memory, needed, verdict, est.fits, throughput, kernel_choice(plan),
                  None if said is None else said.word)


def judged(paths: Iterable[Path] = (CSV,), sources: Iterable[str] | None = None) -> list[Judged]:
    """Every row judged, or only the rows of `sources` (their `source_id`s)."""
    chosen = set(sources) if sources is not None else None
    return [judge(row) for path in paths for row in rows(path)
            if chosen is None or row.data["source_id"] in chosen]


def _median_abs(errors: list[float]) -> str:
    return f"{statistics.median(abs(e) for e in errors):.1%}" if errors else "-"


def held_out_report(results: list[Judged]) -> str:
    """Round 2026-12's table (`published.HELD_OUT_2026_12`), per family: rows judged, memory
    within 10 % of the statistic each row states, median |error|, wrong verdicts (a run that
    ran judged "does not fit", an out-of-memory judged "fits"), throughput median |error|;
    then every row with its figures."""
    lines = ["| family | sources | rows judged | memory within 10 % | memory median \\|e\\| | "
             "verdicts wrong | throughput median \\|e\\| |", "|---|---|---|---|---|---|---|"]
    families: dict[str, list[Judged]] = defaultdict(list)
    for item in results:
        families[HELD_OUT_2026_12.get(item.source, "not held out")].append(item)
    for family, items in families.items():
        used = [i for i in items if i.reason is None]
        memory = [i.memory for i in used if i.memory is not None]
        verdicts = [i for i in used if i.verdict is not None]
        throughput = [i.throughput for i in used if i.throughput is not None]
        sources = ", ".join(dict.fromkeys(i.source for i in items))
        lines.append(f"| {family} | {sources} | {len(used)} of {len(items)} | "
                     f"{sum(abs(e) <= 0.10 for e in memory)}/{len(memory)} | {_median_abs(memory)} | "
                     f"{sum(i.verdict_wrong for i in verdicts)}/{len(verdicts)} | {_median_abs(throughput)} |")
    lines += ["", "rows (memory: error of the statistic the row states; verdict: published, and plan's fits?):"]
    for item in results:
        if item.reason is not None:
            lines.append(f"  not judged ({item.reason}): {item.row.name}")
            continue
        memory = f"memory {item.memory:+.1%}" if item.memory is not None else "memory -"
        tput = f"throughput {item.throughput:+.1%}" if item.throughput is not None else "throughput -"
        verdict = (f"{'WRONG' if item.verdict_wrong else 'ok'} {item.verdict} fits={item.fits}"
                   if item.verdict is not None else f"no verdict, fits={item.fits}")
        lines.append(f"  {memory:16} {tput:18} {verdict:28} {item.row.name}")
    return "\n".join(lines) + "\n"


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
            lines.append(f"  {mark:5} {item.verdict:7} plan {item.said}  {item.row.name}")
    lines += ["", "memory not modelled (reported apart):"]
    lines += [f"  {source}: {reason}" for source, reason in MEMORY_NOT_MODELLED.items()]
    lines += ["", "not judged:"]
    reasons: dict[str, list[str]] = defaultdict(list)
    for item in results:
        if item.reason is not None:
            reasons[item.reason].append(item.source)
    for reason, sources in sorted(reasons.items()):
        counted = ", ".join(f"{s} ({sources.count(s)})" for s in dict.fromkeys(sources))
        lines.append(f"  {reason}: {counted}")
    return "\n".join(lines) + "\n"


Cell = tuple[str, str]


class HasSource(Protocol):
    @property
    def source(self) -> str: ...


Sourced = TypeVar("Sourced", bound=HasSource)


@dataclass(frozen=True)
class Timed:
    """A judged throughput row with what `step_time` needs, so fits can re-price it cheaply."""

    row: Row
    plan: Plan
    traffic: Traffic
    zero: DeepSpeedZero | None
    measured: float

    @property
    def source(self) -> str:
        return self.row.data["source_id"]

    @property
    def cell(self) -> Cell:
        """The efficiency cell that prices it (`efficiency.kernel_family`)."""
        return kernel_family(self.plan), generation(self.plan) or "?"

    @property
    def fitted(self) -> bool:
        """DeepSpeed's rows are judged by torch's figure, never fitted (`kernel_family`); the
        scaling series in `HELD_OUT` judge the network's terms, never fitted either."""
        return engine_family(self.plan) != "deepspeed" and self.source not in HELD_OUT


def timed(paths: Iterable[Path] = (CSV,)) -> list[Timed]:
    """Every judged row with a throughput figure and a known GPU generation, but the held-out
    round's (`published.HELD_OUT_2026_12`: never fitted on, nor in the leave-one-out table)."""
    out = []
    for item in judged(paths):
        if item.throughput is None or item.generation == "?" or item.source in HELD_OUT_2026_12:
            continue
        plan = plan_for_row(item.row)
        est = estimate(plan)
        assert est.step is not None
        measured = est.step.tokens_per_s_per_gpu / (1 + item.throughput)
        out.append(Timed(item.row, plan, est.traffic_engine, deepspeed_zero(plan), measured))
    return out


@contextmanager
def table(cells: dict[Cell, Efficiency]) -> Iterator[None]:
    """`efficiency.FITTED` replaced by `cells` (a fit, or one made without a source)."""
    saved = dict(eff.FITTED)
    try:
        eff.FITTED.clear()
        eff.FITTED.update(cells)
        yield
    finally:
        eff.FITTED.clear()
        eff.FITTED.update(saved)


def predicted(item: Timed) -> float:
    result = step_time(item.plan, item.traffic, item.zero)
    assert result is not None
    return result.tokens_per_s_per_gpu


def fit(items: list[Timed], start: dict[Cell, Efficiency] | None = None) -> dict[Cell, Efficiency]:
    """Each cell's figure: the value whose median measured ÷ predicted over the cell's rows
    is 1 (exposed traffic makes the prediction not quite proportional, so the median ratio
    is applied until it settles), with its basis: how many rows, from which sources."""
    cells: dict[Cell, list[Timed]] = defaultdict(list)
    for item in items:
        if item.fitted:
            cells[item.cell].append(item)
    fitted: dict[Cell, Efficiency] = {}
    for cell, chosen in sorted(cells.items()):
        value = (start or eff.FITTED).get(cell, Efficiency(0.5, "", False)).value
        for _ in range(6):
            with table({**fitted, cell: Efficiency(value, "", False)}):
                value *= statistics.median(i.measured / predicted(i) for i in chosen)
        sources = ", ".join(dict.fromkeys(SOURCE_NAMES.get(i.source, i.source) for i in chosen))
        fitted[cell] = Efficiency(round(value, 2), f"fitted on {len(chosen)} published runs ({sources})", False)
    return fitted


SOURCE_NAMES = {
    "torchtitan_bench_h100_202412": "torchtitan", "torchtitan_perf_a100_2024": "torchtitan",
    "torchtitan_perf_405b_h100_2024": "torchtitan", "mosaic_llmfoundry_bench": "llm-foundry",
    "ibm_fms_fsdp_readme": "IBM fms-fsdp", "colossalai_pl_gpt2xl": "Colossal-AI",
    "kempnerforge_mfu_scaling_202604": "KempnerForge", "kempnerforge_weak_scaling_202606": "KempnerForge",
    "kempnerforge_175b_360gpu_202607": "KempnerForge", "narayanan2021_ptdp_secondary": "Megatron-LM 2021",
    "bigscience_tr11_prequel_2022": "BigScience", "bigscience_bloom_176b_run_2022": "BigScience",
    "megatron_lm_readme_h100_2024": "Megatron-Core 2024",
}
"""How a basis names each source (a publication, not a file)."""


def held_out(items: list[Sourced]) -> Iterator[tuple[str, list[Sourced], list[Sourced]]]:
    """(source, every other source's items, its own) for each source, in the order met: what a
    leave-one-source-out check fits on and what it judges."""
    for source in dict.fromkeys(i.source for i in items):
        yield source, [i for i in items if i.source != source], [i for i in items if i.source == source]


def leave_one_source_out(items: list[Timed]) -> dict[str, list[tuple[Timed, float, Efficiency]]]:
    """Each source's rows predicted by a table fitted without it: (row, error, the figure
    used: the cell's refit, or borrowed by `efficiency.lookup` when only it had the cell)."""
    out: dict[str, list[tuple[Timed, float, Efficiency]]] = {}
    for source, rest, rows_of in held_out(items):
        others = fit(rest)
        out[source] = []
        for item in rows_of:
            used = eff.lookup(*item.cell, others)
            with table({**others, item.cell: used}):
                out[source].append((item, predicted(item) / item.measured - 1, used))
    return out


def loso_report(items: list[Timed]) -> str:
    """The leave-one-source-out table: per source, and per engine family × generation."""
    results = leave_one_source_out(items)
    lines = ["| source | family × generation | rows | median | median \\|e\\| | worst | within 15 % | figure used |",
             "|---|---|---|---|---|---|---|---|"]
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for source, found in results.items():
        errors = [e for _, e, _ in found]
        cells = sorted({f"{engine_family(i.plan)} × {i.cell[1]}" for i, _, _ in found})
        used = sorted({f"{u.value:g}{' (borrowed)' if u.borrowed else ''}" for _, _, u in found})
        lines.append(f"| {source} | {', '.join(cells)} | {len(errors)} | {statistics.median(errors):+.1%} | "
                     f"{statistics.median(abs(e) for e in errors):.1%} | {max(errors, key=abs):+.1%} | "
                     f"{sum(abs(e) <= 0.15 for e in errors)} | {', '.join(used)} |")
        for item, error, _ in found:
            by_cell[(engine_family(item.plan), item.cell[1])].append(error)
    lines += ["", "| family × generation | rows | median | median \\|e\\| | worst | within 15 % |", "|---|---|---|---|---|---|"]
    for cell, errors in sorted(by_cell.items()):
        lines.append(f"| {cell[0]} × {cell[1]} | {len(errors)} | {statistics.median(errors):+.1%} | "
                     f"{statistics.median(abs(e) for e in errors):.1%} | {max(errors, key=abs):+.1%} | "
                     f"{sum(abs(e) <= 0.15 for e in errors)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:] if not p.startswith("-")] or [CSV]
    chosen = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--sources=")), None)
    if "--fit" in sys.argv:
        for cell, value in fit(timed(paths)).items():
            sys.stdout.write(f"{cell}: {value}\n")
    elif "--loso" in sys.argv:
        sys.stdout.write(loso_report(timed(paths)))
    elif "--held-out" in sys.argv:
        sys.stdout.write(held_out_report(judged(paths, chosen or list(HELD_OUT_2026_12))))
    else:  # the held-out round is reported apart (--held-out) unless its sources are chosen
        every = dict.fromkeys(row.data["source_id"] for path in paths for row in rows(path))
        sys.stdout.write(report(judged(paths, chosen or [s for s in every if s not in HELD_OUT_2026_12])))
