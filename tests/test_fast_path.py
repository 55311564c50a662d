"""The fast path stays light: the CLI never imports torch or an engine."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import RECIPES

HEAVY = ("torch", "deepspeed", "accelerate", "verl", "transformers", "matplotlib", "distrecipe.judges")

PROBE = """
import sys
from distrecipe.cli import main
code = main(sys.argv[1:])
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
raise SystemExit(code)
"""


def run_probe(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_import_cli_loads_no_engine() -> None:
    assert run_probe("--help") == "HEAVY:"


def test_compile_and_resolve_load_no_engine() -> None:
    recipe = str(RECIPES / "seed-8b-32gpu-zero3.yaml")
    assert run_probe("compile", recipe) == "HEAVY:"
    assert run_probe("resolve", recipe, "--format", "json") == "HEAVY:"
