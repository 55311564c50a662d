"""Shared fixtures: run the CLI in-process, and write recipe files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from distrecipe.cli import main

# CI replays the same examples every run (a red build must mean a change broke
# something, not that a new random example was drawn); locally every run explores.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `distrecipe ARGS...` in-process; returns exit code, stdout and stderr."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write `text` to `tmp_path/name` and return the path."""

    def put(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return put


@pytest.fixture(scope="session")
def judge() -> Iterator[Any]:
    """verl's judge (distrecipe/judges/verl.py): one verl import and one Hydra context for the
    session, shared by the emitter's and lint's verl oracles (the import costs ≈ 8 s)."""
    oracle = pytest.importorskip("distrecipe.judges.verl", reason="verl is not installed")
    verl_judge = oracle.VerlJudge()
    yield verl_judge
    verl_judge.close()
