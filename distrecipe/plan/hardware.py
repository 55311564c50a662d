"""GPUs as numbers: dense 16-bit peak, the bandwidth one GPU gets to its peers, and the
efficiency `plan` achieves on it.

The figures are the GPU table's (`distrecipe/engines/gpus.py`, where the resolver also
reads each GPU's memory). Peaks are the vendors' dense (no sparsity) bf16 tensor-core figures; bandwidths are
per GPU and per direction, which is what a ring collective's per-rank bytes move
over: NVLink within a node, the node's network ports (one NIC per GPU on the
machines these were sold in) between nodes. A recipe overrides any of them with
`cluster.peak_tflops`, `cluster.intra_node_bandwidth`, `cluster.inter_node_bandwidth`,
`cluster.network_latency`.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.gpus import GPUS as GPU_SPECS
from distrecipe.engines.gpus import GpuSpec
from distrecipe.job import Plan
from distrecipe.plan.network import NETWORK_HOP, NVLINK_HOP, PCIE_HOP
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
    network_hop: float = NETWORK_HOP
    """Seconds one collective's ring step across nodes costs (`cluster.network_latency`)."""
    intra_hop: float = NVLINK_HOP
    """Seconds one ring step inside the node costs (NVLink's, or PCIe's without it)."""

    @property
    def efficiency(self) -> float:
        """Achieved fraction of the peak in the matrix multiplies (recompute included)."""
        return self.achieved.value


# Each efficiency is fitted as `tests/plan/test_steptime.py` checks: the figure e for which
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


CALIBRATED: dict[Gpu, Efficiency] = {"a100-40gb": A100, "a100-80gb": A100, "h100": H100, "h200": H200}
"""The GPUs published bf16 runs calibrate; every other GPU borrows H100's (`borrowed`)."""


UNCALIBRATED: dict[Gpu, str] = {"b200": "no published bf16 run on B200 (Megatron-Bridge's are FP8)"}
"""Why a GPU has no calibration, where there is more to say than that no run was found."""


def _hardware(gpu: Gpu, spec: GpuSpec) -> Hardware:
    short = spec.name.split(" (")[0]
    why = UNCALIBRATED.get(gpu, f"no published bf16 run on {short}")
    return Hardware(spec.peak_tflops, spec.intra * GB_S, spec.inter * GB_S, spec.name,
                    CALIBRATED.get(gpu) or borrowed(why), spec.network_latency * 1e-6,
                    NVLINK_HOP if spec.nvlink else PCIE_HOP)


# Peaks, memory and bandwidths are the datasheets' (`distrecipe/engines/gpus.py`, with sources;
# docs/plan.md, "The GPU table"); the efficiencies are this module's.
GPUS: dict[Gpu, Hardware] = {gpu: _hardware(gpu, spec) for gpu, spec in GPU_SPECS.items()}
"""`cluster.gpu` → its numbers. Every name of `recipe.Gpu` has a row (tested)."""


def hardware(plan: Plan) -> Hardware | None:
    """The plan's GPU with the recipe's overrides, or None when no peak is known."""
    base = GPUS.get(plan.recipe.cluster.gpu) if plan.recipe.cluster.gpu is not None else None
    if base is None and plan.recipe.cluster.peak_tflops is None:
        return None
    overrides = [key for key, value in (("peak_tflops", plan.recipe.cluster.peak_tflops),
                                        ("intra_node_bandwidth", plan.recipe.cluster.intra_node_bandwidth),
                                        ("inter_node_bandwidth", plan.recipe.cluster.inter_node_bandwidth),
                                        ("network_latency", plan.recipe.cluster.network_latency))
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
        network_hop=(plan.recipe.cluster.network_latency or 0) * 1e-6 or (base or fallback).network_hop,
        intra_hop=(base or fallback).intra_hop,
    )
