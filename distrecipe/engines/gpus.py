"""GPUs as facts: each `cluster.gpu`'s memory, dense 16-bit peak and bandwidths, with sources.

One table, below the translator, because the resolver reads it: `cluster.gpu: a100-80gb`
implies 80 GB of memory per GPU (`Plan.gpu_memory`), a `cluster.gpu_memory` that
contradicts it is refused naming both, and a GPU without bf16 (Volta) refuses a bf16
recipe. `plan/hardware.py` reads the peaks and bandwidths for step time and adds the
calibrated efficiencies, which are the planner's, not the GPU's.

Conventions (docs/plan.md, "The GPU table"):

* `memory` is the marketed size in GB (10⁹ bytes, as the seed's `80GB`); a GPU sold in
  several sizes under one name lists each, the first being the one the name implies.
  A stated `cluster.gpu_memory` agrees with a size v when it lies between v GB less
  `MEMORY_SLACK` and v GiB (2³⁰ bytes): HBM stacks are built in GiB, the marketed figure
  is in GB, and what `torch.cuda.get_device_properties().total_memory` reports (79.15 GiB
  on an 80 GB A100) lies in between.
* `peak_tflops` is the vendor's dense (no sparsity: half the "with sparsity" figure)
  16-bit tensor-core peak: bf16 where the GPU has it, fp16 on V100; GeForce cards' figure
  is the FP32-accumulate rate (training accumulates in fp32), half their FP16-accumulate one.
* `intra` is GB/s one GPU sends to a peer in its node, per direction (NVLink or Infinity
  Fabric total ÷ 2; the PCIe link where there is none); `inter` is one GPU's share of the
  node's network ports in the machines these are sold in (a property of the node, not the
  GPU: `cluster.inter_node_bandwidth` overrides it).
* `network_latency` is µs per ring step across nodes, NCCL's one figure for every network
  (`NETWORK_LATENCY`; `cluster.network_latency` overrides it); `nvlink` is false where peers
  talk over PCIe (a slower ring step inside the node).
* An MI250X package is two GCDs that PyTorch sees as two devices: a rank is one GCD, so its
  row is one GCD's (64 GB, half the package's 383 TFLOPS).
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.recipe import Gpu

NETWORK_LATENCY = 9.6
"""Microseconds one ring step across nodes costs, NCCL's own figure for its Simple protocol
(`hwLat[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]` in `src/graph/tuning.cc`, NVIDIA/nccl
@01afd20a): NCCL uses it for every network, so every row defaults to it;
`cluster.network_latency` overrides it."""

MEMORY_SLACK = 0.01
"""How far below the marketed size (in GB) a stated memory may be and still name the same
card: a size rounded down when written (`79.5GB` for 80 GB)."""


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model as the datasheets give it."""

    name: str
    memory: tuple[int, ...]
    """Marketed sizes in GB (10⁹ bytes); the first is the one `cluster.gpu` implies."""
    peak_tflops: float
    """Dense 16-bit tensor-core peak (module docstring)."""
    intra: float
    """GB/s to a peer in the node, per direction."""
    inter: float
    """GB/s of the node's network per GPU, per direction."""
    bf16: bool
    """Whether the tensor cores run bf16 (Volta's do not)."""
    source: str
    """Where the figures come from, and how sure they are."""
    nvlink: bool = True
    """Whether peers in the node talk over NVLink (or Infinity Fabric) rather than PCIe: NCCL
    charges a PCIe ring step 5.7 µs, an NVLink one 3.4 (`plan/network.py`)."""
    network_latency: float = NETWORK_LATENCY
    """Microseconds per ring step across nodes (`NETWORK_LATENCY`)."""

    @property
    def memory_bytes(self) -> int:
        """The memory `cluster.gpu` implies, in bytes."""
        return self.memory[0] * 10**9

    def agrees(self, stated: int) -> bool:
        """Whether `stated` bytes name one of this GPU's sizes (module docstring)."""
        return any(size * 10**9 * (1 - MEMORY_SLACK) <= stated <= size * 2**30 for size in self.memory)

    def sizes(self) -> str:
        """The sizes as a recipe writes them: `80GB` or `80GB or 96GB`."""
        return " or ".join(f"{size}GB" for size in self.memory)


GPUS: dict[Gpu, GpuSpec] = {
    "v100-16gb": GpuSpec(
        "V100 SXM2 16GB", (16,), 125, 150, 6.25, False,
        "NVIDIA V100 datasheet figures as third-party spec pages reproduce them: 125 TFLOPS fp16 "
        "tensor (no bf16), NVLink 2 300 GB/s total; DGX-1: 4 × 100 Gb/s EDR per 8 GPUs. Medium confidence"),
    "v100-32gb": GpuSpec(
        "V100 SXM2 32GB", (32,), 125, 150, 6.25, False,
        "as v100-16gb; the 32 GB SXM2 part differs only in capacity (DGX-2's SXM3 350 W part is "
        "clocked higher, about 130 TFLOPS, not modelled). Medium confidence"),
    "a10g": GpuSpec(
        "A10G (PCIe 4)", (24,), 70, 32, 12.5, True,
        "no datasheet for AWS's A10 variant was found: 70 TFLOPS is unverified (the A10's 125 is "
        "another, higher-clocked part); 24 GB GDDR6; PCIe 4 ×16. Low confidence", nvlink=False),
    "l4": GpuSpec(
        "L4 (PCIe 4)", (24,), 121, 32, 12.5, True,
        "NVIDIA L4: 242 TFLOPS fp16 tensor with sparsity (121 dense), 24 GB GDDR6, 72 W, PCIe 4 ×16. "
        "Medium-high confidence", nvlink=False),
    "l40s": GpuSpec(
        "L40S (PCIe 4)", (48,), 362.05, 32, 25, True,
        "NVIDIA L40S datasheet table: bf16 tensor 362.05 TFLOPS (733 with sparsity), 48 GB GDDR6, "
        "PCIe 4 ×16 (64 GB/s both ways), no NVLink. High confidence", nvlink=False),
    "a100-40gb": GpuSpec(
        "A100 40GB", (40,), 312, 300, 25, True,
        "NVIDIA A100 datasheet: bf16 tensor 312 TFLOPS (624 with sparsity), 40 GB HBM2, NVLink 3 "
        "600 GB/s total; DGX A100: 8 × 200 Gb/s HDR. High confidence"),
    "a100-80gb": GpuSpec(
        "A100 80GB", (80,), 312, 300, 25, True,
        "NVIDIA A100 datasheet: as a100-40gb with 80 GB HBM2e. High confidence"),
    "h100": GpuSpec(
        "H100 SXM", (80, 94, 96), 989, 450, 50, True,
        "NVIDIA H100 datasheet: bf16 tensor 989.4 TFLOPS dense (1,979 with sparsity), 80 GB HBM3, "
        "NVLink 4 900 GB/s total; DGX H100: 8 × 400 Gb/s NDR. Also sold with 94 GB (H100 NVL) and "
        "96 GB HBM (Grand Teton, GH200's GPU). High confidence"),
    "h100-pcie": GpuSpec(
        "H100 PCIe (PCIe 5, no NVLink)", (80,), 756, 64, 25, True,
        "NVIDIA H100 PCIe product brief: 80 GB HBM2e, 350 W, PCIe 5 ×16; 756 TFLOPS dense (1,513 "
        "with sparsity); unbridged cards talk over PCIe. Medium confidence", nvlink=False),
    "h200": GpuSpec(
        "H200 SXM", (141,), 989, 450, 50, True,
        "NVIDIA H200: 141 GB HBM3e at 4.8 TB/s, the H100 SXM's GH100 silicon and clocks (989 dense), "
        "NVLink 4. Medium-high confidence"),
    "gh200": GpuSpec(
        "GH200", (96, 144), 989, 450, 50, True,
        "GH200's Hopper GPU: the H100 SXM's 989 TFLOPS with 96 GB HBM3 (144 GB HBM3e in the later "
        "part); no GH200 datasheet was read. Low confidence"),
    "b200": GpuSpec(
        "B200", (180, 192), 2250, 900, 50, True,
        "HGX B200 at 1,000 W: 2,250 TFLOPS bf16 dense (4.5 PFLOPS with sparsity), NVLink 5 1.8 TB/s "
        "total; 180 GB per GPU in HGX/DGX B200 (192 GB the package). Medium-low confidence"),
    "mi250x": GpuSpec(
        "MI250X (one GCD)", (64,), 191.5, 50, 12.5, True,
        "AMD MI250X: 383 TFLOPS bf16 matrix and 128 GB HBM2e per package of two GCDs, each a device "
        "to PyTorch (64 GB, 191.5 TFLOPS); Infinity Fabric 50 GB/s per link and direction; "
        "Frontier: 4 × 200 Gb/s per 8 GCDs. Low confidence (AMD datasheet not read)"),
    "mi300x": GpuSpec(
        "MI300X", (192,), 1307.4, 448, 50, True,
        "AMD MI300X: 1,307.4 TFLOPS bf16 dense (2,614.9 with sparsity), 192 GB HBM3 at 5.3 TB/s, "
        "xGMI 7 links × 64 GB/s to the other 7 GPUs. Medium confidence"),
    "rtx3090": GpuSpec(
        "GeForce RTX 3090 (PCIe 4)", (24,), 71, 32, 12.5, True,
        "NVIDIA GA102 (Ampere whitepaper as remembered, not read): 142 TFLOPS fp16 tensor with fp16 "
        "accumulate, 71 with the fp32 accumulate training uses; 24 GB GDDR6X; PCIe 4 (the optional "
        "NVLink bridge joins two cards only). Low-medium confidence", nvlink=False),
    "rtx4090": GpuSpec(
        "GeForce RTX 4090 (PCIe 4)", (24,), 165.2, 32, 12.5, True,
        "NVIDIA AD102 (Ada whitepaper): 165.2 TFLOPS bf16/fp16 tensor with fp32 accumulate (330.3 "
        "with fp16 accumulate), 24 GB GDDR6X at 1,008 GB/s, PCIe 4, no NVLink. Medium confidence",
        nvlink=False),
}
"""`cluster.gpu` → its datasheet figures. Every name of `recipe.Gpu` has a row (tested)."""


def gpu_spec(gpu: Gpu | None) -> GpuSpec | None:
    """The row for `gpu`, or None when the recipe names no GPU model."""
    return None if gpu is None else GPUS[gpu]
