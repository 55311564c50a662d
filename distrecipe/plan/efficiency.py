"""Achieved efficiency: one figure per (engine family, GPU generation), and the matmuls' size.

An engine's kernels, fusions and overlap decide how much of a GPU's peak its matrix
multiplies reach, and a GPU generation's software matures over years: one figure per
GPU cannot describe Megatron-Core on H100 (46–49 % MFU in its own tables) and
torchtitan on the same GPU (about 40 %). So the figure is kept per **engine family**
(`kernel_family`: Megatron-style or torch's; DeepSpeed runs torch's modules) and **GPU generation**
(`generation`), each fitted on the published runs of that cell
(`tests/test_plan_calibration.py` checks every figure is the fit and reports each source
predicted by a fit made without it). A cell without rows borrows, by the product rule
e(F, G) = e(F, G′) · e(F′, G) / e(F′, G′) from the cells that have them, and says so.

On top, small matrix multiplies are slower (`matmul_factor`): a GEMM of M tokens × K
inputs × N outputs moves 2·(MK + KN + MN) bytes for 2·MKN FLOPs, so it takes
FLOPs / peak + bytes / HBM bandwidth (the additive roofline, Williams et al. 2009), and
the factor is the block's GEMMs' FLOPs-time share of that. It falls with fewer tokens per
rank (a small micro-batch, context parallelism) and with thinner shards (tensor
parallelism), which is what makes the search tell such layouts apart. A mixture of experts'
MLP is its local experts' own matmuls, each of the tokens routed to it (`expert_gemms`),
so few rows per expert read a whole expert's weights; and an MFU above its family's best
published run is flagged as not credible (`moe_ceiling`).
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.runner import uses_deepspeed
from distrecipe.job import Plan
from distrecipe.model_shapes import expert_width, kv_width

Family = str
"""`megatron`, `deepspeed` or `torch` (FSDP2 and DDP: torchtitan, Accelerate, verl's FSDP)."""
Generation = str
"""`volta`, `ampere`, `ada`, `hopper`, `blackwell`, `cdna2`, `cdna3`."""

GENERATIONS: tuple[tuple[str, Generation], ...] = (
    ("v100", "volta"), ("gh200", "hopper"), ("h100", "hopper"), ("h200", "hopper"), ("b200", "blackwell"),
    ("gb200", "blackwell"), ("b100", "blackwell"), ("a100", "ampere"), ("a10", "ampere"), ("a40", "ampere"),
    ("a6000", "ampere"), ("rtx-3090", "ampere"), ("rtx3090", "ampere"), ("l40", "ada"), ("l4", "ada"),
    ("rtx-4090", "ada"), ("rtx4090", "ada"), ("mi300", "cdna3"), ("mi325", "cdna3"), ("mi250", "cdna2"),
)
"""`cluster.gpu` names by prefix (first match) → generation."""

HBM: dict[Generation, float] = {"volta": 900e9, "ampere": 2.0e12, "ada": 864e9, "hopper": 3.35e12,
                                "blackwell": 8.0e12, "cdna2": 3.2e12, "cdna3": 5.3e12}
"""Bytes per second of device memory, per generation's data-centre part (datasheets: V100
SXM2 900 GB/s, A100 80GB 2,039, L40S 864, H100 SXM 3,350, B200 8,000, MI250X 3,200, MI300X
5,300); the
roofline's second term. A generation's other parts differ; the factor is a ratio, and the
fitted efficiency absorbs the level."""


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The achieved fraction of the peak in the matrix multiplies, and whose it is."""

    value: float
    basis: str
    """Where it comes from, as `plan` prints it: the rows it was fitted on, or what it is
    borrowed from and why."""
    borrowed: bool


FITTED: dict[tuple[Family, Generation], Efficiency] = {
    ("megatron", "ampere"): Efficiency(0.54, "fitted on 38 published runs (Megatron-LM 2021, BigScience)",
                                       False),
    ("megatron", "hopper"): Efficiency(0.79, "fitted on 9 published runs (Megatron-Core 2024)", False),
    ("torch", "ampere"): Efficiency(0.71, "fitted on 33 published runs (torchtitan, llm-foundry, "
                                          "IBM fms-fsdp, Colossal-AI)", False),
    ("torch", "hopper"): Efficiency(0.53, "fitted on 53 published runs (torchtitan, KempnerForge, "
                                          "llm-foundry)", False),
}
"""Each cell's figure, fitted as `tests/test_plan_calibration.py` checks (the median of
measured ÷ predicted tokens/s/GPU over the cell's rows is 1, rounded to two places)."""


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The highest MFU a published run of a mixture-of-experts family reached."""

    mfu: float
    source: str


MOE_CEILINGS: dict[str, Ceiling] = {
    "mixtral": Ceiling(0.473, "megatron_core_moe_readme_2411: Mixtral 8x7B, Megatron-Core with grouped "
                              "GEMM, 468 TFLOPS per H100 of 989"),
    "qwen3_moe": Ceiling(0.361, "megatron_moe_modelzoo_qwen3: Qwen3-235B-A22B at 128K, Megatron-Core with "
                                "DeepEP, 357 TFLOPS per H100 of 989 (dropless)"),
}
"""Per `model.family`, the best MFU of its published runs (`tests/corpus/gpu/published.csv`,
TFLOPS per GPU ÷ the GPU's dense 16-bit peak; `tests/plan/test_efficiency.py` checks each is
the corpus's maximum). Both are Megatron-Core's, grouped GEMM and tuned expert parallelism:
no published run of a mixture of experts went faster, while a dense efficiency applied to
the active parameters (all `steptime` knows) ignores the router, the token permutation, the
experts' small matrix multiplies and their all-to-all. An MFU above the ceiling is an
artefact of that, not a forecast (`plan --search` ranks it after every plausible one)."""


def moe_ceiling(plan: Plan) -> Ceiling | None:
    """The published ceiling for the plan's mixture of experts: its family's, or the best of
    any family's where its own has no published run; None for a dense model."""
    model = plan.recipe.model
    if not model.experts:
        return None
    if model.family in MOE_CEILINGS:
        return MOE_CEILINGS[model.family]
    best = max(MOE_CEILINGS.values(), key=lambda c: c.mfu)
    return Ceiling(best.mfu, f"no published run of the {model.family} family; the best of any mixture of "
                             f"experts: {best.source}")


def engine_family(plan: Plan) -> Family:
    """Whose kernels and overlap run the matmuls: Megatron's (strategy megatron, whatever
    launches it), DeepSpeed's engine (`zero`, or `ddp` under DeepSpeed), or torch's."""
    if plan.recipe.strategy == "megatron":
        return "megatron"
    return "deepspeed" if uses_deepspeed(plan) else "torch"


def generation(plan: Plan) -> Generation | None:
    """The GPU's generation from `cluster.gpu` (None when unknown)."""
    gpu = plan.recipe.cluster.gpu
    if gpu is None:
        return None
    return next((gen for prefix, gen in GENERATIONS if str(gpu).startswith(prefix)), None)


def kernel_family(plan: Plan) -> Family:
    """Whose matmul kernels run: DeepSpeed trains the script's torch modules (Hugging Face's,
    Megatron-DeepSpeed's are `megatron`), so it shares torch's figure; what DeepSpeed does
    differently, its overlap and its optimizer, `steptime` prices itself. Its published
    rows are judged by that figure, never fitted."""
    family = engine_family(plan)
    return "torch" if family == "deepspeed" else family


def efficiency(plan: Plan) -> Efficiency:
    """The cell's fitted figure, or one borrowed by the product rule (module docstring), or
    torch-on-Hopper's when the generation is unknown."""
    return lookup(kernel_family(plan), generation(plan), FITTED)


def lookup(family: Family, gen: Generation | None, table: dict[tuple[Family, Generation], Efficiency]
           ) -> Efficiency:
    """`table`'s figure for the cell, else borrowed (module docstring); the calibration
    test calls it with tables fitted without one source."""
    if gen is not None and (family, gen) in table:
        return table[(family, gen)]
    if gen is None:
        base = table.get(("torch", "hopper")) or next(iter(table.values()))
        return Efficiency(base.value, f"borrowed from {_cell(('torch', 'hopper'))}: the GPU's generation is "
                                      "unknown", True)
    for (f, g), known in table.items():
        if f == family:  # same family, another generation, scaled as a second family scales
            for (f2, g2), other in table.items():
                if g2 == gen and f2 != family and (f2, g) in table:
                    value = known.value * other.value / table[(f2, g)].value
                    basis = (f"borrowed: {_cell((f, g))} × {_cell((f2, g2))} / {_cell((f2, g))}, "
                             f"no published bf16 run of {_cell((family, gen))}")
                    return Efficiency(round(value, 2), basis, True)
    same_gen = [(f, v) for (f, g), v in table.items() if g == gen]
    if same_gen:
        f, known = same_gen[0]
        return Efficiency(known.value, f"borrowed from {_cell((f, gen))}: no published bf16 run of "
                                       f"{_cell((family, gen))}", True)
    cell = (family, "hopper") if (family, "hopper") in table else ("torch", "hopper")
    base = table.get(cell) or next(iter(table.values()))
    return Efficiency(base.value, f"borrowed from {_cell(cell)}: no published bf16 run on {_name(gen)} GPUs",
                      True)


def _name(gen: Generation) -> str:
    return {"cdna2": "CDNA 2", "cdna3": "CDNA 3"}.get(gen, gen.title())


def _cell(cell: tuple[Family, Generation]) -> str:
    family, gen = cell
    names = {"torch": "FSDP2/DDP", "deepspeed": "DeepSpeed", "megatron": "Megatron"}
    return f"{names[family]} on {_name(gen)}"


def gemms(plan: Plan) -> list[tuple[float, float, float]]:
    """(M, K, N) of one block's matmuls on one rank: q, k, v, o, and the MLP's (gate, up,
    down; a GPT block's two; a mixture of experts' per expert, `expert_gemms`), M the
    micro-batch's tokens on the rank, K and N the widths split by tensor parallelism. Empty
    when the shape is unknown."""
    m = plan.recipe.model
    h, heads, s = m.hidden_size, m.heads, plan.recipe.batch.seq_len
    if not (h and heads and s):
        return []
    t = plan.dims.tensor
    tokens = float(plan.batch.micro * -(-s // plan.dims.sequence))
    kv = kv_width(h, heads, m.kv_heads, m.head_dim)
    out = [(tokens, h, h / t), (tokens, h, 2 * kv / t), (tokens, h / t, h)]
    width = expert_width(m)
    if m.experts and m.experts_per_token and width:
        return out + expert_gemms(plan, tokens, h, width)
    inter = m.intermediate_size
    if inter:
        out += [(tokens, h, 2 * inter / t), (tokens, inter / t, h)]
    else:
        out += [(tokens, h, 4 * h / t), (tokens, 4 * h / t, h)]
    return out


def expert_gemms(plan: Plan, tokens: float, h: float, width: int) -> list[tuple[float, float, float]]:
    """A mixture-of-experts block's MLP matmuls on one rank: each of its E/ep routed experts
    (grouped GEMM or a loop, the same shapes) takes the tokens routed to it, k·tokens·ep/E
    of them with balanced routing (the ep ranks of its group send it theirs), through its
    own weights; the shared experts take every token. Small per-expert M is what makes a
    fine-grained mixture memory-bound: every local expert's weights are read for few rows."""
    m = plan.recipe.model
    assert m.experts and m.experts_per_token
    t, ep = plan.dims.tensor, plan.recipe.parallel.expert
    rows = tokens * m.experts_per_token * ep / m.experts
    out = [(rows, h, 2 * width / t), (rows, width / t, h)] * (m.experts // ep)
    shared = m.shared_experts * (m.shared_expert_size or width)
    if shared:
        out += [(tokens, h, 2 * shared / t), (tokens, shared / t, h)]
    return out


def matmul_factor(plan: Plan, peak_flops: float) -> float:
    """The block's GEMMs' compute time over compute + memory time (module docstring); 1.0
    when the shape or generation is unknown."""
    gen = generation(plan)
    shapes = gemms(plan)
    if gen is None or not shapes:
        return 1.0
    bandwidth = HBM[gen]
    flops = sum(2 * mm * k * n for mm, k, n in shapes) / peak_flops
    moved = sum(2 * (mm * k + k * n + mm * n) for mm, k, n in shapes) / bandwidth
    return flops / (flops + moved)
