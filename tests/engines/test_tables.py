"""Which release's table judges, and the version-aware findings it gives.

The release comes from what the user states (`--engine-version`, `[tool.distrecipe]
engines`), else the engine installed here, else the newest table; a release with no
table of its own is judged by the nearest older one, with a note. Each engine's test
lints one file against two releases and gets the finding only one of them gives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.engines import tables
from distrecipe.engines.tables import history, label, release, release_key, releases, state
from tests.conftest import Result


def test_release_numbers_sort_as_pep_440_does() -> None:
    ordered = ["0.9.6.dev0", "0.9.6rc1", "0.9.6", "0.9.6.post1", "0.9.10", "5.23", "5.23.1"]
    assert sorted(reversed(ordered), key=release_key) == ordered
    assert release_key("5.23") == release_key("5.23.0")


@pytest.mark.parametrize("engine", tables.ENGINES)
def test_every_engine_has_at_least_three_releases_each_naming_itself(engine: tables.TableEngine) -> None:
    known = releases(engine)
    assert len(known) >= 3, known
    for version in known:
        assert tables.table_of(engine, version)["version"] == version


def test_a_stated_release_wins_over_the_installed_one() -> None:
    state({"accelerate": ("1.14.0", "--engine-version")})
    chosen = release("accelerate")
    assert (chosen.runs, chosen.table, chosen.where, chosen.note) == ("1.14.0", "1.14.0", "--engine-version", None)
    assert label("accelerate") == "Accelerate 1.14.0"


def test_without_a_statement_the_installed_release_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "installed", lambda engine: "1.15.0")
    tables.release.cache_clear()
    assert (release("accelerate").table, release("accelerate").origin) == ("1.15.0", "installed")
    monkeypatch.setattr(tables, "installed", lambda engine: None)
    tables.release.cache_clear()
    assert (release("accelerate").table, release("accelerate").where) == (releases("accelerate")[-1], "newest table")
    tables.release.cache_clear()


def test_a_release_without_a_table_is_judged_by_the_nearest_older_one_and_says_so() -> None:
    state({"accelerate": ("1.15.3", "pyproject.toml")})
    assert release("accelerate").table == "1.15.0"
    assert release("accelerate").note == ("Accelerate 1.15.3 (pyproject.toml) has no table of its own: judged by "
                                          "Accelerate 1.15.0's, the nearest older release with one")


def test_a_release_newer_than_every_table_is_judged_by_the_newest_with_a_note() -> None:
    state({"deepspeed": ("9.0", "--engine-version")})
    newest = releases("deepspeed")[-1]
    assert release("deepspeed").table == newest
    assert release("deepspeed").note == (f"DeepSpeed 9.0 (--engine-version) is newer than every table here: judged "
                                         f"by DeepSpeed {newest}'s, the newest (`make drift` reads the new release)")


def test_history_says_added_or_removed_and_which_release() -> None:
    def fsdp_offload(found: dict[str, object]) -> bool:
        return "fsdp_activation_checkpointing_offload" in found["sections"]["fsdp_config"]["keys"]  # type: ignore[index]

    state({"accelerate": ("1.14.0", "test")})
    assert history("accelerate", fsdp_offload) == "a key of Accelerate ≥ 1.15.0; the project runs 1.14.0 (test)"
    assert history("accelerate", lambda found: False) is None

    def router_replay(found: dict[str, object]) -> bool:
        return "router_replay" in found["configs"]["ppo_trainer"]["actor_rollout_ref"]["actor"]  # type: ignore[index]

    state({"verl": ("0.9.1", "test")})
    assert history("verl", router_replay) == "removed in verl 0.9.1 (last in 0.9.0); the project runs 0.9.1 (test)"


LINT = Callable[..., Result]


def _lint(cli: LINT, path: Path, engine: str, version: str, *extra: str) -> Result:
    return cli("lint", "--engine-version", f"{engine}={version}", *extra, path)


@pytest.mark.parametrize(("engine", "name", "text", "old", "new", "said"), [
    pytest.param(
        "accelerate", "accelerate_config.yaml",
        "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
        "  fsdp_activation_checkpointing_offload: true\n",
        "1.14.0", "1.15.0",
        "'fsdp_activation_checkpointing_offload' is not a key of Accelerate 1.14.0's fsdp_config (a key of "
        "Accelerate ≥ 1.15.0; the project runs 1.14.0 (--engine-version))", id="accelerate-added"),
    pytest.param(
        "accelerate", "accelerate_config.yaml",
        "distributed_type: MULTI_GPU\nnum_processes: 4\nparallelism_config:\n"
        "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_tp_size: 2\n",
        "1.15.0", "1.16.0",
        "parallelism_config: tensor parallelism cannot sit beside pure replication (dp_replicate > 1 with "
        "dp_shard 1) in Accelerate 1.15.0 (accepted from Accelerate 1.16.0; the project runs 1.15.0 "
        "(--engine-version))", id="accelerate-meaning-changed"),
    pytest.param(
        "deepspeed", "ds_config.json", '{"train_batch_size": 8, "managed_gradient_accumulation": true}\n',
        "0.19.3", "0.19.4",
        "'managed_gradient_accumulation' is not a key of DeepSpeed 0.19.3's top level (a key of DeepSpeed ≥ "
        "0.19.4; the project runs 0.19.3 (--engine-version))", id="deepspeed-added"),
    pytest.param(
        "verl", "run.sh",
        "python3 -m verl.trainer.main_ppo \\\n  actor_rollout_ref.rollout.full_determinism=True \\\n"
        "  trainer.n_gpus_per_node=8\n",
        "0.8.0", "0.9.1",
        "actor_rollout_ref.rollout.full_determinism is not a key of actor_rollout_ref.rollout in verl 0.8.0's "
        "config (a key of verl ≥ 0.9.0; the project runs 0.8.0 (--engine-version))", id="verl-added"),
    pytest.param(
        "verl", "run.sh",
        "python3 -m verl.trainer.main_ppo \\\n  actor_rollout_ref.actor.router_replay.mode=disabled \\\n"
        "  trainer.n_gpus_per_node=8\n",
        "0.9.1", "0.8.0",
        "actor_rollout_ref.actor.router_replay is not a key of actor_rollout_ref.actor in verl 0.9.1's config "
        "(removed in verl 0.9.1 (last in 0.9.0); the project runs 0.9.1 (--engine-version))", id="verl-removed"),
    pytest.param(
        "transformers", "run.sh",
        "torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4 --evaluation_strategy steps\n",
        "5.10.4", "4.50.0",
        "--evaluation_strategy is no TrainingArguments field in transformers 5.10.4 (removed in transformers "
        "4.51.0 (last in 4.50.0); the project runs 5.10.4 (--engine-version); use --eval_strategy)",
        id="transformers-removed"),
])
def test_one_file_two_releases(cli: LINT, write: Callable[[str, str], Path], engine: str, name: str, text: str,
                               old: str, new: str, said: str) -> None:
    """The release that lacks the key names the one that has it; the other says nothing of it."""
    path = write(name, text)
    judged = _lint(cli, path, engine, old)
    assert said in judged.out, judged.out
    key = said.split(" is ")[0].split(": ")[0]
    assert key not in _lint(cli, path, engine, new).out


def test_a_trainingarguments_yaml_is_judged_against_transformers_5_23(
        cli: LINT, write: Callable[[str, str], Path]) -> None:
    """A field 5.23 has and 5.10.4 lacks, and one 5.23 removed: each release says its own."""
    added = sorted(set(tables.table_of("hf", "5.23.0")["training_arguments"])
                   - set(tables.table_of("hf", "5.10.4")["training_arguments"]))
    assert added, "transformers 5.23 adds no TrainingArguments field over 5.10.4"
    path = write("training_args.yaml", f"output_dir: out\nper_device_train_batch_size: 4\n{added[0]}: null\n")
    on_523 = _lint(cli, path, "transformers", "5.23.0")
    assert "DR362" not in on_523.out and "DR366" not in on_523.out, on_523.out
    on_510 = _lint(cli, path, "transformers", "5.10.4")  # only TrainingArguments keys: HfArgumentParser refuses it
    assert f"error DR366: {added[0]} is no TrainingArguments field in transformers 5.10.4 (a field of " \
           f"transformers ≥ 5.23.0; the project runs 5.10.4 (--engine-version))" in on_510.out, on_510.out


@pytest.mark.parametrize(("value", "said"), [
    ("nosuch=1.0", "unknown engine 'nosuch': one of"),
    ("deepspeed", "takes ENGINE=RELEASE"),
    ("deepspeed=latest", "deepspeed: a release number such as"),
])
def test_a_bad_engine_version_is_one_line_and_exit_2(cli: LINT, write: Callable[[str, str], Path], value: str,
                                                     said: str) -> None:
    result = cli("lint", "--engine-version", value, write("ds_config.json", '{"train_batch_size": 8}\n'))
    assert result.code == 2
    assert said in result.err, result.err
