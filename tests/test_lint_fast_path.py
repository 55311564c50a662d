"""lint, import, diff and explain stay on the fast path: no torch, no engine imported."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import RECIPES
from tests.test_fast_path import run_probe

CORPUS = Path(__file__).parent / "lint_corpus"


def test_code_review_commands_load_no_engine() -> None:
    # The probe wants exit 0, so lint runs on a clean recipe and a warning-only config.
    assert run_probe("lint", str(RECIPES / "tiny-cpu.yaml"), "--format", "sarif") == "HEAVY:"
    assert run_probe("lint", str(CORPUS / "DR320"), "--world", "8") == "HEAVY:"
    assert run_probe("explain", "DR310") == "HEAVY:"
    assert run_probe("import", str(CORPUS / "DR317" / "zero-optimisation" / "ds_config.json"),
                     "--world", "32") == "HEAVY:"
    assert run_probe("diff", str(RECIPES / "seed-8b-32gpu-zero2.yaml"), str(RECIPES / "seed-8b-32gpu-zero3.yaml"),
                     "--format", "markdown") == "HEAVY:"
