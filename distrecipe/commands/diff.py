"""`distrecipe diff OLD NEW`: the semantic change between two configs, with its cost."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from distrecipe.commands.options import overrides_option
from distrecipe.diff import NOT_STATED, Change, Diff, Impact, diff_paths
from distrecipe.output import markdown_code, markdown_text, to_json
from distrecipe.plan.units import gb


def diff_configs(*, old: str, new: str, world: int | None = None, nodes: int = 1,
                 overrides: Sequence[str] = (), output_format: str = "text", exit_code: bool = False) -> int:
    """Print what changed from `old` to `new`; 0 either way (a difference is not a failure), or
    with `exit_code`, as `git diff --exit-code`: 1 unless both describe the same job."""
    result = diff_paths(old, new, world=world, nodes=nodes, overrides=overrides)
    click.echo(FORMATS[output_format](result, old, new), nl=False)
    return 1 if exit_code and not result.same_job else 0


def _value(value: Any, source: str = "") -> str:
    """A value as a reader should take it: stated, the engine's labelled default, or not stated."""
    if source == NOT_STATED:
        return source
    plain = (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.isprintable())
    shown = "unset" if value is None else str(value) if plain else json.dumps(value, ensure_ascii=False,
                                                                             default=str)
    return f"{shown} ({source})" if source else shown


def _sides(change: Change) -> tuple[str, str]:
    return _value(change.old, change.old_source), _value(change.new, change.new_source)


def _signed(delta: float) -> str:
    return ("+" if delta > 0 else "−" if delta < 0 else "±") + gb(abs(delta))


def impact_lines(impact: Impact) -> list[str]:
    """The seed's way of saying it: memory and traffic per GPU, then whether it fits."""
    (m0, m1), (t0, t1), (p0, p1) = impact.memory, impact.traffic, impact.peak
    lines = [
        f"per-GPU model state {gb(m0)} → {gb(m1)} ({_signed(m1 - m0)})",
        f"traffic per GPU per step (engine view) {gb(t0)} → {gb(t1)} ({_signed(t1 - t0)})",
        f"peak per GPU (engine view) {gb(p0)} → {gb(p1)} ({_signed(p1 - p0)})",
    ]
    s0, s1 = impact.step
    if s0 is not None and s1 is not None:
        lines.append(f"step time {s0:.3g} s → {s1:.3g} s ({s1 / s0 - 1:+.0%})")
    if impact.verdict != (None, None):
        (v0, v1) = (word or "unknown" for word in impact.verdict)
        lines.append(f"{impact.label[0]} {v0} → {impact.label[1]} {v1}")
    return lines


def _headline(result: Diff, old: str, new: str) -> str:
    """What no change means: the same job, or only that nothing compared differs."""
    if result.same_job:
        return f"{old} and {new} describe the same job"
    return f"{old} and {new} differ in nothing compared, but a stated value was not compared (notes below)"


def text(result: Diff, old: str, new: str) -> str:
    if not result.changes:
        notes = [f"note: {note}" for note in result.notes]
        return "\n".join([_headline(result, old, new), *notes]) + "\n"
    lines = [f"{c.key}: {' → '.join(_sides(c))}" for c in result.changes]
    if result.impact is not None:
        lines += ["", "impact:"] + [f"  {line}" for line in impact_lines(result.impact)]
    elif result.unpriced:
        lines += ["", f"impact not priced: {result.unpriced}"]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def markdown(result: Diff, old: str, new: str) -> str:
    """A table for a pull-request comment. Every path, key, value and note is data from the
    inputs, written through `output`'s Markdown escapers: a `|`, line break or backtick in
    a key or value stays inside its cell instead of ending the row or the table."""
    lines = [f"### distrecipe diff: {markdown_code(old)} → {markdown_code(new)}", ""]
    if result.same_job:
        lines.append("No semantic change: both describe the same job.")
    elif not result.changes:
        lines.append("No compared setting differs, but a stated value was not compared (notes below).")
    else:
        lines += ["| setting | before | after |", "|---|---|---|"]
        lines += [f"| {markdown_code(c.key, cell=True)} | " + " | ".join(map(markdown_text, _sides(c))) + " |"
                  for c in result.changes]
    if result.impact is not None:
        lines += ["", "**Impact** (from `distrecipe plan`):", ""]
        lines += [f"- {markdown_text(line)}" for line in impact_lines(result.impact)]
    elif result.unpriced:
        lines += ["", f"_Impact not priced: {markdown_text(result.unpriced)}._"]
    lines += ["", *[f"_Note: {markdown_text(note)}._" for note in result.notes]] if result.notes else []
    return "\n".join(lines) + "\n"


def as_json(result: Diff, old: str, new: str) -> str:
    impact = result.impact
    data: dict[str, Any] = {
        "old": old,
        "new": new,
        "changes": [{"key": c.key, "old": c.old, "new": c.new, "old_source": c.old_source or None,
                     "new_source": c.new_source or None} for c in result.changes],
        "notes": result.notes,
        "same_job": result.same_job,
        "unpriced": result.unpriced,
        "impact": None if impact is None else {
            "label": list(impact.label),
            "memory_bytes": list(impact.memory),
            "traffic_bytes": list(impact.traffic),
            "peak_bytes": list(impact.peak),
            "fits": list(impact.fits),
            "verdict": list(impact.verdict),
            "step_seconds": list(impact.step),
        },
    }
    return to_json(data)


FORMATS: dict[str, Callable[[Diff, str, str], str]] = {"text": text, "json": as_json, "markdown": markdown}


@click.command("diff")
@click.argument("old", type=click.Path(path_type=str))
@click.argument("new", type=click.Path(path_type=str))
@click.option("--world", type=click.IntRange(min=1), default=None,
              help="Total ranks, for native configs that do not say (ds_config, TrainingArguments).")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True)
@overrides_option
@click.option("--format", "output_format", type=click.Choice(sorted(FORMATS)), default="text",
              show_default=True)
@click.option("--exit-code", is_flag=True,
              help="Exit 1 when the two differ (or a stated value could not be compared), 0 when they "
                   "describe the same job, as git diff --exit-code.")
def command(old: str, new: str, world: int | None, nodes: int, overrides: tuple[str, ...],
            output_format: str, exit_code: bool) -> int:
    """Show what changed between two recipes or native configs, and what it costs per GPU.

    Exit 0, whatever differs, unless --exit-code; 2: unusable input."""
    return diff_configs(old=old, new=new, world=world, nodes=nodes, overrides=overrides,
                        output_format=output_format, exit_code=exit_code)
