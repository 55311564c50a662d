"""`plan --plot FILE`: stacked bars of what each GPU holds, one bar per strategy.

matplotlib is the optional `plot` extra and is imported only here, only when asked:
`distrecipe plan` itself must start without it.
"""

from __future__ import annotations

from pathlib import Path

from distrecipe.errors import DistrecipeError
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.report import Estimate
from distrecipe.plan.units import GB

STACK = {
    "parameters": ("parameters", "gathered"),
    "gradients": ("gradients", "fp32 gradients", "buffers"),
    "optimizer": ("master weights", "optimizer"),
}
"""The engine view's components grouped into the seed's three parts of model state."""


def stacks(rows: list[Estimate]) -> dict[str, list[float]]:
    """GB per category per row, at each row's engine peak; activations at their backward peak."""
    out: dict[str, list[float]] = {name: [] for name in (*STACK, "activations")}
    for row in rows:
        parts = row.engine.points[row.engine.peak_point]
        for name, members in STACK.items():
            out[name].append(sum(parts.get(m, 0.0) for m in members) / GB)
        out["activations"].append(row.activation / GB)
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
        usable = (memory - CONTEXT) / GB
        ax.axhline(usable, color="black", linewidth=1, linestyle="--",
                   label=f"for PyTorch's allocator {usable:.3g} GB")
    ax.set_ylabel("GB per GPU at the engine's peak (10⁹ bytes)")
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
