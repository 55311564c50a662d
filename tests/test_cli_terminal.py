"""What users see on their terminal: any console encoding, and what `-o` overwrote."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"


@pytest.mark.parametrize("args", [("plan", str(SEED)), ("resolve", str(SEED)), ("explain", "--list")])
def test_a_cp1252_console_gets_escapes_not_a_crash(args: tuple[str, ...]) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "cp1252"}
    done = subprocess.run([sys.executable, "-m", "distrecipe", *args], cwd=ROOT, env=env, capture_output=True,
                          check=False)
    assert done.returncode == 0, done.stderr.decode("cp1252", "replace")
    assert b"internal error" not in done.stderr


def test_plan_output_needs_the_escapes() -> None:
    """The case above is real: `plan` prints Ψ, which cp1252 cannot encode."""
    done = subprocess.run([sys.executable, "-m", "distrecipe", "plan", str(SEED)], cwd=ROOT, capture_output=True,
                          check=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert not all(char.encode("cp1252", "ignore") for char in done.stdout.decode("utf-8"))


def test_compile_says_what_it_overwrote(tmp_path: Path, cli: Callable[..., Any]) -> None:
    (tmp_path / "ds_config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    result = cli("compile", SEED, "-o", tmp_path)
    assert result.code == 0
    assert f"overwrote {tmp_path / 'ds_config.json'}" in result.err
    assert f"{tmp_path} also holds notes.txt, left as they were" in result.err
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert f"wrote {tmp_path / 'x' / 'ds_config.json'}" in cli("compile", SEED, "-o", tmp_path / "x").err
