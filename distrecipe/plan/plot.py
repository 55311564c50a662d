"""`plan --plot FILE`: stacked bars of what each GPU holds, one bar per strategy.

matplotlib is the optional `plot` extra and is imported only here, only when asked:
`distrecipe plan` itself must start without it.
"""

from __future__ import annotations

from pathlib import Path

from distrecipe.errors import DistrecipeError
from distrecipe.plan.report import Estimate
from distrecipe.plan.units import GB

STACK = {
    "parameters": ("parameters", "gathered", "gathered blocks", "gathered head"),
    "gradients": ("gradients", "fp32 gradients", "bf16 gradient copy", "flattened gradients (transient)"),
    "optimizer": ("master weights", "optimizer", "optimizer temporaries"),
    "activations": ("activations (saved)", "loss / recompute (backward)"),
}
"""The allocator view's parts (`Memory.parts`, at its binding moment) grouped into the seed's
three parts of model state and the activations; everything else it holds is `buffers`."""


def stacks(rows: list[Estimate]) -> dict[str, list[float]]:
    """GB per category per row, the same numbers as the table's `needs`: what is allocated at
    the binding moment, the allocator's cache above it, and the CUDA context, so a bar
    above the GPU's line is exactly a row the table says does not fit."""
    names = (*STACK, "buffers", "allocator cache", "CUDA context")
    out: dict[str, list[float]] = {name: [] for name in names}
    for row in rows:
        parts = row.memory.parts
        grouped = {name: sum(parts.get(m, 0.0) for m in members) for name, members in STACK.items()}
        grouped["buffers"] = sum(parts.values()) - sum(grouped.values())
        grouped["allocator cache"] = row.memory.retained - row.memory.allocated
        grouped["CUDA context"] = row.training_need - row.memory.retained
        for name in names:
            out[name].append(grouped[name] / GB)
    return out


def plot(rows: list[Estimate], path: str, *, current: str) -> Path:
    """Write the bars to `path` (format from its extension: .svg, .png, .pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DistrecipeError(
            "--plot needs matplotlib: pip install 'distrecipe[plot]'") from None
    labels = [row.label for row in rows]
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4.5))
    bottom = [0.0] * len(rows)
    for name, values in stacks(rows).items():
        ax.bar(labels, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    memory = rows[0].plan.gpu_memory
    if memory is not None:
        ax.axhline(memory / GB, color="black", linewidth=1, label=f"GPU memory {memory / GB:g} GB")
    ax.set_ylabel("GB per GPU needed (10⁹ bytes), as the table's needs")
    ax.set_title(f"{rows[0].plan.recipe.name}: per-GPU memory (current: {current})")
    ax.legend(fontsize="small")
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out)
    except (OSError, ValueError) as exc:
        raise DistrecipeError(f"cannot write plot {out}: {exc}") from None
    finally:
        plt.close(fig)
    return out
