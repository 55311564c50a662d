"""`distrecipe plan --search`: rank every recipe that fits, and write the winner.

Kept apart from `commands/plan.py` because it also writes a recipe: the winner is the
input file with the searched keys set (`--set` semantics), and it is loaded back and
resolved before it is written, so what lands on disk is exactly the plan shown first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click
import yaml

from distrecipe import starter
from distrecipe.api import load_plan, plan_of_document
from distrecipe.errors import DistrecipeError
from distrecipe.job import plan_values
from distrecipe.launch.rundir import default_run_dir
from distrecipe.launch.trials import Trial, TrialSpec, measure
from distrecipe.launch.trials import as_json as trial_json
from distrecipe.output import to_json, write_files
from distrecipe.plan.report import estimate
from distrecipe.plan.search import TIE, Candidate, as_json, binding, check_searchable, search, why
from distrecipe.recipe import ProgramKind
from distrecipe.source import read_document
from distrecipe.translator.load import apply_overrides, load_recipe

TOP = 5


def search_recipe(*, recipe: str, overrides: Sequence[str] = (), write: str | None = None, top: int = TOP,
                  output_format: str = "text", program_kind: ProgramKind | None = None,
                  script: str | None = None, measure: int | None = None, measure_steps: int = 4,
                  runs_root: str = "runs") -> int:
    """Print the `top` fastest fitting recipes (JSON: every candidate's figures); with
    `write`, write the fastest as a recipe file.

    A program kind (`program_kind`, or read from `script` as `launch` reads it) is set as
    `launch.program_kind`, so only what that program runs is offered and the written
    recipe says which program it is for. With `measure`, the `measure` fastest are launched
    and ranked by what was measured (`launch.trials`), and `write` writes the measured fastest."""
    kind = program_kind if script is None else starter.program_kind(script)
    if kind is not None:
        overrides = [*overrides, f"launch.program_kind={kind}"]
        click.echo(f"distrecipe: program kind {kind}" + (f" (read from {script})" if script else ""),
                   err=True)
    declared = load_recipe(recipe, overrides)
    plan = load_plan(recipe, overrides)
    current = estimate(plan)
    check_searchable(declared, current)
    unpriced = list(current.rollout.unpriced) if current.rollout is not None else []
    assert plan.gpu_memory is not None
    result = search(declared, plan.dims.gpus_per_node)
    budget = plan.gpu_memory
    trials = (measured_trials(recipe, overrides, result.ranked[:measure], runs_root=runs_root,
                              steps=measure_steps, name=plan.recipe.name)
              if measure is not None and result.ranked else None)
    if output_format == "json":
        data = {"tried": result.tried, "fitting": len(result.ranked), "gpu_memory": budget,
                "cpu_memory": declared.cluster.cpu_memory, "tie": TIE, "units": "bytes, seconds",
                **({} if result.ranked else {"nothing_fits": binding(result)}),
                **({"unpriced": unpriced} if unpriced else {}),
                "candidates": [as_json(c, rank) for rank, c in enumerate(result.ranked[:top], 1)]}
        if trials is not None:
            data["measured"] = [trial_json(t) for t in trials]
        click.echo(to_json(data), nl=False)
    else:
        order = (f"fastest first (within {TIE:.1%} a tie: fewer parallel dimensions, then more headroom):"
                 if result.timed else "no cluster.gpu or cluster.peak_tflops, so no step time: ranked by "
                 "what can be judged, least traffic per rank first, then no offload, then least memory:")
        click.echo(f"{len(result.ranked)} of {result.tried} valid recipes fit {budget / 1e9:.0f} GB; {order}")
        for rank, candidate in enumerate(result.ranked[:top], 1):
            click.echo(f"  {rank}. {why(candidate, budget)}")
        if not result.ranked:
            click.echo(f"  nothing fits: {binding(result)}")
        if unpriced:  # OpenRLHF's critic and reward model: every fit above is a lower bound
            click.echo(f"a lower bound: not priced, {', '.join(unpriced)}")
        if trials is not None:
            click.echo(measured_text(trials, measure_steps))
    if not result.ranked:
        return 1
    if trials is not None and not any(t.measured for t in trials):
        return 1
    if write:
        winner = result.ranked[0]
        if trials:  # measured: the fastest that ran wins, not the fastest predicted
            winner = next(c for c in result.ranked if c.overrides() == trials[0].spec.overrides)
        text = winner_text(recipe, overrides, winner)
        write_files(Path(write).parent, {Path(write).name: text})
        click.echo(f"wrote {write}", err=True)
    return 0


def winner_text(path: str, overrides: Sequence[str], winner: Candidate) -> str:
    """The recipe file for `winner`, proven to resolve to the plan the search ranked."""
    sets = [*overrides, *(f"{key}={json.dumps(value)}" for key, value in winner.overrides().items())]
    doc = apply_overrides(read_document(path), sets)
    text = ("# Written by distrecipe plan --search from " + path + ".\n"
            + yaml.safe_dump(doc.data, sort_keys=False, default_flow_style=None, width=100))
    again = plan_of_document(doc, Path(path).parent)
    want, got = plan_values(winner.estimate.plan), plan_values(again)
    if want != got:
        differ = sorted(k for k in want if want[k] != got.get(k))
        raise DistrecipeError(f"{path}: the searched recipe does not resolve to its plan ({differ}); "
                              "this is a bug in distrecipe")
    return text



def measured_trials(recipe: str, overrides: Sequence[str], candidates: Sequence[Candidate], *,
                    runs_root: str, steps: int, name: str) -> list[Trial]:
    """Launch each candidate for `steps` steps (`launch.trials`), in `runs_root/<name>-measure-…`."""
    root = default_run_dir(Path(runs_root), f"{name}-measure")
    specs = [TrialSpec(label(c), c.overrides(), None if c.estimate.step is None else c.estimate.step.seconds)
             for c in candidates]
    click.echo(f"distrecipe: measuring {len(specs)} candidate(s), {steps} steps each, in {root}", err=True)
    return measure(recipe, overrides, specs, root, steps=steps)


def label(candidate: Candidate) -> str:
    """A candidate in a few words: what runs, its layout, batch split and recomputation."""
    p = candidate.estimate.plan
    parts = [candidate.estimate.label]
    parts += [f"{n} {d}" for n, d in (("TP", p.dims.tensor), ("PP", p.dims.pipeline), ("SP", p.dims.sequence))
              if d > 1]
    parts += [f"micro {p.batch.micro} × accumulation {p.batch.accumulation}",
              f"checkpointing {p.recipe.activation_checkpointing}"]
    return ", ".join(parts)


def measured_text(trials: Sequence[Trial], steps: int) -> str:
    """The trials ranked by measured step time, the failed last."""
    batches = sorted({t.global_batch for t in trials if t.global_batch is not None})
    lines = [f"measured ({steps} steps each, global batch {', '.join(map(str, batches))} held fixed), "
             "fastest first, failed last:"]
    for rank, trial in enumerate(trials, 1):
        if trial.measured and trial.step_seconds is not None:
            predicted = ("" if trial.spec.predicted_seconds is None
                         else f", predicted {trial.spec.predicted_seconds:.4g} s")
            peak = ("" if trial.peak_bytes is None
                    else f"; peak {trial.peak_bytes / 1e6:.0f} MB per rank ({trial.statistic})")
            lines.append(f"  {rank}. {trial.spec.label}: {trial.step_seconds:.4g} s/step measured "
                         f"(median of steps 2..{steps}){predicted}{peak} [{trial.run_dir}]")
        else:
            lines.append(f"  {rank}. {trial.spec.label}: {trial.outcome} [{trial.run_dir}]")
    return "\n".join(lines)
