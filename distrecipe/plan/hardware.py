"""GPUs as numbers: dense 16-bit peak and the bandwidth one GPU gets to its peers.

Peaks are the vendors' dense (no sparsity) bf16 tensor-core figures; bandwidths are
per GPU and per direction, which is what a ring collective's per-rank bytes move
over: NVLink within a node, the node's network ports (one NIC per GPU on the
machines these were sold in) between nodes. A recipe overrides any of them with
`cluster.peak_tflops`, `cluster.intra_node_bandwidth`, `cluster.inter_node_bandwidth`.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.job import Plan
from distrecipe.recipe import Gpu

GB_S = 10**9
"""Bandwidths are in GB/s (10⁹ bytes per second)."""


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The achieved fraction of a GPU's peak in the matrix multiplies, and whose it is."""

    value: float
    basis: str
    """Where the figure comes from, as `plan` prints it: the rows it was fitted on, or
    the GPU it is borrowed from and why."""
    borrowed: bool
    """True when no published bf16 run on this GPU calibrated it."""


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
    achieved: Efficiency
    """The calibrated (or borrowed) efficiency and its basis."""

    @property
    def efficiency(self) -> float:
        """Achieved fraction of the peak in the matrix multiplies (recompute included)."""
        return self.achieved.value


# Each efficiency is fitted as `tests/test_plan_steptime.py` checks: the figure e for which
# the median of measured ÷ predicted tokens/s/GPU over the GPU's calibration rows in
# `tests/corpus/gpu/published.csv` is 1 (bf16 rows only), rounded to two places. The test
# names the calibration rows and reports the held-out ones apart.
A100 = Efficiency(0.68, "fitted on 28 published A100 runs (torchtitan, llm-foundry)", False)
H100 = Efficiency(0.45, "fitted on 27 published H100 runs (torchtitan, llm-foundry)", False)
H200 = Efficiency(0.48, "fitted on 14 published H200 runs (KempnerForge MFU scaling)", False)


def borrowed(reason: str) -> Efficiency:
    """H100's figure for a GPU no published bf16 run calibrates. A guess, and `plan` says
    so: H100 has the most calibration rows, and its figure is the lower of the two
    measured generations', so a borrowed estimate leans slow rather than fast."""
    return Efficiency(H100.value, f"H100's; {reason}", True)


GPUS: dict[Gpu, Hardware] = {
    # Peaks: vendor datasheets, dense (half the "with sparsity" figure), bf16 tensor core.
    # A100 SXM/PCIe 312; H100 SXM 989 and PCIe 756 (1,979 / 1,513 with sparsity); H200
    # 989 (same GH100 silicon and clocks as H100 SXM); GH200's Hopper GPU 989; HGX B200
    # 2,250 at 1,000 W (4.5 PFLOPS with sparsity); L40S 362.05 (733 with sparsity); L4 121
    # (242 with sparsity); MI300X 1,307.4 (its dense fp8 is 2,614.9). A10G 70 is unverified:
    # no datasheet for AWS's A10 variant was found in the sources read.
    # NVLink 3: 600 GB/s both ways; 8 × 200 Gb/s HDR per DGX A100.
    "a100-40gb": Hardware(312, 300 * GB_S, 25 * GB_S, "A100 40GB", A100),
    "a100-80gb": Hardware(312, 300 * GB_S, 25 * GB_S, "A100 80GB", A100),
    # NVLink 4: 900 GB/s both ways; 8 × 400 Gb/s NDR per DGX H100 / H200.
    "h100": Hardware(989, 450 * GB_S, 50 * GB_S, "H100 SXM", H100),
    "h100-pcie": Hardware(756, 64 * GB_S, 25 * GB_S, "H100 PCIe (PCIe 5, no NVLink)",
                          borrowed("no published bf16 run on H100 PCIe")),
    "h200": Hardware(989, 450 * GB_S, 50 * GB_S, "H200 SXM", H200),
    "gh200": Hardware(989, 450 * GB_S, 50 * GB_S, "GH200", borrowed("no published bf16 run on GH200")),
    # NVLink 5: 1.8 TB/s both ways; 8 × 400 Gb/s per DGX B200.
    "b200": Hardware(2250, 900 * GB_S, 50 * GB_S, "B200",
                     borrowed("no published bf16 run on B200 (Megatron-Bridge's are FP8)")),
    "l40s": Hardware(362.05, 32 * GB_S, 25 * GB_S, "L40S (PCIe 4)",
                     borrowed("no published bf16 run on L40S")),
    "l4": Hardware(121, 32 * GB_S, 12.5 * GB_S, "L4 (PCIe 4)", borrowed("no published bf16 run on L4")),
    "a10g": Hardware(70, 32 * GB_S, 12.5 * GB_S, "A10G (PCIe 4)", borrowed("no published bf16 run on A10G")),
    # Infinity Fabric: 7 links × 64 GB/s per direction to the other 7 GPUs.
    "mi300x": Hardware(1307.4, 448 * GB_S, 50 * GB_S, "MI300X", borrowed("no published bf16 run on MI300X")),
}
"""`cluster.gpu` → its numbers. Every name of `recipe.Gpu` has a row (tested)."""


def hardware(plan: Plan) -> Hardware | None:
    """The plan's GPU with the recipe's overrides, or None when no peak is known."""
    base = GPUS.get(plan.recipe.cluster.gpu) if plan.recipe.cluster.gpu is not None else None
    if base is None and plan.recipe.cluster.peak_tflops is None:
        return None
    overrides = [key for key, value in (("peak_tflops", plan.recipe.cluster.peak_tflops),
                                        ("intra_node_bandwidth", plan.recipe.cluster.intra_node_bandwidth),
                                        ("inter_node_bandwidth", plan.recipe.cluster.inter_node_bandwidth))
                 if value is not None]
    fallback = GPUS["h100"]  # bandwidths and efficiency when only a peak is given
    name = (base.name if base else f"cluster.peak_tflops, {fallback.name} otherwise") + (
        f" (cluster.{', cluster.'.join(overrides)})" if base and overrides else "")
    return Hardware(
        peak_tflops=plan.recipe.cluster.peak_tflops or (base or fallback).peak_tflops,
        intra=(plan.recipe.cluster.intra_node_bandwidth or 0) * GB_S or (base or fallback).intra,
        inter=(plan.recipe.cluster.inter_node_bandwidth or 0) * GB_S or (base or fallback).inter,
        name=name,
        achieved=base.achieved if base else borrowed("cluster.gpu not given"),
    )
