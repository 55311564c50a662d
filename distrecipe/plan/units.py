"""Byte units, spelled out: the seed's table is in GB (10⁹), GPU memory is sold in GiB."""

from __future__ import annotations

GB = 10**9
GiB = 2**30
MiB = 2**20


def gb(n: float) -> str:
    """`19.5 GB`: decimal gigabytes, trailing zeros dropped so the seed's numbers read as written."""
    value = n / GB
    if value and abs(value) < 0.1:
        return f"{value:.3g} GB"
    return f"{value:.2f}".rstrip("0").rstrip(".") + " GB"
