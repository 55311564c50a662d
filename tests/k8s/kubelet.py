"""What a node's container gets: the operators' injected variables, and the kubelet's `$(VAR)`.

The kubelet expands `$(NAME)` in a container's `command` and `args` from the container's
environment, `$$` standing for `$`, and leaves a reference to an undefined variable as
written (`k8s.io/kubernetes/third_party/forked/golang/expansion/expand.go`). The
variables are the ones each operator injects into its node containers, with node 0's
address on loopback, since both "nodes" are this machine.
"""

from __future__ import annotations

from collections.abc import Mapping


def expand(word: str, env: Mapping[str, str]) -> str:
    """`word` as the kubelet passes it to the container."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$" and i + 1 < len(word):
            if word[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if word[i + 1] == "(" and (end := word.find(")", i + 2)) != -1:
                name = word[i + 2:end]
                out.append(env[name] if name in env else word[i:end + 1])
                i = end + 1
                continue
        out.append(word[i])
        i += 1
    return "".join(out)


def trainjob_env(*, nodes: int, processes: int, rank: int, port: int) -> dict[str, str]:
    """Kubeflow Trainer's torch plugin (`torch.go:145-176`); PET_MASTER_ADDR is
    `<job>-node-0-0.<job>` in a cluster."""
    return {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(processes), "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)}


def pytorchjob_env(*, nodes: int, processes: int, rank: int, port: int) -> dict[str, str]:
    """The training-operator's PyTorchJob controller (`envvar.go:43-130`, `master.go`): the
    `PET_*` set plus `MASTER_*`, `WORLD_SIZE` (replicas × nprocPerNode) and `RANK` (the node's)."""
    return {**trainjob_env(nodes=nodes, processes=processes, rank=rank, port=port), "PYTHONUNBUFFERED": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(nodes * processes),
            "RANK": str(rank)}
