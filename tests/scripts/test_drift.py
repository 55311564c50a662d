"""`make drift` (scripts/drift.py): another release of one engine, installed in scratch,
prints its table's changes and the corpus verdicts that move, and writes nothing here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # installs a release from the package index and judges the corpus


def test_another_accelerate_release_prints_its_changes_and_moves_no_file() -> None:
    pytest.importorskip("accelerate")
    before = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    done = subprocess.run([sys.executable, "scripts/drift.py", "--release", "accelerate==1.15.0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    installed = __import__("accelerate").__version__
    assert lines[0].startswith(f"accelerate 1.15.0 against the installed {installed}: ")
    if installed == "1.16.0":  # what 1.16 dropped (MSAMP), read from both releases' tables
        assert "  table: + sections.fp8_config.keys.fp8_opt_level" in lines
        assert any(line.startswith("  verdict: accelerate/huggingface__accelerate__examples__config_yaml_templates__"
                                   "fp8.yaml: ") and "MSAMP" in line for line in lines)
    assert lines[-1].startswith("  verdicts: ")
    after = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    assert after == before, "drift wrote into the repository"
