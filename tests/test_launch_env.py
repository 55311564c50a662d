"""What launch reads from the machine (GPUs, SLURM) and what it records (run directory)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from distrecipe.errors import LaunchError
from distrecipe.launch.detect import detect_gpus, hold_port
from distrecipe.launch.rundir import RunDir
from distrecipe.launch.secrets import REDACTED
from distrecipe.launch.secrets import redact_env as redact
from distrecipe.launch.slurm import expand_nodelist
from distrecipe.output import write_files
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve

TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny-cpu.yaml"
SMI = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"


def no_smi(argv: list[str]) -> str:
    raise AssertionError("nvidia-smi must not run when CUDA_VISIBLE_DEVICES answers")


@pytest.mark.parametrize(("value", "count"), [("0,1,2", 3), ("3", 1), ("GPU-a,GPU-b", 2), ("0,-1,2", 1)])
def test_visible_devices_answer_first(value: str, count: int) -> None:
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": value}, run=no_smi) == count


@pytest.mark.parametrize("value", ["", "-1"])
def test_hidden_devices_are_an_error(value: str) -> None:
    with pytest.raises(LaunchError, match="hides every GPU"):
        detect_gpus({"CUDA_VISIBLE_DEVICES": value}, run=no_smi)


def test_nvidia_smi_lines_are_counted() -> None:
    assert detect_gpus({}, run=lambda argv: SMI, which=lambda name: "/usr/bin/nvidia-smi") == 2


def test_no_nvidia_smi_is_an_error() -> None:
    with pytest.raises(LaunchError, match="no nvidia-smi"):
        detect_gpus({}, which=lambda name: None)


def test_auto_gpus_reach_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from distrecipe.commands.launch import launch

    overrides = ("cluster.device=gpu", "cluster.gpus_per_node=auto", "batch.global=16")
    code = launch(recipe=str(TINY), overrides=overrides, dry_run=True, target="torchrun",
                  environ={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert code == 0
    argv = json.loads(capsys.readouterr().out)["argv"]
    assert argv[argv.index("--nproc-per-node") + 1] == "4"


@pytest.mark.parametrize(("nodelist", "hosts"), [
    ("gpu01", ["gpu01"]),
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("a[8-10],login1", ["a8", "a9", "a10", "login1"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
])
def test_slurm_node_lists(nodelist: str, hosts: list[str]) -> None:
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("nodelist", [
    "n[1-999999999]", "n[1-1000001]", "n[1-1000],m[1-1000]x[1-1000]", "n[0-1000000],login1",
    "r[1-1000]n[1-1000]s[1-1000]" + "[1]" * 50_000,
])
def test_a_node_list_naming_more_hosts_than_a_recipe_may_is_refused_before_expanding(nodelist: str) -> None:
    with pytest.raises(LaunchError, match=r"names more than 1,000,000 hosts, the most a recipe may ask for"):
        expand_nodelist(nodelist)


@pytest.mark.parametrize("nodelist", ["n[3-1]", "n[" + "9" * 5000 + "]", "n[1-" + "9" * 30 + "]", "n[a-b]"])
def test_an_unreadable_node_list_is_refused(nodelist: str) -> None:
    with pytest.raises(LaunchError, match="cannot read SLURM node list"):
        expand_nodelist(nodelist)


def test_the_largest_node_list_a_recipe_may_use_expands() -> None:
    assert len(expand_nodelist("n[1-999999],m1")) == 1_000_000


def test_secrets_are_redacted() -> None:
    env = {"HF_TOKEN": "hf_x", "AWS_SECRET_ACCESS_KEY": "s", "WANDB_API_KEY": "k", "db_password": "p",
           "PATH": "/bin", "MASTER_PORT": "29500"}
    assert redact(env) == {"AWS_SECRET_ACCESS_KEY": REDACTED, "HF_TOKEN": REDACTED, "MASTER_PORT": "29500",
                           "PATH": "/bin", "WANDB_API_KEY": REDACTED, "db_password": REDACTED}


def test_run_directory_records_start_and_end(tmp_path: Path) -> None:
    plan = resolve(load_recipe(TINY))
    record = RunDir(tmp_path / "run")
    record.start(plan=plan, recipe_text="recipe: 1\n", files={"ds_config.json": "{}\n"},
                 argv=("deepspeed", "x.py"), env={"HF_TOKEN": "hf_x", "A": "1"}, cwd="/w",
                 overrides=("stage=3",))
    written = json.loads((tmp_path / "run" / "run.json").read_text())
    assert written["argv"] == ["deepspeed", "x.py"] and written["exit_code"] is None
    assert written["env"] == {"A": "1", "HF_TOKEN": REDACTED}
    assert written["versions"]["distrecipe"] and "torch" in written["versions"]
    plan_data = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan_data["batch"]["global_"] == 8 and plan_data["world"] == 2
    record.finish(143, signal="SIGTERM")
    written = json.loads((tmp_path / "run" / "run.json").read_text())
    assert written["exit_code"] == 143 and written["signal"] == "SIGTERM" and written["end"]
    with pytest.raises(LaunchError, match="already holds a run"):
        RunDir(tmp_path / "run").start(plan=plan, recipe_text="", files={}, argv=(), env={}, cwd="/")


def test_a_run_directory_only_its_user_can_read(tmp_path: Path) -> None:
    """The configs a job reads keep a secret it needs (here a Comet API key in
    `native.deepspeed`), so the run directory is 0700 and its files 0600 whatever the
    umask, an existing (empty) `--run-dir` included; `compile`'s output takes the umask."""
    import os
    import stat

    plan = resolve(load_recipe(TINY, ["native.deepspeed.comet.enabled=true",
                                      "native.deepspeed.comet.api_key=c0met-s3cret"]))
    existing = tmp_path / "given"
    existing.mkdir(mode=0o755)
    old = os.umask(0o022)
    try:
        for path in (tmp_path / "runs" / "run", existing):
            record = RunDir(path)
            record.start(plan=plan, recipe_text="recipe: 1\n", files={"ds_config.json": '{"comet": {}}\n'},
                         argv=("deepspeed", "x.py"), env={}, cwd="/w")
            record.finish(0)
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
            modes = {child.name: stat.S_IMODE(child.stat().st_mode) for child in path.iterdir()}
            assert modes == {"ds_config.json": 0o600, "plan.json": 0o600, "recipe.yaml": 0o600, "run.json": 0o600}
        assert "c0met-s3cret" in (existing / "plan.json").read_text()  # the job reads it: kept, and private
        assert stat.S_IMODE((tmp_path / "runs").stat().st_mode) == 0o755  # the runs root is the user's
        write_files(tmp_path / "compiled", {"ds_config.json": "{}\n"})
        assert stat.S_IMODE((tmp_path / "compiled" / "ds_config.json").stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_a_taken_port_moves_only_when_taken() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        with hold_port(taken) as moved:
            assert moved.getsockname()[1] not in (taken, 0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with hold_port(free) as held:
        assert held.getsockname()[1] == free


def test_a_held_port_is_never_handed_out_twice_yet_the_job_can_listen_on_it() -> None:
    """Two launches started together: the second gets another port while the first holds
    its own, and the first job's rank 0 (a listener with SO_REUSEADDR, like torch's
    TCPStore) binds the held port."""
    with hold_port(0) as first, hold_port(first.getsockname()[1]) as second:
        port = first.getsockname()[1]
        assert second.getsockname()[1] != port
        with socket.socket() as rank0:
            rank0.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            rank0.bind(("127.0.0.1", port))
            rank0.listen()
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
