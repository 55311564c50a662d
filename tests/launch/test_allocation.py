"""One reader of every platform's allocation, held to the recipe (launch/allocation.py).

Each platform's variables are the ones its own code sets (SkyPilot's task_codegen,
dstack's executor, Kubeflow Trainer's torch plugin, PyTorchJob's envvar.go, SLURM's
srun; see docs/platforms.md); a mismatch with the recipe is refused naming both
values and where each came from, and every launcher then runs the node's own ranks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distrecipe.commands.launch import launch
from distrecipe.errors import LaunchError
from distrecipe.launch.allocation import Allocation, read_allocation
from distrecipe.launch.rundir import default_run_dir
from distrecipe.launch.spec import executable

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"  # 4 nodes × 8 GPUs, its cluster at line 16
RUN = Path("/tmp/distrecipe-test-run")
TWO_CPU_NODES = ("cluster.nodes=2", "cluster.gpus_per_node=1")

SKYPILOT = {"SKYPILOT_NODE_RANK": "1", "SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.6\n10.0.0.7\n10.0.0.8\n",
            "SKYPILOT_NUM_NODES": "4", "SKYPILOT_NUM_GPUS_PER_NODE": "8",
            "SKYPILOT_TASK_ID": "sky-2026-08-01-12-00-00-000001_seed_1"}
DSTACK = {"DSTACK_NODE_RANK": "2", "DSTACK_NODES_NUM": "4", "DSTACK_MASTER_NODE_IP": "10.1.0.1",
          "DSTACK_NODES_IPS": "10.1.0.1\n10.1.0.2\n10.1.0.3\n10.1.0.4", "DSTACK_GPUS_PER_NODE": "8",
          "DSTACK_GPUS_NUM": "32", "DSTACK_RUN_ID": "e1f2"}
TRAINER = {"PET_NNODES": "4", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "3",
           "PET_MASTER_ADDR": "seed-node-0-0.seed", "PET_MASTER_PORT": "29500",
           "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
PYTORCHJOB = {"MASTER_ADDR": "seed-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "1",
              "PET_NNODES": "4", "PET_NPROC_PER_NODE": "auto", "PET_MASTER_ADDR": "seed-master-0",
              "PET_MASTER_PORT": "23456", "PYTHONUNBUFFERED": "1", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
SLURM_STEP = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[07-09,12]", "SLURM_NODEID": "1",
              "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4"}


@pytest.fixture
def dry(capsys: pytest.CaptureFixture[str]) -> Any:
    def call(recipe: Path, *overrides: str, environ: dict[str, str], **options: Any) -> dict[str, Any]:
        capsys.readouterr()
        assert launch(recipe=str(recipe), overrides=overrides, run_dir=str(RUN), dry_run=True,
                      environ=environ, **options) == 0
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        return result

    return call


@pytest.mark.parametrize(("env", "platform", "rank", "master", "port"), [
    (SKYPILOT, "skypilot", 1, "10.0.0.5", None),
    (DSTACK, "dstack", 2, "10.1.0.1", None),
    (TRAINER, "kubeflow-trainer", 3, "seed-node-0-0.seed", 29500),
    ({k: v for k, v in TRAINER.items() if k != "KUBERNETES_SERVICE_HOST"}, "torchrun", 3,
     "seed-node-0-0.seed", 29500),
    (PYTORCHJOB, "pytorchjob", 1, "seed-master-0", 23456),
    ({k: v for k, v in PYTORCHJOB.items() if not k.startswith("PET_MASTER")} | {"PET_NNODES": "4"},
     "pytorchjob", 1, "seed-master-0", 23456),
    (SLURM_STEP, "slurm", 1, "gpu07", None),
])
def test_every_platform_is_read(env: dict[str, str], platform: str, rank: int, master: str,
                                port: int | None) -> None:
    allocation = read_allocation(env)
    assert allocation is not None
    assert (allocation.platform, allocation.node_rank, allocation.nodes) == (platform, rank, 4)
    assert (allocation.master_addr, allocation.master_port, allocation.per_node) == (master, port, True)


def test_the_platform_variables_that_say_each_thing_are_recorded() -> None:
    allocation = read_allocation(SKYPILOT)
    assert allocation is not None
    assert allocation.hosts == ("10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8")
    assert allocation.gpus_per_node == 8 and allocation.job_key == "skypilot-sky-2026-08-01-12-00-00-000001_seed_1"
    assert allocation.record()["variables"] == {
        "node_rank": "SKYPILOT_NODE_RANK", "nodes": "SKYPILOT_NUM_NODES", "master_addr": "SKYPILOT_NODE_IPS",
        "gpus_per_node": "SKYPILOT_NUM_GPUS_PER_NODE"}


def test_no_platform_and_torchrun_workers_are_no_allocation() -> None:
    assert read_allocation({"PATH": "/bin", "MASTER_ADDR": "x", "RANK": "3"}) is None
    # Inside torchrun's own workers (PET_* inherited, RANK a process rank): not a node.
    assert read_allocation({**TRAINER, "RANK": "5", "TORCHELASTIC_RUN_ID": "none"}) is None


def test_skypilot_on_a_slurm_cluster_ranks_as_skypilot() -> None:
    allocation = read_allocation({**SLURM_STEP, **SKYPILOT})
    assert allocation is not None and allocation.platform == "skypilot"


@pytest.mark.parametrize(("env", "message"), [
    ({"SKYPILOT_NODE_RANK": "x", "SKYPILOT_NUM_NODES": "2"}, "SKYPILOT_NODE_RANK='x' is not a number"),
    ({"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_NODES": "3", "SKYPILOT_NODE_IPS": "a\nb"},
     "SKYPILOT_NODE_IPS lists 2 address(es) but SKYPILOT_NUM_NODES=3"),
    ({"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "10.0.0.1\nevil host\n"},
     "SKYPILOT_NODE_IPS holds 'evil host', which is not a host name or address"),
    ({"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_NODES": "0"}, "SKYPILOT_NUM_NODES=0 is not a node count"),
    ({"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "h\n" * 1_000_001}, "lists more than 1,000,000 hosts"),
    ({"SKYPILOT_NODE_RANK": "0"}, "SKYPILOT_NUM_NODES is not set"),
    ({"DSTACK_NODE_RANK": "0", "DSTACK_NODES_NUM": "2", "DSTACK_MASTER_NODE_IP": "a;b"},
     "DSTACK_MASTER_NODE_IP holds 'a;b'"),
    ({"PET_NNODES": "1:4", "PET_NODE_RANK": "0"}, "PET_NNODES='1:4' is an elastic range"),
    ({"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_PORT": "70000"}, "PET_MASTER_PORT=70000 is not a TCP port"),
    ({"PET_NNODES": "2", "PET_NODE_RANK": "\u0661"}, "PET_NODE_RANK='\u0661' is not a number"),
    ({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "x"}, "SLURM_NODEID='x' is not a number"),
    ({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_RESTART_COUNT": "9" * 5000},
     "SLURM_RESTART_COUNT='9999"),
    ({"SLURM_JOB_ID": "5/../x", "SLURM_JOB_NODELIST": "n1"}, "SLURM_JOB_ID='5/../x' is not a number"),
    ({"SLURM_JOB_ID": "5"}, "inside SLURM but SLURM_JOB_NODELIST is not set"),
])
def test_hostile_platform_variables_are_refused_by_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError) as caught:
        read_allocation(env)
    assert message in str(caught.value)


def test_the_slurm_batch_step_is_not_per_node() -> None:
    batch = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0", "SLURM_NTASKS": "2"}
    assert read_allocation(batch) == Allocation(
        platform="slurm", node_rank=0, nodes=2, hosts=("n1", "n2"), master_addr="n1", per_node=False,
        job_key="slurm5", sources={"node_rank": "SLURM_NODEID", "nodes": "SLURM_JOB_NODELIST",
                                   "master_addr": "SLURM_JOB_NODELIST", "gpus_per_node": "SLURM_GPUS_ON_NODE"})


@pytest.mark.parametrize(("extra", "key"), [
    ({}, "slurm5"),
    ({"SLURM_STEP_ID": "0"}, "slurm5"),
    ({"SLURM_STEP_ID": "2"}, "slurm5.2"),
    ({"SLURM_STEP_ID": "0", "SLURM_RESTART_COUNT": "0"}, "slurm5"),
    ({"SLURM_STEP_ID": "0", "SLURM_RESTART_COUNT": "1"}, "slurm5-restart1"),
    ({"SLURM_STEP_ID": "3", "SLURM_RESTART_COUNT": "2"}, "slurm5.3-restart2"),
])
def test_every_slurm_run_gets_its_own_run_directory(extra: dict[str, str], key: str, tmp_path: Path) -> None:
    """A requeued job keeps its id and a batch script may srun twice: neither may find
    the previous run's directory (RunDir refuses a used one, so the job would fail)."""
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "1", "SLURM_NTASKS": "2", **extra}
    allocation = read_allocation(env)
    assert allocation is not None and allocation.job_key == key
    assert default_run_dir(tmp_path, "job", job_key=allocation.job_key, node_rank=1) == (
        tmp_path / f"job-{key}" / "node1")


def test_a_platform_job_id_is_cleaned_for_the_run_directory() -> None:
    allocation = read_allocation({**SKYPILOT, "SKYPILOT_TASK_ID": "../../x y/" + "z" * 100})
    assert allocation is not None and allocation.job_key == "skypilot-x-y-" + "z" * 60


@pytest.mark.parametrize(("env", "message"), [
    ({**SKYPILOT, "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_IPS": "a\nb"},
     f"{SEED}:16:18: error: the recipe asks for 4 node(s) (cluster.nodes), SkyPilot gives 2 "
     "(SKYPILOT_NUM_NODES)"),
    ({**SKYPILOT, "SKYPILOT_NUM_GPUS_PER_NODE": "4"},
     f"{SEED}:16:36: error: the recipe runs 8 rank(s) per node (cluster.gpus_per_node), SkyPilot "
     "gives 4 GPUs per node (SKYPILOT_NUM_GPUS_PER_NODE)"),
    ({**TRAINER, "PET_NPROC_PER_NODE": "1"},
     f"{SEED}:16:36: error: the recipe runs 8 rank(s) per node (cluster.gpus_per_node), Kubeflow "
     "Trainer gives 1 processes per node (PET_NPROC_PER_NODE)"),
    ({**DSTACK, "DSTACK_NODES_NUM": "8", "DSTACK_NODES_IPS": ""},
     f"{SEED}:16:18: error: the recipe asks for 4 node(s) (cluster.nodes), dstack gives 8 "
     "(DSTACK_NODES_NUM)"),
    ({**SLURM_STEP, "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_NTASKS": "2"},
     f"{SEED}:16:18: error: the recipe asks for 4 node(s) (cluster.nodes), SLURM gives 2 "
     "(SLURM_JOB_NODELIST)"),
    ({**SLURM_STEP, "SLURM_GPUS_ON_NODE": "4"}, "SLURM gives 4 GPUs per node (SLURM_GPUS_ON_NODE)"),
])
def test_an_allocation_the_recipe_does_not_fit_is_refused_naming_both(
        cli: Any, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = cli("launch", SEED, "--dry-run")
    assert result.code == 2 and result.err.strip().endswith(message), result.err


def test_a_default_node_count_is_named_as_such(cli: Any, write: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SKYPILOT, "SKYPILOT_NODE_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    recipe = write("r.yaml", TINY.read_text().replace("nodes: 1, ", ""))
    result = cli("launch", recipe, "--dry-run")
    assert (result.code, result.err) == (
        2, f"{recipe}:7:10: error: the recipe asks for 1 node(s) (cluster.nodes: default), SkyPilot gives 4 (SKYPILOT_NUM_NODES)\n")


def test_cpu_ranks_are_not_held_to_the_platform_gpu_count(dry: Any) -> None:
    env = {"SKYPILOT_NODE_RANK": "1", "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.2", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NUM_GPUS_PER_NODE": "0"}
    assert dry(TINY, *TWO_CPU_NODES, environ=env)["argv"][:6] == [
        executable("deepspeed"), "--hostfile", f"{RUN}/hostfile", "--no_ssh", "--node_rank", "1"]


def test_deepspeed_on_a_platform_needs_no_hostfile_and_no_ssh(dry: Any) -> None:
    """The issue's refusal ("deepspeed needs a hostfile for 4 nodes"), gone: every node runs
    its own ranks (`--no_ssh --node_rank`), and the hostfile distrecipe writes only tells
    DeepSpeed's runner the world."""
    got = dry(SEED, environ=SKYPILOT)
    assert got["argv"][:14] == [
        executable("deepspeed"), "--hostfile", f"{RUN}/hostfile", "--no_ssh", "--node_rank", "1",
        "--num_nodes", "4", "--num_gpus", "8", "--master_addr", "10.0.0.5", "--master_port", "29500"]
    assert "hostfile" in got["files"]


def test_deepspeed_without_hosts_labels_the_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    """Kubeflow names only node 0: the hostfile's names are labels (no ssh reaches them),
    node0..node3 in rank order, as DeepSpeed's runner ranks them."""
    from distrecipe.launch.launchers.deepspeed import node_hosts
    from distrecipe.launch.prepare import build_request
    from distrecipe.launch.spec import Program
    from distrecipe.translator.load import load_recipe
    from distrecipe.translator.resolve import resolve

    plan = resolve(load_recipe(SEED))
    request = build_request(plan, program=Program(target="t.py"), run_dir=RUN, configs={}, node_rank=None,
                            environ=TRAINER, dry_run=False, say=print)
    assert node_hosts(request) == ("node0", "node1", "node2", "node3")
    assert (request.node_rank, request.master_addr, request.per_node) == (3, "seed-node-0-0.seed", True)


def test_torchrun_gets_a_static_rank_from_the_platform(dry: Any) -> None:
    got = dry(SEED, "strategy=fsdp", target="torchrun", environ=TRAINER)
    assert got["argv"][:12] == [
        executable("torchrun"), "--nnodes", "4", "--nproc-per-node", "8", "--rdzv-backend", "static",
        "--node-rank", "3", "--master-addr", "seed-node-0-0.seed", "--master-port"]
    assert got["argv"][12] == "29500"


def test_the_platform_port_serves_unless_the_recipe_states_one(dry: Any) -> None:
    assert dry(SEED, "strategy=fsdp", target="torchrun", environ=PYTORCHJOB)["argv"][12] == "23456"
    stated = dry(SEED, "strategy=fsdp", "launch.master_port=29555", target="torchrun", environ=PYTORCHJOB)
    assert stated["argv"][12] == "29555"


def test_an_explicit_node_rank_is_a_static_rank_too(dry: Any) -> None:
    got = dry(SEED, "strategy=fsdp", "launch.master_addr=10.9.0.1", target="torchrun", environ={},
              node_rank=2)
    assert got["argv"][5:12] == ["--rdzv-backend", "static", "--node-rank", "2", "--master-addr",
                                 "10.9.0.1", "--master-port"]


def test_torchrun_without_any_rank_keeps_c10d(dry: Any) -> None:
    got = dry(SEED, "strategy=fsdp", "launch.master_addr=10.9.0.1", target="torchrun", environ={})
    assert got["argv"][5:7] == ["--rdzv-backend", "c10d"]


def test_accelerate_gets_the_machine_rank(dry: Any) -> None:
    got = dry(SEED, "strategy=fsdp", target="accelerate", environ=DSTACK)
    argv = got["argv"]
    assert argv[argv.index("--machine_rank") + 1] == "2"
    assert argv[argv.index("--main_process_ip") + 1] == "10.1.0.1"


def test_a_rank_outside_the_recipe_names_its_variable(dry: Any) -> None:
    with pytest.raises(LaunchError, match=r"node rank 4 \(SKYPILOT_NODE_RANK\) is outside the recipe's 4 node"):
        dry(SEED, environ={**SKYPILOT, "SKYPILOT_NODE_RANK": "4"})


@pytest.mark.parametrize("target", ["deepspeed", "torchrun"])
def test_inside_slurm_the_allocations_first_node_is_the_master_whatever_the_recipe_says(
        capsys: pytest.CaptureFixture[str], target: str) -> None:
    """A recipe written for one cluster (`launch.master_addr: 10.9.0.1`) run in a SLURM
    allocation: node rank 0 runs on the allocation's first node, so the rendezvous is
    there, and the recipe's address is named as overruled."""
    capsys.readouterr()
    assert launch(recipe=str(SEED), overrides=("strategy=fsdp", "launch.master_addr=10.9.0.1"), target=target,
                  run_dir=str(RUN), dry_run=True, environ=SLURM_STEP) == 0
    out, err = capsys.readouterr()
    argv = json.loads(out)["argv"]
    flag = "--master_addr" if target == "deepspeed" else "--master-addr"
    assert argv[argv.index(flag) + 1] == "gpu07"
    assert ("distrecipe: launch.master_addr 10.9.0.1 (--set launch.master_addr=10.9.0.1) is not this SLURM "
            "allocation's first node gpu07 (SLURM_JOB_NODELIST), where node rank 0 runs: the rendezvous is "
            "on gpu07") in err
    assert launch(recipe=str(SEED), overrides=("strategy=fsdp", "launch.master_addr=gpu07"), target=target,
                  run_dir=str(RUN), dry_run=True, environ=SLURM_STEP) == 0
    assert "launch.master_addr" not in capsys.readouterr().err, "the same node: nothing to say"
