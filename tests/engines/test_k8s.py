"""engines.k8s: the operators' rules as facts (quantities, names, processes per node)."""

from __future__ import annotations

import pytest

from distrecipe.engines.k8s import (
    DNS1035,
    breaches,
    job_name,
    kind_of,
    nodes_and_processes,
    quantity_value,
    trainer_processes,
)


@pytest.mark.parametrize(("written", "value"), [
    (8, 8), ("8", 8), ("500m", 1), ("1500m", 2), ("2k", 2000), ("1Ki", 1024), ("256Gi", 256 * 2**30),
    ("1e3", 1000), (".5", 1), ("8x", None), ("", None), (True, None), (None, None), ("-1", None),
    ("1000m", 1), ("1E", 10**18), ("2Ei", 2**61),  # exact: no float rounding; "Ei" is exbi, not an exponent
    ("1e400", 2**63 - 1), ("100Ei", 2**63 - 1), ("0e999", 0),  # Value() stops at int64
])
def test_quantity_value_rounds_up_as_kubernetes_does(written: object, value: int | None) -> None:
    assert quantity_value(written) == value


@pytest.mark.parametrize(("name", "limit", "label"), [
    ("tiny-cpu", 63, "tiny-cpu"), ("8B_Run.v2", 63, "job-8b-run-v2"), ("Seed--8B", 63, "seed--8b"),
    ("a" * 70, 47, "a" * 47), ("x" * 46 + "-y", 47, "x" * 46), ("___", 63, "job"),
])
def test_job_name_is_a_dns1035_label_within_the_limit(name: str, limit: int, label: str) -> None:
    got = job_name(name, limit)
    assert got == label and DNS1035.fullmatch(got) and len(got) <= limit


def test_a_trainjob_that_sets_only_memory_runs_one_process_per_node() -> None:
    """The issue's trap: no numProcPerNode, no GPU in resourcesPerNode: the CPU count, at least 1."""
    assert trainer_processes({"resourcesPerNode": {"limits": {"memory": "64Gi"}}}) == (
        1, "no numProcPerNode and no GPU or CPU in resourcesPerNode")
    assert trainer_processes({"resourcesPerNode": {"requests": {"cpu": "4"}, "limits": {"cpu": 8}}})[0] == 4
    assert trainer_processes({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}) == (
        None, "auto: resourcesPerNode names a GPU")
    assert trainer_processes({"numProcPerNode": 8}) == (8, "numProcPerNode")
    [breach] = breaches("trainjob", {"spec": {"trainer": {"resourcesPerNode": {"limits": {"memory": "64Gi"}}}}})
    assert breach.code == "DR392" and "each node runs 1 process(es)" in breach.message


def test_kind_of_reads_the_group_and_kind() -> None:
    assert kind_of({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}) == "trainjob"
    assert kind_of({"apiVersion": "ray.io/v1", "kind": "RayJob"}) == "rayjob"
    assert kind_of({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}) == "pytorchjob"
    assert kind_of({"apiVersion": "batch/v1", "kind": "Job"}) is None
    assert kind_of({"apiVersion": "ray.io/v1", "kind": "RayCluster"}) is None and kind_of([]) is None


def test_nodes_and_processes() -> None:
    assert nodes_and_processes("trainjob", {"spec": {"trainer": {"numNodes": 4, "numProcPerNode": 8}}})[:2] == (4, 8)
    job = {"spec": {"nprocPerNode": "8", "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}
    assert nodes_and_processes("pytorchjob", job)[:2] == (4, 8)
    ray = {"spec": {"rayClusterSpec": {"workerGroupSpecs": [{"replicas": 2, "template": {"spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}]}}}
    assert nodes_and_processes("rayjob", ray)[:2] == (2, 8)


def test_rayjob_rules() -> None:
    spec = {"suspend": True, "ttlSecondsAfterFinished": 60, "rayClusterSpec": {"workerGroupSpecs": [
        {"groupName": "g", "replicas": 5, "minReplicas": 1, "maxReplicas": 2}, {"groupName": "h", "replicas": 1}]}}
    found = [(b.code, b.message) for b in breaches("rayjob", {"spec": spec})]
    assert [code for code, _ in found] == ["DR395", "DR395", "DR396", "DR394", "DR394"]
    assert "asks for 5 replicas outside [1, 2]: KubeRay starts 2" in found[3][1]
    assert "worker group h must set both minReplicas and maxReplicas" in found[4][1]
