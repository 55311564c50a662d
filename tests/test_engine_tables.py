"""The stored key tables are what the installed engines say today.

`scripts/engine_tables.py --check` rebuilds every table from DeepSpeed, Accelerate,
verl and transformers and names each key that differs, so an engine upgrade fails here, with the keys
to look at, instead of drifting silently under lint.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # imports DeepSpeed, Accelerate, verl and transformers

ROOT = Path(__file__).resolve().parents[1]


def test_tables_match_installed_engines() -> None:
    pytest.importorskip("deepspeed")
    pytest.importorskip("accelerate")
    pytest.importorskip("verl")
    pytest.importorskip("transformers")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "engine_tables.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
