"""`plan --search` for a kind of program offers only what it runs, and `launch` runs the
searched batch: each program's own parser reads micro × accumulation × the DP world its
launcher starts as the search's global batch."""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import RECIPES, Result

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
SIXTEEN = ("--set", "cluster.nodes=2", "--set", "batch.global=512", "--set", "cluster.gpu=h100")
"""The seed on 16 H100s at global 512: without a kind the winner is FSDP2."""
SCRIPTS = {"hf": "from transformers import Trainer, TrainingArguments\n",
           "accelerate": "from accelerate import Accelerator\n",
           "deepspeed": "import deepspeed\nengine = deepspeed.initialize\n",
           "torchrun": "import torch\n"}
Cli = Callable[..., Result]


def offered(cli: Cli, *args: str | Path) -> list[dict[str, Any]]:
    """Every fitting candidate's `set` keys, best first."""
    result = cli("plan", SEED, *SIXTEEN, "--search", "--format", "json", "--top", "10000", *args)
    assert result.code == 0, result.err
    return [c["set"] for c in json.loads(result.out)["candidates"]]


def never(kind: str, c: dict[str, Any]) -> bool:
    """What `kind` cannot carry under the launcher the search's recipe defaults to."""
    s, t, p = c["parallel.sequence"], c["parallel.tensor"], c["parallel.pipeline"]
    return {
        "hf": p > 1 or (c["strategy"] == "fsdp" and (s > 1 or t > 1)) or (c["strategy"] == "zero" and s > 1),
        "torchrun": c["strategy"] == "zero" and (s > 1 or t > 1),
        "deepspeed": p > 1 or c["strategy"] == "fsdp",
        "accelerate": p > 1,
    }[kind]


def test_without_a_kind_the_search_offers_what_some_programs_cannot_run(cli: Cli) -> None:
    every = offered(cli)
    assert every[0]["strategy"] == "fsdp"
    assert all(any(never(kind, c) for c in every) for kind in SCRIPTS)


@pytest.mark.parametrize("kind", sorted(SCRIPTS))
def test_a_kind_is_offered_only_what_it_runs_and_written(cli: Cli, kind: str, tmp_path: Path) -> None:
    best = tmp_path / "best.yaml"
    got = offered(cli, "--program-kind", kind, "--write", best)
    assert got and not [c for c in got if never(kind, c)]
    assert yaml.safe_load(best.read_text())["launch"] == {"program_kind": kind}
    backend = json.loads(cli("resolve", best, "--format", "json").out)["launch.backend"]["value"]
    assert backend in {"hf": ("deepspeed", "torchrun"), "torchrun": ("deepspeed", "torchrun"),
                       "deepspeed": ("deepspeed", "torchrun"),
                       "accelerate": ("accelerate", "accelerate-deepspeed")}[kind]


def test_the_script_s_kind_is_read_as_launch_reads_it(cli: Cli, tmp_path: Path,
                                                      write: Callable[[str, str], Path]) -> None:
    script = write("train.py", SCRIPTS["hf"])
    result = cli("plan", SEED, *SIXTEEN, "--search", "--script", script, "--write", tmp_path / "best.yaml")
    assert result.code == 0, result.err
    assert f"distrecipe: program kind hf (read from {script})" in result.err
    assert yaml.safe_load((tmp_path / "best.yaml").read_text())["launch"] == {"program_kind": "hf"}


@pytest.mark.parametrize(("args", "message"), [
    (("--program-kind", "hf"), "--program-kind needs --search"),
    (("--script", "x.py"), "--script needs --search"),
    (("--search", "--script", "x.py", "--program-kind", "hf"), "give --program-kind or --script, not both"),
])
def test_a_kind_needs_the_search_and_one_source(cli: Cli, args: tuple[str, ...], message: str) -> None:
    result = cli("plan", SEED, *args)
    assert result.code == 2 and message in result.err


def hf(words: list[str]) -> Namespace:
    from transformers import HfArgumentParser, TrainingArguments

    args, _ = HfArgumentParser(TrainingArguments).parse_known_args(words)  # argv only: no file is read
    return args


def launched(cli: Cli, kind: str, tmp_path: Path, write: Callable[[str, str], Path]
             ) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(the searched winner's keys, launch --dry-run's JSON, the directory compile wrote)."""
    best = tmp_path / "best.yaml"
    (winner, *_) = offered(cli, "--program-kind", kind, "--write", best)
    script = write("train.py", SCRIPTS[kind])
    result = cli("launch", best, "--dry-run", "--run-dir", tmp_path / "run", "--", script)
    assert result.code == 0, result.err
    out = tmp_path / "compiled"  # the files the dry run names but does not write
    target = {"hf": "hf", "accelerate": "accelerate", "deepspeed": "deepspeed"}.get(kind)
    if target is not None:  # a torchrun script reads the plan, no engine file
        compiled = cli("compile", best, "--target", target, "-o", out)
        assert compiled.code == 0, compiled.err
    return winner, json.loads(result.out), out


@pytest.mark.slow  # imports torch, DeepSpeed, Accelerate and transformers for their parsers
@pytest.mark.parametrize("kind", sorted(SCRIPTS))
def test_each_program_runs_the_searched_batch(cli: Cli, kind: str, tmp_path: Path,
                                             write: Callable[[str, str], Path]) -> None:
    from tests.test_launch_parsers import accelerate, deepspeed, torchrun

    winner, dry, out = launched(cli, kind, tmp_path, write)
    words: list[str] = dry["argv"]
    launcher = Path(words[0]).name
    ds = json.loads((out / "ds_config.json").read_text()) if (out / "ds_config.json").exists() else {}
    split = ds.get("sequence_parallel_size", 1) * ds.get("tensor_parallel", {}).get("autotp_size", 1)
    if launcher == "deepspeed":
        args = deepspeed(words)
        world, program = args.num_nodes * args.num_gpus, list(args.user_args)
    elif launcher == "torchrun":
        args = torchrun(words)
        world, program = int(args.nnodes) * int(args.nproc_per_node), list(args.training_script_args)
    else:
        args = accelerate(words)
        world, program = args.num_processes, list(args.training_script_args)
        config = yaml.safe_load((out / "accelerate_config.yaml").read_text())
        sizes = config.get("parallelism_config", {})  # the FSDP path's; the DeepSpeed path's are the ds_config's
        split *= sizes.get("parallelism_config_cp_size", 1) * sizes.get("parallelism_config_tp_size", 1)
    if kind == "hf":
        trainer = hf(program)
        micro, accumulation = trainer.per_device_train_batch_size, trainer.gradient_accumulation_steps
    elif kind == "deepspeed":
        assert program[-2:] == ["--deepspeed_config", f"{tmp_path / 'run'}/ds_config.json"]
        micro, accumulation = ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]
    elif kind == "accelerate":
        micro = winner["batch.micro"]  # the DataLoader's batch_size is the script's (DR223)
        # On Accelerate's DeepSpeed path the ds_config carries it; on the FSDP path the environment.
        accumulation = (ds["gradient_accumulation_steps"] if ds
                        else int(dry["env"]["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"]))
    else:
        plan = json.loads(cli("resolve", tmp_path / "best.yaml", "--format", "json").out)
        micro, accumulation = plan["batch.micro"]["value"], plan["batch.accumulation"]["value"]
        split = winner["parallel.tensor"] * winner["parallel.sequence"] * winner["parallel.pipeline"]
    dp = world // split
    assert (micro, accumulation) == (winner["batch.micro"], winner["batch.accumulation"])
    assert micro * accumulation * dp == winner["batch.global"] == 512


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_an_openrlhf_search_says_its_fits_are_lower_bounds(cli: Cli, output_format: str) -> None:
    """OpenRLHF's critic and reward model are `$REWARD`'s size, which `plan` cannot price
    (`plan.rollout._openrlhf`): the search names them once, never a silent fit."""
    sets = ("--set", "cluster.nodes=1", "--set", "rl.rollout_n=8", "--set", "rl.prompts_per_step=32",
            "--set", "rl.rollout_memory=0.4", "--set", "rl.free_rollout_memory=true",
            "--set", "launch.backend=openrlhf")
    result = cli("plan", SEED, *sets, "--search", "--top", "1", "--format", output_format)
    assert result.code == 0, result.err
    if output_format == "json":
        assert json.loads(result.out)["unpriced"] == [
            "the critic (a trained DeepSpeed engine from $REWARD: --algo.advantage.estimator gae, OpenRLHF's "
            "default)", "the reward model ($REWARD)"]
    else:
        assert result.out.splitlines()[-1].startswith("a lower bound: not priced, the critic (")
