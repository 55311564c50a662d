"""GPUs as numbers: dense 16-bit peak and the bandwidth one GPU gets to its peers.

Peaks are the vendors' dense (no sparsity) bf16 tensor-core figures; bandwidths are
per GPU and per direction, which is what a ring collective's per-rank bytes move
over: NVLink within a node, the node's network ports (one NIC per GPU on the
machines these were sold in) between nodes. A recipe overrides any of them with
`cluster.peak_tflops`, `cluster.intra_node_bandwidth`, `cluster.inter_node_bandwidth`.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.recipe import Gpu, Plan

GB_S = 10**9
"""Bandwidths are in GB/s (10⁹ bytes per second)."""


@dataclass(frozen=True, slots=True)
class Hardware:
    peak_tflops: float
    """Dense bf16 tensor-core peak, TFLOPS."""
    intra: float
    """Bytes per second one GPU sends to its node's peers (per direction)."""
    inter: float
    """Bytes per second one GPU sends to other nodes (per direction)."""
    name: str
    """Where the numbers came from, for the report: the GPU, and what was overridden."""
    efficiency: float
    """Achieved fraction of the peak in the matrix multiplies (recompute included)."""


A100_EFFICIENCY = 0.68
"""Calibrated: the median of measured ÷ predicted throughput over the A100 rows of
torchtitan and llm-foundry in `tests/corpus/gpu/published.csv`, times the trial 0.60."""
HOPPER_EFFICIENCY = 0.48
"""Calibrated the same way on the H100 rows (torchtitan, llm-foundry). Hopper reaches a
smaller share of its peak than Ampere in the same code; the GPUs with no bf16 row
(H200's are float8 or held out, B200, L40S, L4, A10G, MI300X) take this figure too."""


GPUS: dict[Gpu, Hardware] = {
    # NVLink 3: 600 GB/s both ways; 8 × 200 Gb/s HDR per DGX A100.
    "a100-40gb": Hardware(312, 300 * GB_S, 25 * GB_S, "A100 40GB", A100_EFFICIENCY),
    "a100-80gb": Hardware(312, 300 * GB_S, 25 * GB_S, "A100 80GB", A100_EFFICIENCY),
    # NVLink 4: 900 GB/s both ways; 8 × 400 Gb/s NDR per DGX H100 / H200.
    "h100": Hardware(989, 450 * GB_S, 50 * GB_S, "H100 SXM", HOPPER_EFFICIENCY),
    "h100-pcie": Hardware(756, 64 * GB_S, 25 * GB_S, "H100 PCIe (PCIe 5, no NVLink)", HOPPER_EFFICIENCY),
    "h200": Hardware(989, 450 * GB_S, 50 * GB_S, "H200 SXM", HOPPER_EFFICIENCY),
    "gh200": Hardware(989, 450 * GB_S, 50 * GB_S, "GH200", HOPPER_EFFICIENCY),
    # NVLink 5: 1.8 TB/s both ways; 8 × 400 Gb/s per DGX B200.
    "b200": Hardware(2250, 900 * GB_S, 50 * GB_S, "B200", HOPPER_EFFICIENCY),
    "l40s": Hardware(362, 32 * GB_S, 25 * GB_S, "L40S (PCIe 4)", HOPPER_EFFICIENCY),
    "l4": Hardware(121, 32 * GB_S, 12.5 * GB_S, "L4 (PCIe 4)", HOPPER_EFFICIENCY),
    "a10g": Hardware(70, 32 * GB_S, 12.5 * GB_S, "A10G (PCIe 4)", HOPPER_EFFICIENCY),
    # Infinity Fabric: 7 links × 64 GB/s per direction to the other 7 GPUs.
    "mi300x": Hardware(1307, 448 * GB_S, 50 * GB_S, "MI300X", HOPPER_EFFICIENCY),
}
"""`cluster.gpu` → its numbers. Every name of `recipe.Gpu` has a row (tested)."""


def hardware(plan: Plan) -> Hardware | None:
    """The plan's GPU with the recipe's overrides, or None when no peak is known."""
    base = GPUS.get(plan.gpu) if plan.gpu is not None else None
    if base is None and plan.peak_tflops is None:
        return None
    overrides = [key for key, value in (("peak_tflops", plan.peak_tflops),
                                        ("intra_node_bandwidth", plan.intra_node_bandwidth),
                                        ("inter_node_bandwidth", plan.inter_node_bandwidth))
                 if value is not None]
    fallback = GPUS["h100"]  # bandwidths and efficiency when only a peak is given
    name = (base.name if base else f"cluster.peak_tflops, {fallback.name} otherwise") + (
        f" (cluster.{', cluster.'.join(overrides)})" if base and overrides else "")
    return Hardware(
        peak_tflops=plan.peak_tflops or (base or fallback).peak_tflops,
        intra=(plan.intra_node_bandwidth or 0) * GB_S or (base or fallback).intra,
        inter=(plan.inter_node_bandwidth or 0) * GB_S or (base or fallback).inter,
        name=name,
        efficiency=(base or fallback).efficiency,
    )
