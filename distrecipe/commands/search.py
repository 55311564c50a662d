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
from distrecipe.output import to_json, write_files
from distrecipe.plan.report import estimate
from distrecipe.plan.search import TIE, Candidate, as_json, binding, check_searchable, search, why
from distrecipe.recipe import ProgramKind
from distrecipe.source import read_document
from distrecipe.translator.load import apply_overrides, load_recipe

TOP = 5


def search_recipe(*, recipe: str, overrides: Sequence[str] = (), write: str | None = None, top: int = TOP,
                  output_format: str = "text", program_kind: ProgramKind | None = None,
                  script: str | None = None) -> int:
    """Print the `top` fastest fitting recipes (JSON: every candidate's figures); with
    `write`, write the fastest as a recipe file.

    A program kind (`program_kind`, or read from `script` as `launch` reads it) is set as
    `launch.program_kind`, so only what that program runs is offered and the written
    recipe says which program it is for."""
    kind = program_kind if script is None else starter.program_kind(script)
    if kind is not None:
        overrides = [*overrides, f"launch.program_kind={kind}"]
        click.echo(f"distrecipe: program kind {kind}" + (f" (read from {script})" if script else ""),
                   err=True)
    declared = load_recipe(recipe, overrides)
    plan = load_plan(recipe, overrides)
    check_searchable(declared, estimate(plan))
    assert plan.gpu_memory is not None
    result = search(declared, plan.dims.gpus_per_node)
    budget = plan.gpu_memory
    if output_format == "json":
        click.echo(to_json({"tried": result.tried, "fitting": len(result.ranked), "gpu_memory": budget,
                            "cpu_memory": declared.cluster.cpu_memory, "tie": TIE, "units": "bytes, seconds",
                            **({} if result.ranked else {"nothing_fits": binding(result)}),
                            "candidates": [as_json(c, rank)
                                           for rank, c in enumerate(result.ranked[:top], 1)]}),
                   nl=False)
    else:
        order = (f"fastest first (within {TIE:.1%} a tie: fewer parallel dimensions, then more headroom):"
                 if result.timed else "no cluster.gpu or cluster.peak_tflops, so no step time: ranked by "
                 "what can be judged, least traffic per rank first, then no offload, then least memory:")
        click.echo(f"{len(result.ranked)} of {result.tried} valid recipes fit {budget / 1e9:.0f} GB; {order}")
        for rank, candidate in enumerate(result.ranked[:top], 1):
            click.echo(f"  {rank}. {why(candidate, budget)}")
        if not result.ranked:
            click.echo(f"  nothing fits: {binding(result)}")
    if not result.ranked:
        return 1
    if write:
        text = winner_text(recipe, overrides, result.ranked[0])
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

