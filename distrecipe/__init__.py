"""distrecipe: one declarative recipe for distributed training.

The package is deliberately light at import time: nothing here imports torch or an
engine, so `distrecipe compile`, `resolve`, `lint`, `plan` and `diff` start fast.
"""

from __future__ import annotations

__version__ = "0.1.0"
