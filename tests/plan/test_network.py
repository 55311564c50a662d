"""NCCL's cost model (`distrecipe/plan/network.py`) against values worked by hand from
`src/graph/tuning.cc`'s Simple-protocol figures: base 8.4 µs, a ring step 3.4 µs on NVLink
and 9.6 µs on the network, a tree level 28 µs on NVLink and 50 µs on the network."""

from __future__ import annotations

import pytest

from distrecipe.plan import network
from distrecipe.plan.network import Group

US = 1e-6
TWO_NODES = Group(ranks=16, nodes=2, bus=400e9, intra_hop=3.4 * US, network_hop=9.6 * US)
"""Two 8-GPU H100 nodes: the ring's bus is the node's 8 × 50 GB/s of NICs."""
THOUSAND = Group(ranks=1024, nodes=128, bus=50e9, intra_hop=3.4 * US, network_hop=9.6 * US)
"""128 nodes of 8 GPUs on 4 × 100 Gb/s NICs each (50 GB/s a node)."""


@pytest.mark.parametrize(("kind", "group", "expected"), [
    # 15 steps, 1 across the node boundary: 8.4 + 14 × 3.4 + 9.6
    ("all-gather", TWO_NODES, 65.6),
    ("reduce-scatter", TWO_NODES, 65.6),
    # 30 steps, 2 across: 8.4 + 28 × 3.4 + 2 × 9.6
    ("all-reduce", TWO_NODES, 122.8),
    # 2046 steps, 254 across: 8.4 + 1792 × 3.4 + 254 × 9.6
    ("all-reduce", THOUSAND, 8539.6),
    ("all-gather", Group(8, 1, 450e9, 3.4 * US, 9.6 * US), 8.4 + 7 * 3.4),
])
def test_ring_latency_by_hand(kind: str, group: Group, expected: float) -> None:
    assert network.ring_latency(kind, group) == pytest.approx(expected * US)


def test_ring_all_reduce_by_hand() -> None:
    """1 GB over two nodes: the latency × 1.9 (a large multi-node all-reduce) plus
    2 × 15/16 × 1 GB at 400 GB/s; the tree (0.9 × 400 capped at 110 GB/s, halved) loses."""
    cost = network.cost("all-reduce", 1e9, TWO_NODES)
    assert cost.algorithm == "ring"
    assert cost.latency == pytest.approx(122.8 * 1.9 * US)
    assert cost.seconds == pytest.approx(122.8 * 1.9 * US + 2 * 15 / 16 * 1e9 / 400e9)
    tree = network.tree(1e9, TWO_NODES)
    assert tree.latency == pytest.approx(2 * (7 * 28 + 1 * 50) * US)
    assert tree.seconds == pytest.approx(2 * (7 * 28 + 1 * 50) * US + 1e9 / (0.5 * 110e9))


def test_tree_wins_a_latency_bound_all_reduce_at_a_thousand_ranks() -> None:
    """64 MiB over 1,024 ranks: the ring pays 2,046 steps (×1.9), 16.2 ms, before its 2.7 ms
    of bytes; the tree pays 2 × (7 × 28 + log2 128 × 50) µs = 1.09 ms and 3.0 ms of bytes."""
    buffer = 64 * 2**20
    ring = network.ring("all-reduce", buffer, THOUSAND)
    assert ring.seconds == pytest.approx(8539.6 * 1.9 * US + 2 * 1023 / 1024 * buffer / 50e9)
    tree = network.tree(buffer, THOUSAND)
    assert tree.seconds == pytest.approx(1092 * US + buffer / (0.5 * 45e9))
    chosen = network.cost("all-reduce", buffer, THOUSAND)
    assert chosen.algorithm == "tree" and chosen.seconds == tree.seconds


@pytest.mark.parametrize("kind", ["all-gather", "reduce-scatter"])
def test_gathers_and_scatters_only_ring(kind: str) -> None:
    """NCCL offers the tree for all-reduce only: a gather at a thousand ranks stays a ring."""
    cost = network.cost(kind, 64 * 2**20, THOUSAND)
    assert cost.algorithm == "ring"
    assert cost.latency == pytest.approx((8.4 + 896 * 3.4 + 127 * 9.6) * US)


def test_one_rank_costs_nothing() -> None:
    assert network.cost("all-reduce", 1e9, Group(1, 1, 450e9, 3.4 * US, 9.6 * US)).seconds == 0.0
