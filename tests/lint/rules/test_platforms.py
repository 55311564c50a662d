"""lint over platforms' job files: the operators' rules (DR390-DR396) and the job's world (DR397).

The rules' own examples run in tests/test_rule_docs.py; here: every manifest
`launch --k8s` writes is clean, a job file gives the ds_config it names its world,
and each kind of command (a `sh -c` script, a list, an entrypoint, SkyPilot's `run`)
is read with its positions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.commands.launch import launch
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests.conftest import RECIPES, ROOT, Result

RL = ROOT / "tests" / "k8s" / "rl-verl-2node.yaml"
TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: sft}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    numProcPerNode: 8
    command: [torchrun, train.py, --deepspeed, ds.json]
"""
DS = '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}\n'


def findings(*paths: Path) -> list[str]:
    report = lint(list(paths), config=LintConfig())
    assert not report.unusable, report.unusable
    return [f"{f.where.line}:{f.where.col} {f.code} {f.message}" for f in report.findings if f.where]


WRITTEN = [*((recipe, kind) for recipe in sorted(RECIPES.glob("*.yaml")) for kind in ("trainjob", "pytorchjob")),
           (RL, "rayjob")]


@pytest.mark.parametrize(("recipe", "kind"), WRITTEN, ids=[f"{r.stem}-{k}" for r, k in WRITTEN])
def test_what_launch_k8s_writes_lints_clean(recipe: Path, kind: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # where the node command's recipe path points
    capsys.readouterr()
    assert launch(recipe=str(recipe.relative_to(ROOT)), k8s=True, overrides=(f"launch.k8s.kind={kind}",),
                  environ={}, allow_no_fit=True) == 0  # the seed's DDP and ZeRO-1 do not fit 80 GB
    job = tmp_path / "job.yaml"
    job.write_text(capsys.readouterr().out, encoding="utf-8")
    assert findings(job) == []


def test_a_job_gives_the_ds_config_it_names_its_world(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(TRAINJOB, encoding="utf-8")
    (tmp_path / "ds.json").write_text(DS, encoding="utf-8")
    [finding] = findings(tmp_path)
    assert "DR101 train_batch_size 32 != train_micro_batch_size_per_gpu 4 × gradient_accumulation_steps 1 × DP 16" in finding
    assert "(world 16 from numNodes × numProcPerNode in job.yaml:9)" in finding
    (tmp_path / "job.yaml").write_text(TRAINJOB.replace("numNodes: 2", "numNodes: 1"), encoding="utf-8")
    assert findings(tmp_path) == [], "1 node × 8 ranks × micro 4 = 32"


def test_a_sh_c_script_is_read_where_it_is_written(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(TRAINJOB.replace("    command: [torchrun, train.py, --deepspeed, ds.json]\n",
                                    "    command:\n    - /bin/bash\n    - -lc\n    - |\n      cd /app\n"
                                    "      torchrun --nnodes=1 --nproc_per_node=8 train.py\n"), encoding="utf-8")
    assert findings(job) == ["14:7 DR397 torchrun starts 8 rank(s) (--nnodes 1 × --nproc_per_node 8); "
                             "the TrainJob runs 2 node(s) × 8 (numNodes × numProcPerNode)"]


def test_a_memory_only_trainjob_runs_one_process_per_node(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(TRAINJOB.replace("    numProcPerNode: 8\n", "    resourcesPerNode: {limits: {memory: 64Gi}}\n"),
                   encoding="utf-8")
    assert findings(job) == ["8:23 DR392 without numProcPerNode, each node runs 1 process(es) (no numProcPerNode "
                             "and no GPU or CPU in resourcesPerNode), whatever GPUs the runtime's nodes have; "
                             "state numProcPerNode"]


def test_a_cpu_trainjob_that_states_its_cpus_runs_that_many_processes_unreported(tmp_path: Path) -> None:
    """Kubeflow Trainer's own examples (tests/corpus/unseen: 02-runtime-patches) run CPU jobs
    this way: the torch plugin starts one process per requested CPU, as the file asks."""
    job = tmp_path / "job.yaml"
    job.write_text(TRAINJOB.replace("    numProcPerNode: 8\n", "    resourcesPerNode: {requests: {cpu: '2'}}\n"),
                   encoding="utf-8")
    assert findings(job) == []


def test_a_rayjob_entrypoint_that_asks_verl_for_more_gpus_than_the_cluster_has(
        cli: Callable[..., Result], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    written = cli("launch", RL, "--k8s").out
    job = tmp_path / "rayjob.yaml"
    job.write_text(written.replace("trainer.nnodes=2", "trainer.nnodes=3"), encoding="utf-8")
    [finding] = findings(job)
    assert "DR397 verl asks for trainer.nnodes 3 × trainer.n_gpus_per_node 8 = 24 GPUs; the RayJob has 16 " \
           "(the head's 0, workerGroupSpecs[0]: 2 × 8)" in finding
    assert 'verl stops with "Total available GPUs 16 is less than total desired GPUs 24"' in finding


def test_a_skypilot_task_and_the_recipe_it_launches(tmp_path: Path) -> None:
    (tmp_path / "recipe.yaml").write_text((RECIPES / "tiny-cpu.yaml").read_text(), encoding="utf-8")
    task = tmp_path / "task.yaml"
    task.write_text("num_nodes: 2\nresources:\n  accelerators: {H100: 8}\nrun: |\n"
                    "  python3 -m distrecipe launch recipe.yaml --target torchrun\n", encoding="utf-8")
    assert findings(task) == ["5:32 DR397 recipe.yaml asks for cluster.nodes 1 × gpus_per_node 2; "
                              "the SkyPilot task runs 2 node(s) × 8 (num_nodes × resources.accelerators)"]


def test_job_files_are_not_imported_and_diff_key_by_key(cli: Callable[..., Result], tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(TRAINJOB, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(TRAINJOB.replace("numNodes: 2", "numNodes: 4"), encoding="utf-8")
    refused = cli("import", tmp_path / "a.yaml")
    assert refused.code == 2 and "a trainjob file is a platform's job, not a training config" in refused.err
    compared = cli("diff", tmp_path / "a.yaml", tmp_path / "b.yaml")
    assert compared.code == 0 and "spec.trainer.numNodes: 2 → 4" in compared.out
    assert "a platform's job file trains no model of its own" in compared.out


PYTORCHJOB_GPUS = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: llama-sft
  namespace: kubeflow
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: ghcr.io/org/llm-train:1.4
            command: [torchrun, --nnodes, "2", --nproc_per_node, "8", train.py, --deepspeed, ds.json]
            resources:
              limits:{gpus}
                memory: 512Gi
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: ghcr.io/org/llm-train:1.4
            command: [torchrun, --nnodes, "2", --nproc_per_node, "8", train.py, --deepspeed, ds.json]
            resources:
              limits:
                nvidia.com/gpu: 8
                memory: 512Gi
"""
"""A two-node PyTorchJob of the training-operator's layout, the Master's GPU request left out
(or set to 0) by the edit that raised its memory."""


def test_a_pytorchjob_pod_without_gpus_for_the_ranks_torchrun_starts(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1}\n')
    job = tmp_path / "job.yaml"
    job.write_text(PYTORCHJOB_GPUS.format(gpus=""), encoding="utf-8")
    assert findings(job) == [
        "17:13 DR398 the Master's pytorch container requests no nvidia.com/gpu (none in resources), yet torchrun "
        "starts 8 rank(s) on its node (--nproc_per_node 8): Kubernetes gives the pod no GPU, so every rank fails at "
        "its first CUDA call; request nvidia.com/gpu: 8"]
    job.write_text(PYTORCHJOB_GPUS.format(gpus="\n                nvidia.com/gpu: 8"), encoding="utf-8")
    assert findings(job) == []
    job.write_text(PYTORCHJOB_GPUS.format(gpus="\n                nvidia.com/gpu: 0"), encoding="utf-8")
    assert [f.split(" (")[0] for f in findings(job)] == [
        "19:17 DR398 the Master's pytorch container requests no nvidia.com/gpu"]


@pytest.mark.slow  # the Kubernetes judges
def test_the_api_server_and_the_operator_take_the_pytorchjob_without_gpus() -> None:
    """What lint reports is no refusal of `kubectl apply`: the CRD, the webhook and the pod
    schema all take the job, and the pod the operator makes asks for no GPU."""
    import yaml

    pytest.importorskip("kubernetes_validate", reason="the test extra's kubernetes-validate")
    pytest.importorskip("cel_expr_python", reason="the test extra's cel-expr-python (Python >= 3.11)")
    from tests.k8s import judge

    job = yaml.safe_load(PYTORCHJOB_GPUS.format(gpus=""))
    assert judge.judge(job) == []
    defaulted = judge.apply_defaults(judge.openapi("pytorchjob"), job)
    [master] = judge.pod_templates(defaulted)["pytorchReplicaSpecs.Master.template"]["spec"]["containers"]
    assert "nvidia.com/gpu" not in master["resources"]["limits"]
