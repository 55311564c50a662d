"""The verdict rules on layouts read from engine-shaped folders; the docs page is the rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe.checkpoints.layout import Layout, read
from distrecipe.checkpoints.verdict import RULES, Job, markdown, verdict
from tests.checkpoints import trees
from tests.conftest import ROOT

ZERO2_W2 = Job(loader="deepspeed", stage=2, dp=2, world=2, micro=2, accumulation=2, global_batch=8)


def job(**changes: object) -> Job:
    from dataclasses import replace

    return replace(ZERO2_W2, **changes)  # type: ignore[arg-type]


def ds(tmp_path: Path, **kwargs: object) -> Layout:
    trees.deepspeed(tmp_path, 3, **kwargs)  # type: ignore[arg-type]
    return read(tmp_path)


@pytest.mark.parametrize(("saved", "loading", "outcome", "rule"), [
    ({"dp": 2}, {}, "resumes as is", "ds-same"),
    ({"dp": 2}, {"dp": 1, "world": 1, "accumulation": 4}, "resumes after a conversion", "ds-dp"),
    ({"dp": 2, "stage": 3}, {"stage": 3, "dp": 4, "world": 4}, "resumes after a conversion", "ds-dp"),
    ({"dp": 2}, {"tp": 2, "world": 4}, "resumes after a conversion", "ds-tp-pp"),
    ({"dp": 2}, {"stage": 3}, "resumes as is", "ds-same"),  # stage 1/2 unknown without torch
    ({"dp": 2, "stage": 3}, {"stage": 2}, "cannot", "ds-stage-3"),
    ({"dp": 2}, {"loader": "fsdp2", "stage": 3}, "cannot", "ds-engine"),
])
def test_deepspeed_rules(tmp_path: Path, saved: dict[str, object], loading: dict[str, object], outcome: str,
                         rule: str) -> None:
    found = verdict(ds(tmp_path, **saved), job(**loading))
    assert (found.outcome, found.rules[0]) == (outcome, rule)
    if outcome == "resumes after a conversion":
        assert found.command[:5] == ("distrecipe", "checkpoint", "convert", "--to", "universal")
        assert found.converter == "ds_to_universal" and found.universal
        assert "checkpoint.load_universal" in found.changes


def test_the_dp_verdict_quotes_deepspeeds_refusal(tmp_path: Path) -> None:
    found = verdict(ds(tmp_path), job(dp=1, world=1))
    assert "saved at DP 2, this job's DP is 1" in found.why and "DP world size of N" in found.why


@pytest.mark.parametrize(("loader", "world", "outcome"), [
    ("fsdp2", 1, "resumes as is"), ("fsdp2", 4, "resumes as is"), ("deepspeed", 2, "cannot")])
def test_dcp_reshards(tmp_path: Path, loader: str, world: int, outcome: str) -> None:
    layout = read(trees.dcp(tmp_path, 4, world=2))
    assert verdict(layout, job(loader=loader, world=world, dp=world)).outcome == outcome


def test_verl_needs_its_own_world(tmp_path: Path) -> None:
    layout = read(trees.verl(tmp_path, 4, world=2).parent)
    assert verdict(layout, job(loader="verl", world=2)).outcome == "resumes as is"
    found = verdict(layout, job(loader="verl", world=4))
    assert found.outcome == "cannot" and "verl.model_merger" in found.command


@pytest.mark.parametrize(("saved", "world", "scheduler", "warned"), [
    (2, 2, True, ()), (2, 1, False, ()), (1, 2, False, ("processes 1..1 find no random_states file",)),
    (2, 1, True, ("scheduler.bin holds the count of 2: the learning-rate schedule goes on 1/2 as fast",)),
    (2, 4, True, ("processes 2..3 find no random_states file", "goes on 4/2 as fast"))])
def test_accelerate_loads_at_any_world_and_warns_what_moves(tmp_path: Path, saved: int, world: int,
                                                             scheduler: bool, warned: tuple[str, ...]) -> None:
    layout = read(trees.accelerate(tmp_path, 3, world=saved, scheduler=scheduler))
    found = verdict(layout, job(loader="ddp", stage=0, world=world, dp=world))
    assert (found.outcome, found.rules) == ("resumes as is", ("accelerate-any",))
    assert len(found.warnings) == len(warned)
    assert all(text in warning for text, warning in zip(warned, found.warnings, strict=True))


@pytest.mark.parametrize(("accumulation", "world", "global_batch", "warned"), [
    (2, 2, 8, False), (2, 1, 8, False), (2, 2, 16, True), (2, 4, 16, True), (None, 2, 16, False)])
def test_the_trainer_warns_that_schedule_and_data_move(tmp_path: Path, accumulation: int | None, world: int,
                                                       global_batch: int, warned: bool) -> None:
    """Saved at per-device 2 × 2 ranks × accumulation 2 = 8; the accumulation is read from the
    pickled training_args.bin (`inspect`), so without it nothing is said."""
    from dataclasses import replace

    layout = replace(read(trees.hf(tmp_path, 6, world=2, per_device=2)), accumulation=accumulation)
    found = verdict(layout, job(loader="ddp", stage=0, world=world, dp=world, global_batch=global_batch,
                                trainer=True))
    assert found.outcome == "resumes as is"
    assert bool(found.warnings) == warned
    if warned:
        assert "global batch 8" in found.warnings[0] and f"this job's is {global_batch}" in found.warnings[0]
        assert "now sample 96, was 48" in found.warnings[0]


def test_a_partial_checkpoint_cannot_be_resumed(tmp_path: Path) -> None:
    layout = read(trees.dcp(tmp_path, 4, metadata=False))
    found = verdict(layout, job(loader="fsdp2"))
    assert found.outcome == "cannot" and "no .metadata" in found.why


def test_rule_ids_are_unique_and_explained() -> None:
    assert len({rule.id for rule in RULES}) == len(RULES)
    assert all(rule.why and rule.change for rule in RULES)


def test_docs_are_the_rules() -> None:
    assert (ROOT / "docs" / "checkpoints.md").read_text(encoding="utf-8") == markdown(), (
        "regenerate: python -c 'from distrecipe.checkpoints.verdict import markdown; "
        "print(markdown(), end=\"\")' > docs/checkpoints.md")
