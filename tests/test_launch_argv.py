"""`--dry-run` for every launcher: the exact argv and env, with nothing run or written.

verl and Accelerate's FSDP cannot run on this CPU machine, so their exact commands
are the proof; DeepSpeed and torchrun are also run for real in test_launch_train.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrecipe.commands.launch import launch
from distrecipe.errors import LaunchError
from distrecipe.launch.launchers import LAUNCHERS
from distrecipe.launch.prepare import build_request
from distrecipe.launch.spec import LaunchRequest, Program, executable
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve
from distrecipe.translator.targets import TARGETS, EmitOptions

pytestmark = pytest.mark.usefixtures("project")  # the train.py the dry runs name

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"  # 4 nodes × 8 GPUs
RUN = Path("/tmp/distrecipe-test-run")
CPU_THREADS = str(max(1, (os.cpu_count() or 1) // 2))
TORCHRUN_RANK_LOGS = ["--log-dir", f"{RUN}/ranks", "--redirects", "3", "--tee", "3"]
"""Each rank's stdout and stderr in its own file under the run directory, still teed to the terminal."""

DryRun = Callable[..., dict[str, Any]]


@pytest.fixture
def dry(capsys: pytest.CaptureFixture[str]) -> DryRun:
    """`launch(... dry_run=True)` with a clean environment; returns the printed JSON."""

    def call(recipe: Path, *overrides: str, environ: dict[str, str] | None = None,
             **options: Any) -> dict[str, Any]:
        capsys.readouterr()
        code = launch(recipe=str(recipe), overrides=overrides, run_dir=str(RUN), dry_run=True,
                      environ=environ or {}, **options)
        assert code == 0
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        return result

    return call


def test_deepspeed_one_cpu_node(dry: DryRun) -> None:
    got = dry(TINY)
    assert got["argv"] == [
        executable("deepspeed"), "--num_nodes", "1", "--num_gpus", "2",
        "--master_addr", "127.0.0.1", "--master_port", "29500",
        "--module", "distrecipe.launch.tiny_train", "--deepspeed_config", f"{RUN}/ds_config.json",
    ]
    assert got["env"] == {"DISTRECIPE_RUN_DIR": str(RUN), "DISTRECIPE_PLAN": f"{RUN}/plan.json",
                          "DISTRECIPE_METRICS": f"{RUN}/metrics.jsonl",
                          "DISTRECIPE_DS_CONFIG": f"{RUN}/ds_config.json", "OMP_NUM_THREADS": CPU_THREADS}
    assert got["program_kind"] == "deepspeed"
    assert got["program_kind_reason"] == "distrecipe's reference trainer under deepspeed"
    assert got["files"] == ["ds_config.json", "plan.json", "recipe.yaml", "run.json"]
    assert not RUN.exists(), "a dry run writes nothing"


def test_a_user_thread_count_is_kept(dry: DryRun) -> None:
    assert "OMP_NUM_THREADS" not in dry(TINY, environ={"OMP_NUM_THREADS": "4"})["env"]


def test_deepspeed_user_script_and_module(dry: DryRun) -> None:
    got = dry(TINY, program=("train.py", "--lr", "1e-5"))
    assert got["argv"][-5:] == ["train.py", "--lr", "1e-5", "--deepspeed_config", f"{RUN}/ds_config.json"]
    got = dry(TINY, program=("-m", "pkg.train", "--x"))
    assert got["argv"][-5:] == ["--module", "pkg.train", "--x", "--deepspeed_config",
                                f"{RUN}/ds_config.json"]


def test_deepspeed_keeps_the_gpus_a_scheduler_gave(dry: DryRun) -> None:
    one_node = ("cluster.nodes=1", "cluster.gpus_per_node=2", "batch.global=64")  # 126 GB of 80: no fit
    got = dry(SEED, *one_node, environ={"CUDA_VISIBLE_DEVICES": "2,3,5"}, allow_no_fit=True)
    assert got["argv"][1:7] == ["--include", "localhost:2,3", "--master_addr", "127.0.0.1",
                                "--master_port", "29500"]
    with pytest.raises(LaunchError, match="indices, not UUIDs"):
        dry(SEED, *one_node, environ={"CUDA_VISIBLE_DEVICES": "GPU-1a,GPU-2b"}, allow_no_fit=True)


def test_deepspeed_several_nodes_with_a_hostfile(dry: DryRun) -> None:
    got = dry(SEED, "launch.hostfile=/etc/hosts.ds", "launch.master_addr=10.0.0.1")
    assert got["argv"][:11] == [
        executable("deepspeed"), "--hostfile", "/etc/hosts.ds", "--num_nodes", "4", "--num_gpus", "8",
        "--master_addr", "10.0.0.1", "--master_port", "29500",
    ]
    assert got["env"] == {"DISTRECIPE_RUN_DIR": str(RUN), "DISTRECIPE_PLAN": f"{RUN}/plan.json",
                          "DISTRECIPE_METRICS": f"{RUN}/metrics.jsonl",
                          "DISTRECIPE_DS_CONFIG": f"{RUN}/ds_config.json"}


SLURM_NODE_1 = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[07-09,12]", "SLURM_NODEID": "1",
                "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4"}


def test_deepspeed_per_node_under_srun(dry: DryRun) -> None:
    got = dry(SEED, environ=SLURM_NODE_1)
    assert got["argv"][:14] == [
        executable("deepspeed"), "--hostfile", f"{RUN}/hostfile", "--no_ssh", "--node_rank", "1",
        "--num_nodes", "4", "--num_gpus", "8", "--master_addr", "gpu07", "--master_port", "29500",
    ]
    assert "hostfile" in got["files"]


def test_an_allocation_smaller_than_the_recipe_is_refused(dry: DryRun) -> None:
    with pytest.raises(LaunchError, match=r"the recipe asks for 4 node\(s\) \(cluster.nodes\), SLURM gives 2 "
                                          r"\(SLURM_JOB_NODELIST\)"):
        dry(SEED, target="torchrun", environ={**SLURM_NODE_1, "SLURM_JOB_NODELIST": "gpu[07-08]"})


def real_request(*overrides: str) -> LaunchRequest:
    """What a real launch (not a dry run) builds outside SLURM: no hosts are invented."""
    plan = resolve(load_recipe(SEED, overrides))
    return build_request(plan, program=Program(target="train.py"), run_dir=RUN, configs={}, node_rank=None,
                         environ={}, dry_run=False, say=pytest.fail)


def test_deepspeed_several_nodes_need_a_hostfile() -> None:
    with pytest.raises(LaunchError, match="hostfile"):
        LAUNCHERS["deepspeed"](real_request("launch.master_addr=10.0.0.1"))


def test_several_nodes_need_a_master() -> None:
    with pytest.raises(LaunchError, match="master_addr"):
        LAUNCHERS["torchrun"](real_request("launch.backend=torchrun"))


def test_torchrun_one_node_is_standalone(dry: DryRun) -> None:
    got = dry(TINY, target="torchrun")
    assert got["argv"] == [executable("torchrun"), "--nnodes", "1", "--nproc-per-node", "2",
                           "--standalone", *TORCHRUN_RANK_LOGS, "--module", "distrecipe.launch.tiny_train"]
    assert "ds_config.json" in got["files"], "a ZeRO plan's script still reads DeepSpeed's config"


def test_torchrun_several_nodes_rendezvous_c10d(dry: DryRun, project: Callable[[str], Path]) -> None:
    project("torchrun")
    got = dry(SEED, "launch.master_addr=10.0.0.1", "launch.master_port=29400", "strategy=fsdp",
              target="torchrun", program=("train.py",))
    assert got["argv"] == [executable("torchrun"), "--nnodes", "4", "--nproc-per-node", "8",
                           "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:29400",
                           "--rdzv-id", "seed-8b-32gpu-zero2", *TORCHRUN_RANK_LOGS, "train.py"]
    assert got["files"] == ["plan.json", "recipe.yaml", "run.json"]


def test_accelerate_fsdp_machine_fields(dry: DryRun, project: Callable[[str], Path]) -> None:
    project("accelerate")
    got = dry(SEED, "strategy=fsdp", environ=SLURM_NODE_1, target="accelerate",
              program=("train.py", "--bf16"))
    (config,) = [name for name in got["files"] if name.endswith(".yaml") and name != "recipe.yaml"]
    assert got["argv"] == [
        executable("accelerate"), "launch", "--config_file", f"{RUN}/{config}",
        "--num_machines", "4", "--machine_rank", "1", "--num_processes", "32",
        "--main_process_ip", "gpu07", "--main_process_port", "29500",
        "--log_dir", f"{RUN}/ranks", "--tee", "3", "train.py", "--bf16",
    ]
    assert got["env"] == {"DISTRECIPE_RUN_DIR": str(RUN), "DISTRECIPE_PLAN": f"{RUN}/plan.json",
                          "DISTRECIPE_METRICS": f"{RUN}/metrics.jsonl",
                          "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}


def test_accelerate_deepspeed_passes_the_config_absolute(dry: DryRun, project: Callable[[str], Path]) -> None:
    project("accelerate")
    got = dry(SEED, "launch.master_addr=10.0.0.1", target="accelerate-deepspeed", program=("train.py",))
    assert got["argv"][-3:] == ["--deepspeed_config_file", f"{RUN}/ds_config.json", "train.py"]
    assert "ds_config.json" in got["files"]
    assert "ACCELERATE_GRADIENT_ACCUMULATION_STEPS" not in got["env"], "the ds_config carries it"


def test_accelerate_refuses_cpu_ranks(dry: DryRun) -> None:
    with pytest.raises(LaunchError, match="Accelerate cannot run 2 CPU ranks"):
        dry(TINY, target="accelerate")


RL = ("rl.rollout_n=4", "rl.prompts_per_step=128", "strategy=fsdp")


def test_verl_overrides_then_user_overrides(dry: DryRun) -> None:
    got = dry(SEED, *RL, target="verl", environ={"RAY_ADDRESS": "10.0.0.1:6379"},
              program=("trainer.total_epochs=1",))
    plan = resolve(load_recipe(SEED, (*RL, "launch.backend=verl")))
    emitted = TARGETS["verl"](plan, EmitOptions()).files["verl_overrides.txt"].splitlines()
    assert got["argv"] == [sys.executable, "-m", "verl.trainer.main_ppo", *emitted,
                           "trainer.total_epochs=1"]
    assert "trainer.nnodes=4" in got["argv"] and "trainer.n_gpus_per_node=8" in got["argv"]


def test_verl_on_several_nodes_needs_ray(dry: DryRun) -> None:
    with pytest.raises(LaunchError, match="Ray cluster"):
        dry(SEED, *RL, target="verl")


def test_slurm_batch_script(capsys: pytest.CaptureFixture[str]) -> None:
    settings = ("stage=3", "launch.slurm.partition=gpu", "launch.slurm.account=proj",
                "launch.slurm.time=2-00:00:00", "launch.slurm.cpus_per_task=64", "launch.slurm.mem=512G")
    assert launch(recipe=str(SEED), overrides=settings, slurm=True, program=("train.py", "--a b"),
                  runs_root="/scratch/runs", environ={}) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=seed-8b-32gpu-zero2", "#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=64", "#SBATCH --mem=512G",
        f"#SBATCH --chdir={Path.cwd()}",
        "#SBATCH --output=/scratch/runs/seed-8b-32gpu-zero2-slurm%j.out",
        "#SBATCH --error=/scratch/runs/seed-8b-32gpu-zero2-slurm%j.err", "#SBATCH --open-mode=append",
        "#SBATCH --partition=gpu", "#SBATCH --account=proj", "#SBATCH --time=2-00:00:00",
    ]
    srun = lines[-1]
    assert srun.startswith(f"srun --ntasks-per-node=1 --cpus-per-task=64 --kill-on-bad-exit=1 "
                           f"{sys.executable} -m distrecipe launch ")
    assert f"{SEED} --set stage=3 --set launch.slurm.partition=gpu" in srun
    assert srun.endswith(f"--target deepspeed --runs-root /scratch/runs -- {Path.cwd()}/train.py '--a b'"), \
        "the script's path is absolute too"
    assert not any(line.startswith("echo") for line in lines)


def test_slurm_placeholders_fail_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch(recipe=str(TINY), overrides=("launch.slurm.account=default",), slurm=True,
                  environ={}) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "#SBATCH --partition=SET-launch.slurm.partition" in lines
    assert "#SBATCH --time=SET-launch.slurm.time" in lines
    assert not any("--account" in line for line in lines), "default: the cluster's own"
    assert "#SBATCH --cpus-per-task=SET-launch.slurm.cpus_per_task" in lines, "no CPU count is assumed"
    guard = lines[lines.index("set -euo pipefail") + 1]
    assert guard.startswith("echo 'distrecipe: set launch.slurm.cpus_per_task, launch.slurm.partition, "
                            "launch.slurm.time")
    assert guard.endswith("exit 2")


def test_slurm_settings_as_options(cli: Callable[..., Any]) -> None:
    result = cli("launch", TINY, "--slurm", "--partition", "debug", "--account", "default", "--time", "0:30:00",
                 "--cpus-per-task", "2")
    assert result.code == 0, result.err
    sbatch = [line for line in result.out.splitlines() if line.startswith("#SBATCH")]
    assert {"#SBATCH --partition=debug", "#SBATCH --time=0:30:00", "#SBATCH --cpus-per-task=2"} <= set(sbatch)
    assert not any("--account" in line for line in sbatch)
    bad = cli("launch", TINY, "--slurm", "--time", "soon")
    assert bad.code == 2 and "launch.slurm.time" in bad.err


def test_slurm_verl_starts_a_ray_cluster_first(capsys: pytest.CaptureFixture[str]) -> None:
    settings = (*RL, "launch.slurm.partition=default", "launch.slurm.account=default",
                "launch.slurm.time=default", "launch.slurm.cpus_per_task=64")
    assert launch(recipe=str(SEED), overrides=settings, target="verl", slurm=True, environ={}) == 0
    script = capsys.readouterr().out
    assert f"ray={executable('ray')}" in script.splitlines()
    assert 'srun --nodes=1 --ntasks=1 -w "$head" "$ray" start --head --node-ip-address="$head_ip" ' \
           "--port=6379 --num-cpus=64 --num-gpus=8 --block &" in script
    assert 'srun --nodes=1 --ntasks=1 -w "$node" "$ray" start --address="$head_ip:6379"' in script
    last = script.splitlines()[-1]
    assert last.startswith(f'RAY_ADDRESS="$head_ip:6379" srun --overlap --nodes=1 --ntasks=1 -w "$head" '
                           f"{sys.executable} -m distrecipe launch ")
    assert "--target verl" in last


def test_cli_dry_run(cli: Callable[..., Any], project: Callable[[str], Path]) -> None:
    project("torchrun")
    result = cli("launch", TINY, "--dry-run", "--run-dir", RUN, "--target", "torchrun", "--", "train.py", "-v")
    assert result.code == 0, result.err
    assert json.loads(result.out)["argv"][-2:] == ["train.py", "-v"]


def test_a_launcher_that_cannot_start_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("distrecipe.launch.launchers.torchrun.executable", lambda name: f"/nonexistent/{name}")
    with pytest.raises(LaunchError, match="cannot start /nonexistent/torchrun"):
        launch(recipe=str(TINY), run_dir=str(tmp_path / "run"), target="torchrun", environ={})
    assert json.loads((tmp_path / "run" / "run.json").read_text())["exit_code"] == 127


def test_the_launch_command_imports_no_engine() -> None:
    """Only rank processes import torch; distrecipe itself starts in a fraction of a second."""
    code = ("import sys, distrecipe.cli, distrecipe.commands.launch, distrecipe.launch.launchers; "
            "print([m for m in ('torch', 'deepspeed', 'accelerate', 'verl') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_multi_node_dry_run_outside_slurm_shows_placeholder_hosts(
        dry: DryRun, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's example: the seed's 4 nodes, from a laptop, nothing run."""
    got = dry(SEED, program=("train.py", "--lr", "1e-5"))
    argv = got["argv"]
    assert argv[argv.index("--hostfile") + 1] == str(RUN / "hostfile")
    assert argv[argv.index("--master_addr") + 1] == "<node-0>"
    assert argv[argv.index("--num_nodes") + 1] == "4" and argv[argv.index("--num_gpus") + 1] == "8"
    assert argv[-5:] == ["train.py", "--lr", "1e-5", "--deepspeed_config", str(RUN / "ds_config.json")]
    assert "hostfile" in got["files"]
    assert not RUN.exists()
