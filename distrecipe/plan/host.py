"""Host memory: what offload keeps on a node, against `cluster.cpu_memory`.

Offload moves the optimizer state (and with ZeRO-3 / FSDP2 the parameters) to the host,
pinned, once per rank: a node holds its ranks' share, so the check is per node
(`engine.EngineView.cpu` × GPUs per node, the engine view's terms, read from DeepSpeed's
and torch's sources). Where `cluster.cpu_memory` is not stated nothing is assumed: the
figure is said and the check is said not to be made (`note`). `plan`, `plan --search`,
the advice and `init` all ask here, so they cannot disagree.
"""

from __future__ import annotations

from distrecipe.plan.report import Estimate
from distrecipe.plan.units import gb

TB = 10**12


def size(n: float) -> str:
    """`gb`, in TB (10¹²) from 1 TB up, as hosts are sold."""
    return f"{n / TB:.2f}".rstrip("0").rstrip(".") + " TB" if n >= TB else gb(n)


def per_node(est: Estimate) -> float:
    """Bytes one node's ranks keep on the host (0 without offload)."""
    return sum(est.engine.cpu.values()) * est.plan.dims.gpus_per_node


def fits(est: Estimate) -> bool | None:
    """Whether the host holds it: None where nothing is offloaded or `cluster.cpu_memory`
    is not stated (unchecked), else the comparison."""
    cpu = est.plan.recipe.cluster.cpu_memory
    if not est.engine.cpu or cpu is None:
        return None
    return per_node(est) <= cpu


def allowed(est: Estimate) -> bool:
    """Not refused by host memory: fits, or unchecked."""
    return fits(est) is not False


def note(est: Estimate) -> str:
    """`host 2.68 TB per node of 2 TB` (with `: too much` when it does not fit), or `host
    2.68 TB per node (cluster.cpu_memory not set: not checked)`; empty without offload."""
    if not est.engine.cpu:
        return ""
    cpu = est.plan.recipe.cluster.cpu_memory
    said = f"host {size(per_node(est))} per node"
    if cpu is None:
        return f"{said} (cluster.cpu_memory not set: not checked)"
    return f"{said} of {size(cpu)}" + ("" if per_node(est) <= cpu else ": more than the node has")
