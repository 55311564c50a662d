"""The launchers' own argument parsers read the argv `launch` builds as we mean it.

`test_launch_argv.py` pins the exact lists; here torchrun, DeepSpeed's runner and
`accelerate launch` are the judges: a flag they do not know, or one that swallows the
program's arguments, fails here even where our expected list had the same mistake.
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrecipe.commands.launch import launch
from tests.test_launch_argv import RUN, SEED, SLURM_NODE_1, TINY

pytestmark = pytest.mark.usefixtures("project")  # the train.py the dry runs name


def argv(capsys: pytest.CaptureFixture[str], recipe: Path, *overrides: str, **options: Any) -> list[str]:
    options.setdefault("environ", {})
    capsys.readouterr()
    assert launch(recipe=str(recipe), overrides=overrides, run_dir=str(RUN), dry_run=True, **options) == 0
    words: list[str] = json.loads(capsys.readouterr().out)["argv"]
    return words


def torchrun(words: list[str]) -> Namespace:
    run = pytest.importorskip("torch.distributed.run")
    return run.get_args_parser().parse_args(words[1:])


def deepspeed(words: list[str]) -> Namespace:
    runner = pytest.importorskip("deepspeed.launcher.runner")
    args: Namespace = runner.parse_args(words[1:])
    return args


def accelerate(words: list[str]) -> Namespace:
    commands = pytest.importorskip("accelerate.commands.launch")
    assert words[1] == "launch"
    return commands.launch_command_parser().parse_args(words[2:])


def test_torchrun_reads_one_node_and_the_module(capsys: pytest.CaptureFixture[str]) -> None:
    args = torchrun(argv(capsys, TINY, target="torchrun", program=("-m", "pkg.train", "--lr", "1")))
    assert (args.nnodes, args.nproc_per_node, args.standalone) == ("1", "2", True)
    assert (args.module, args.training_script, args.training_script_args) == (True, "pkg.train", ["--lr", "1"])
    assert (args.log_dir, args.redirects, args.tee) == (f"{RUN}/ranks", "3", "3")


def test_torchrun_reads_the_rendezvous(capsys: pytest.CaptureFixture[str], project: Callable[[str], Path]) -> None:
    project("torchrun")
    args = torchrun(argv(capsys, SEED, "launch.master_addr=10.0.0.1", "launch.master_port=29400",
                         "strategy=fsdp", target="torchrun", program=("train.py", "--bf16")))
    assert (args.nnodes, args.nproc_per_node, args.standalone) == ("4", "8", False)
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", "10.0.0.1:29400",
                                                                     "seed-8b-32gpu-zero2")
    assert (args.training_script, args.training_script_args) == ("train.py", ["--bf16"])


def test_deepspeed_reads_one_node_and_passes_the_config_to_the_program(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = deepspeed(argv(capsys, TINY))
    assert (args.num_nodes, args.num_gpus, args.master_addr, args.master_port) == (1, 2, "127.0.0.1", 29500)
    assert (args.module, args.user_script) == (True, "distrecipe.launch.tiny_train")
    assert args.user_args == ["--deepspeed_config", f"{RUN}/ds_config.json"]


def test_deepspeed_reads_the_scheduler_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    args = deepspeed(argv(capsys, SEED, "cluster.nodes=1", "cluster.gpus_per_node=2", "batch.global=64",
                          environ={"CUDA_VISIBLE_DEVICES": "2,3,5"}, allow_no_fit=True))
    assert args.include == "localhost:2,3"


def test_deepspeed_reads_one_node_of_an_srun_step(capsys: pytest.CaptureFixture[str]) -> None:
    args = deepspeed(argv(capsys, SEED, environ=SLURM_NODE_1, program=("train.py", "--lr", "1e-5")))
    assert (args.hostfile, args.no_ssh, args.node_rank) == (f"{RUN}/hostfile", True, 1)
    assert (args.num_nodes, args.num_gpus, args.master_addr) == (4, 8, "gpu07")
    assert (args.module, args.user_script) == (False, "train.py")
    assert args.user_args == ["--lr", "1e-5", "--deepspeed_config", f"{RUN}/ds_config.json"]


@pytest.mark.parametrize("backend", ["accelerate", "accelerate-deepspeed"])
def test_accelerate_reads_the_machine_fields(capsys: pytest.CaptureFixture[str], backend: str,
                                            project: Callable[[str], Path]) -> None:
    project("accelerate")
    strategy = "strategy=fsdp" if backend == "accelerate" else "strategy=zero"
    args = accelerate(argv(capsys, SEED, strategy, environ=SLURM_NODE_1, target=backend,
                           program=("train.py", "--bf16")))
    assert Path(args.config_file).parent == RUN
    assert (args.num_machines, args.machine_rank, args.num_processes) == (4, 1, 32)
    assert (args.main_process_ip, args.main_process_port) == ("gpu07", 29500)
    assert (args.training_script, args.training_script_args) == ("train.py", ["--bf16"])
    expected = f"{RUN}/ds_config.json" if backend == "accelerate-deepspeed" else None
    assert args.deepspeed_config_file == expected
    # What `accelerate launch` hands torchrun (`_run_torchrun`): the per-rank log files, teed.
    filter_args = pytest.importorskip("accelerate.utils.launch")._filter_args
    run = pytest.importorskip("torch.distributed.run")
    torch_args = filter_args(args, run.get_args_parser(), ["--training_script", args.training_script])
    assert (torch_args.log_dir, torch_args.tee, torch_args.redirects) == (f"{RUN}/ranks", "3", "0")
