"""Byte units, spelled out: the seed's table is in GB (10⁹), GPU memory is sold in GiB."""

from __future__ import annotations

GB = 10**9
GiB = 2**30
MiB = 2**20


def gb(n: float) -> str:
    """`19.5 GB`: decimal units, trailing zeros dropped so the seed's numbers read as written.

    Below 0.1 GB the unit steps down to MB and kB (10⁶, 10³) so a tiny CPU model reads too.
    """
    steps = (("GB", GB), ("MB", 10**6))
    unit, size = next(((u, s) for u, s in steps if abs(n) >= 0.1 * s), ("kB", 10**3))
    return f"{n / size:.2f}".rstrip("0").rstrip(".") + f" {unit}"
