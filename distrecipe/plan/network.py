"""What one NCCL collective costs: a bandwidth term and a latency term, ring or tree.

NCCL prices every (algorithm, protocol) pair as latency + bytes / algorithm bandwidth and
runs the cheapest (`src/graph/tuning.cc`, `ncclTopoTuneModel` and `ncclTopoGetAlgoTime`,
NVIDIA/nccl @01afd20a; docs/plan.md, "Scale and the network"). Training's collectives are
megabytes to gigabytes, where the Simple protocol wins, so only its figures are kept:

* **Ring**: a reduce-scatter or all-gather over N ranks takes N − 1 steps, an all-reduce
  2(N − 1); of those, the steps that cross a node boundary (n − 1, or 2(n − 1), over n
  nodes) pay the network's per-hop latency, the rest NVLink's (or PCIe's); plus a base
  latency per call. Its bytes are the ring's (N − 1)/N of the buffer per pass
  (`traffic.ring`), moved at the bus bandwidth. A multi-node ring all-reduce of a large
  buffer pays its latency 1.9 times ("plateau effect of ring").
* **Tree** (all-reduce only; NCCL's double binary tree across nodes, a chain inside
  them): 2 × ((N/n − 1) intra-node hops + log2 n network hops); its bandwidth is half the
  bus bandwidth, itself at most 0.9 × the ring's and capped (80 GB/s past two nodes,
  110 below).

The ring's latency grows with N and the tree's with log2 n, so at a thousand ranks a
latency-bound all-reduce goes to the tree, as NCCL's own choice does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distrecipe.engines.gpus import NETWORK_LATENCY

BASE_LATENCY = 8.4e-6
"""Seconds a ring Simple collective costs before any hop (`baseLat[Ring][Simple]`)."""
NVLINK_HOP = 3.4e-6
"""Seconds per ring step over NVLink (`hwLat[NVLINK][Ring][Simple]`)."""
PCIE_HOP = 5.7e-6
"""Seconds per ring step over PCIe (`hwLat[PCI][Ring][Simple]`)."""
NETWORK_HOP = NETWORK_LATENCY * 1e-6
"""Seconds per ring step across nodes (`hwLat[NET][Ring][Simple]`, `engines.gpus.NETWORK_LATENCY`):
the default `cluster.network_latency`."""
TREE_HOPS = {"nvlink": 28e-6, "pcie": 28e-6, "network": 50e-6}
"""Seconds per tree level with the Simple protocol (`hwLat[*][Tree][Simple]`): a 256 kB
chunk's latency; the network's scales with `cluster.network_latency`."""
RING_PLATEAU = 1.9
"""A multi-node ring all-reduce of at least N/16 × 64 KiB pays its latency this many times."""
TREE_BUS_SHARE = 0.9
TREE_BUS_CAP = {True: 80e9, False: 110e9}
"""The tree's bus bandwidth: 0.9 × the ring's, at most 80 GB/s past two nodes (110 below)."""


@dataclass(frozen=True, slots=True)
class Group:
    """Where a collective's ranks sit."""

    ranks: int
    nodes: int
    """Nodes the group spans (1: all on NVLink)."""
    bus: float
    """Bytes per second of the ring's bus bandwidth (`steptime.ring_bandwidth` across nodes)."""
    intra_hop: float
    """Seconds per step inside a node (NVLink or PCIe)."""
    network_hop: float
    """Seconds per step across nodes (`cluster.network_latency`)."""


def ring_latency(kind: str, group: Group) -> float:
    """Seconds of latency in one ring collective (`kind`: `all-reduce`, `reduce-scatter`,
    `all-gather`), before the plateau factor."""
    n, nodes = group.ranks, group.nodes
    if n <= 1:
        return 0.0
    passes = 2 if kind == "all-reduce" else 1
    steps, network_steps = passes * (n - 1), passes * (nodes - 1)
    return BASE_LATENCY + (steps - network_steps) * group.intra_hop + network_steps * group.network_hop


@dataclass(frozen=True, slots=True)
class Cost:
    """One call's seconds, of which latency, and the algorithm NCCL would pick."""

    seconds: float
    latency: float
    algorithm: str


def ring(kind: str, buffer: float, group: Group) -> Cost:
    """One ring collective over a `buffer` of bytes (the whole tensor, not a rank's share)."""
    n = group.ranks
    if n <= 1:
        return Cost(0.0, 0.0, "ring")
    passes = 2 if kind == "all-reduce" else 1
    latency = ring_latency(kind, group)
    if kind == "all-reduce" and group.nodes > 1 and buffer >= n / 16 * 65536:
        latency *= RING_PLATEAU
    return Cost(latency + passes * (n - 1) / n * buffer / group.bus, latency, "ring")


def tree(buffer: float, group: Group) -> Cost:
    """One double-binary-tree all-reduce over `buffer` bytes."""
    n, nodes = group.ranks, group.nodes
    if n <= 1:
        return Cost(0.0, 0.0, "tree")
    tree_hop = TREE_HOPS["network"] * group.network_hop / NETWORK_HOP
    intra = TREE_HOPS["nvlink"] if group.intra_hop <= NVLINK_HOP else TREE_HOPS["pcie"]
    latency = 2 * ((n // nodes - 1) * intra + int(math.log2(nodes)) * tree_hop)
    bus = min(TREE_BUS_SHARE * group.bus, TREE_BUS_CAP[nodes > 2])
    return Cost(latency + buffer / (0.5 * bus), latency, "tree")


def cost(kind: str, buffer: float, group: Group) -> Cost:
    """The cheaper of NCCL's algorithms for one call: the tree is offered for an all-reduce
    across nodes only (inside one node NCCL's tree is a chain, and reduce-scatter and
    all-gather have only the ring)."""
    by_ring = ring(kind, buffer, group)
    if kind != "all-reduce" or group.nodes <= 1:
        return by_ring
    by_tree = tree(buffer, group)
    return by_tree if by_tree.seconds < by_ring.seconds else by_ring
