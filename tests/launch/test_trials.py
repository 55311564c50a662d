"""The measured search: real trials through `distrecipe launch`, ranked by measured step time."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distrecipe.launch.trials import Trial, TrialSpec, rank_trials, trial_argv
from tests.measured import TINY, measured_search


@pytest.mark.slow
def test_the_search_ranks_what_it_measured_with_the_global_batch_fixed() -> None:
    search = measured_search()
    assert search.code == 0, search.err[-3000:]
    trials = search.trials
    assert len(trials) == 3
    ran = [t for t in trials if t["outcome"] == "measured"]
    assert len(ran) >= 2
    seconds = [t["measured_step_seconds"] for t in ran]
    assert all(s > 0 for s in seconds) and seconds == sorted(seconds)
    assert {t["global_batch"] for t in trials} == {8}, "the global batch never moves"
    assert {t["set"]["batch.global"] for t in trials} == {8}
    assert all(t["peak_bytes"] > 0 for t in ran)
    best = yaml.safe_load((search.root / "best.yaml").read_text())
    assert best["activation_checkpointing"] == ran[0]["set"]["activation_checkpointing"], \
        "--write writes the measured fastest"


@pytest.mark.slow
def test_a_crashing_trial_is_recorded_and_ranked_last() -> None:
    trials = measured_search().trials
    crashed = [t for t in trials if t["outcome"] != "measured"]
    assert [t["set"]["activation_checkpointing"] for t in crashed] == ["selective"]
    assert trials[-1] is crashed[0]
    assert crashed[0]["outcome"].startswith("crashed (exit 1): tiny_train: activation_checkpointing selective")
    assert crashed[0]["measured_step_seconds"] is None
    assert (Path(crashed[0]["run_dir"]).parent / "search.json").is_file()


def test_trials_launch_through_distrecipe_launch(tmp_path: Path) -> None:
    spec = TrialSpec("ZeRO-3", {"stage": 3, "batch.micro": 4})
    argv = trial_argv(str(TINY), ["cluster.gpu_memory=8GB"], spec, tmp_path / "trial-1", 3, 60.0)
    assert argv[1:5] == ["-m", "distrecipe", "launch", str(TINY)]
    assert argv[5:11] == ["--set", "cluster.gpu_memory=8GB", "--set", "stage=3", "--set", "batch.micro=4"]
    assert argv[-7:] == ["--", "-m", "distrecipe.launch.tiny_train", "--model", "recipe", "--steps", "3"]


@pytest.mark.parametrize("outcomes", [("crashed (exit 1): x", "measured", "measured"),
                                      ("out of memory", "timed out", "measured")])
def test_failed_trials_rank_after_every_measured_one(tmp_path: Path, outcomes: tuple[str, ...]) -> None:
    trials = [Trial(TrialSpec(str(i), {}), tmp_path, 0, outcome, 8,
                    step_seconds=1.0 / (i + 1) if outcome == "measured" else None)
              for i, outcome in enumerate(outcomes)]
    ranked = rank_trials(trials)
    measured = [t for t in ranked if t.measured]
    assert ranked[:len(measured)] == sorted(measured, key=lambda t: t.step_seconds or 0)
    assert [t.spec.label for t in ranked[len(measured):]] == [t.spec.label for t in trials if not t.measured]
