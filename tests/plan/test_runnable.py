"""`runnable.judge` with a program kind: what `plan --search --program-kind K` offers is what
K's program runs, and compiles for the files K reads with `--strict`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.commands.search import winner_text
from distrecipe.plan.search import search
from distrecipe.recipe import ProgramKind
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve
from distrecipe.translator.targets import TARGETS, EmitOptions, emitted_targets
from tests.conftest import RECIPES, Result

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
TOP = 5
KIND_TARGET: dict[ProgramKind, str | None] = {"hf": "hf", "accelerate": "accelerate", "deepspeed": "deepspeed",
                                              "torchrun": None}
"""The target each kind's program reads (`compile --target`); a torchrun script reads the
plan through `distrecipe.api`, and a ZeRO plan's ds_config (`emitted_targets`)."""
JOBS: dict[str, tuple[str, ...]] = {
    "seed 8B on 4 × 8 H100": ("cluster.gpu=h100",),
    "seed 8B on 1 × 8 A100-40GB": ("cluster.gpu=a100-40gb", "cluster.gpu_memory=40GB", "cluster.nodes=1", "batch.global=64"),
    "seed 8B at 2K on 2 × 8 H100": ("cluster.gpu=h100", "batch.seq_len=2048", "cluster.nodes=2"),
}


def strict_seed(tmp_path: Path) -> Path:
    """The seed with nothing a config file cannot carry: no optimizer or clipping (the
    Accelerate file has no key for them) and no recompute (a ds_config has none), so it
    compiles with `--strict` for every target; what the search adds must keep it so."""
    lines = [line for line in SEED.read_text().splitlines()
             if not line.startswith(("optimizer:", "grad_clip:", "activation_checkpointing:"))]
    path = tmp_path / "seed.yaml"
    path.write_text("\n".join([*lines, "activation_checkpointing: none", ""]), encoding="utf-8")
    return path


def compiles_strictly(cli: Callable[..., Result], path: Path, targets: set[str], out: Path) -> list[str]:
    """The refusals of `compile --strict` for each target (empty: every one exits 0)."""
    refused = []
    for target in sorted(targets):
        result = cli("compile", path, "--target", target, "--strict", "-o", out / target)
        if result.code != 0:
            refused.append(f"{target}: {result.err.strip().splitlines()[-1]}")
    return refused


@pytest.mark.parametrize("kind", sorted(KIND_TARGET))
@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_offered_candidate_compiles_strictly_for_the_kind(
        kind: ProgramKind, job: str, cli: Callable[..., Result], tmp_path: Path) -> None:
    """The property: where the recipe compiles with `--strict` for what the kind reads, each
    of the top candidates, written as `--write` writes it, does too (exit 0)."""
    seed = strict_seed(tmp_path)
    sets = (*JOBS[job], f"launch.program_kind={kind}")
    recipe = load_recipe(seed, sets)
    own = resolve(recipe, detected_gpus=8)
    for target in {t for t in (KIND_TARGET[kind], *emitted_targets(own, kind)) if t}:  # the premise
        assert not [f.code for f in TARGETS[target](own, EmitOptions()).findings if f.severity != "info"]
    ranked = search(recipe, gpus_per_node=8).ranked
    assert ranked, job
    for rank, candidate in enumerate(ranked[:TOP], 1):
        path = tmp_path / f"{rank}.yaml"
        path.write_text(winner_text(str(seed), sets, candidate), encoding="utf-8")
        targets = {t for t in (KIND_TARGET[kind], *emitted_targets(candidate.estimate.plan, kind)) if t}
        refused = compiles_strictly(cli, path, targets, tmp_path / str(rank))
        assert refused == [], (rank, json.dumps(candidate.overrides()))


def test_hf_search_offers_no_selective_recompute() -> None:
    """The finding: the Trainer's gradient checkpointing recomputes whole blocks (DR207), so a
    selective candidate would run as full recompute, and `compile --target hf --strict` refuses it."""
    ranked = search(load_recipe(SEED, ("cluster.gpu=h100", "launch.program_kind=hf")), gpus_per_node=8).ranked
    assert ranked
    assert {c.shape.activation_checkpointing for c in ranked} == {"none", "full"}
